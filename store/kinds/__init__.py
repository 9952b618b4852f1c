"""The built-in ledger kinds, one package each, registered when this package is imported.

The ledger (`store.ledger`) knows no kind: it loops over the registry
(`store.ledger.registry`), which a kind joins here, once.
"""

from store.kinds.correction.kind import KIND as CORRECTION
from store.kinds.edge.kind import KIND as EDGE
from store.kinds.policy.kind import KIND as POLICY
from store.kinds.record.kind import KIND as RECORD
from store.ledger.registry import register

# The kinds are imported by their KIND alone: a name such as `record` here would hide the
# subpackage `store.kinds.record` from anything that reaches it as an attribute.
for _kind in (RECORD, CORRECTION, POLICY, EDGE):
    register(_kind)
