"""The built-in ledger kinds, one package each, registered when this package is imported.

The ledger (`store.ledger`) knows no kind: it loops over the registry
(`store.ledger.registry`), which a kind joins here, once.
"""

from store.kinds.correction import kind as correction
from store.kinds.edge import kind as edge
from store.kinds.policy import kind as policy
from store.kinds.record import kind as record
from store.ledger.registry import register

for _kind in (record.KIND, correction.KIND, policy.KIND, edge.KIND):
    register(_kind)
