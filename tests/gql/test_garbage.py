"""A request leaves no reference cycle behind: what it built is freed by reference
counting when it ends, so the cyclic collector has nothing of it to trace."""

from __future__ import annotations

import gc

from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from gql.api.context import Context
from tests.gql._api import ADD, AUDIT, UPDATE, ingest
from tests.support import Gateway


async def test_mutations_and_queries_leave_no_cyclic_garbage(gateway: Gateway) -> None:
    record = await ingest(gateway, "warm", ["org:Acme"])
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for n in range(5):
            record = await ingest(gateway, f"cycle {n}", ["org:Acme", f"topic:t{n}"])
            await gateway.data(UPDATE, {"id": record["id"], "content": f"cycle {n}, again"})
            await gateway.data(ADD, {"id": record["id"], "properties": [f"tag:t{n}"]})
            # A read the compiled path leaves to strawberry.
            await gateway.data(AUDIT, {"recordId": record["id"]})
        gc.collect()
        left = [
            type(o).__qualname__
            for o in gc.garbage
            if isinstance(o, StrawberryGraphQLCoreExecutionContext | Context)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []
