"""The typed-edge kind's reads, one module each, registered with the kinds (`store.kinds`)."""

from store.kinds.edge.reads import conflicts, edges, related

READS = (edges.READ, related.READ, conflicts.READ)
