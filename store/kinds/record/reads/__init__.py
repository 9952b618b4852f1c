"""The record kind's reads, one module each, registered with the kinds (`store.kinds`)."""

from store.kinds.record.reads import (
    edge_property,
    gather,
    labels,
    record,
    records,
    search,
    traverse,
    values,
)

READS = (
    record.READ,
    records.READ,
    gather.READ,
    search.READ,
    labels.READ,
    values.READ,
    traverse.READ,
    edge_property.READ,
)
