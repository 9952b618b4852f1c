"""The built-in ledger kinds, one package each, registered when this package is imported,
with their reads.

The ledger (`store.ledger`) knows no kind: it loops over the registry
(`store.ledger.registry`), which a kind joins here, once. The generic compiler of reads
(`store.reads.compiled_sql`) knows no read: each joins the reads' registry
(`store.reads.registry`) here, once.
"""

from store.kinds.correction.kind import KIND as CORRECTION
from store.kinds.edge.kind import KIND as EDGE
from store.kinds.edge.reads import READS as EDGE_READS
from store.kinds.policy.kind import KIND as POLICY
from store.kinds.record.kind import KIND as RECORD
from store.kinds.record.reads import READS as RECORD_READS
from store.ledger.registry import register
from store.reads.registry import register as register_read

# The kinds are imported by their KIND alone: a name such as `record` here would hide the
# subpackage `store.kinds.record` from anything that reaches it as an attribute.
for _kind in (RECORD, CORRECTION, POLICY, EDGE):
    register(_kind)

for _read in (*RECORD_READS, *EDGE_READS):
    register_read(_read)
