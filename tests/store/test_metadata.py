"""Record metadata at the store's level, without HTTP: facts the engine writes about one
record are kept in its state and versions, hold no membership (so gather, labels,
traverse, value counts and the tag index never see them), cannot be written by a caller
as properties, and a version changing them alone says so in its event."""

from __future__ import annotations

import pytest

from policies.errors import ReservedLabelError
from store.kinds.record import queries, traverse
from store.kinds.record.commands import AddProperties, Ingest, NewRecord, Update
from store.kinds.record.reads import gather as gather_read
from store.kinds.record.reads import labels, values
from store.kinds.record.reads import records as records_read
from store.kinds.record.tags import tag_counts
from tests.conftest import GatewayFactory
from tests.intake._engine import engine
from tests.support import sql

POLICY = """
lanes:
  notes:
    source_types:
      documentary: { authority: documentary, allowed_labels: [file_id] }
agents:
  writer: { read: [notes], write: [notes] }
"""


async def test_metadata_is_kept_apart_from_every_walk_and_listing(
    start_gateway: GatewayFactory,
) -> None:
    url = (await start_gateway(policy_yaml=POLICY)).database_url
    async with engine(url) as on:

        async def write(*inputs: NewRecord) -> list[str]:
            [written] = [await on.executor.execute("writer", Ingest(inputs))]
            return [r.id for r in written]

        def part(n: int, file_id: str) -> NewRecord:
            # Two notes' sections at the same index and offset: as properties they would
            # share `part:0` and `offset:0`; as metadata they share nothing.
            return NewRecord(
                f"section {n} of {file_id} #real",
                (f"file_id:{file_id}",),
                "documentary",
                "notes",
                metadata=("part:0", "offset:0", "format:x" if n == 9 else "size:3"),
            )

        # A closed lane need not allow metadata: only `file_id` is a label here.
        a, b = await write(part(0, "fi_a"), part(1, "fi_b"))
        [generated] = await write(part(9, "fi_c"))
        db, lanes = on.snapshot, ["notes"]
        found = await queries.records_by_id(db, [a], lanes)
        assert found[a].state.metadata == {"part": "0", "offset": "0", "size": "3"}
        # No membership: listed, counted, gathered and walked by nothing.
        assert {c.label for c in await labels.label_counts(db, lanes, None)} == {"file_id"}
        for label in ("part", "e_meta_part"):
            page = await values.values(db, label, lanes, None, None, 10, None)
            assert page.items == [], label
        union = queries.GatherMode.UNION
        for match in (["part:0"], ["e_meta_part:0"], ["offset:0"]):
            page = await gather_read.gather(db, match, union, lanes, None, 10, None)
            assert page.items == [], match
        walked = await traverse.traverse(db, a, lanes, depth=2)
        assert walked.steps == [] and walked.clipped == []
        async with sql(url) as conn:
            held = await conn.fetchval(
                "SELECT count(*) FROM edge_properties WHERE label LIKE 'e_meta%'"
            )
        assert held == 0
        # Tags: of the sections a person wrote, not of content the engine wrote.
        assert [(t.tag, t.record_count) for t in await tag_counts(db, lanes, None)] == [("real", 2)]
        tagged = await records_read.browse(db, lanes, None, 10, None, True, "real")
        assert generated not in tagged.items and {a, b} == set(tagged.items)

        # A caller cannot write metadata as properties.
        change = await on.executor.execute("writer", AddProperties(b, ("e_meta_part:1",)))
        assert change.rejected == ["e_meta_part:1"] and change.added == []
        with pytest.raises(ReservedLabelError):
            await on.executor.execute("writer", Update(b, metadata=("e_x:1",)))
        # Changing metadata alone is a version whose event names the metadata.
        moved = await on.executor.execute("writer", Update(b, metadata=("offset:12",)))
        assert moved.version == 2 and moved.state.metadata["offset"] == "12"
        async with sql(url) as conn:
            payload = await conn.fetchval(
                "SELECT payload FROM audit_events WHERE record_id = $1 AND kind = 'sr_updated'",
                b,
            )
        assert '"metadata"' in payload and '"added": []' in payload
