"""The generated client, sync and async, against a real gateway: writes, reads, search,
subscriptions with resume, tokens, and refusals as `EdgeloomError` with the gateway's code
and message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from edgeloom_client import AsyncEdgeloom, Edgeloom, EdgeloomError
from edgeloom_client.async_client.input_types import IngestInput as AsyncIngestInput
from edgeloom_client.sync_client.input_types import IngestInput

from store.database import create_engine
from store.operations import tokens
from tests.clients.conftest import Served


async def mint(database_url: str, agent: str) -> str:
    engine = create_engine(database_url, pool_size=1)
    try:
        return (await tokens.create(engine, agent))[1]
    finally:
        await engine.dispose()


def test_sync_writes_and_reads(served: Served) -> None:
    with Edgeloom(served.url) as client:
        first = client.ingest(
            IngestInput(content="Acme renews in March.", properties=["org:Acme", "topic:syncs"])
        ).ingest
        assert first.id.startswith("sr_") and first.version == 1
        many = client.ingest_many(
            [
                IngestInput(content="Globex asks for a discount.", properties=["org:Globex"]),
                IngestInput(content="Acme signs the renewal.", properties=["org:Acme"]),
            ]
        ).ingest_many
        assert [record.properties for record in many] == [["org:Globex"], ["org:Acme"]]
        updated = client.update(first.id, content="Acme renews in April.", expected_version=1)
        assert updated.update.version == 2
        assert updated.update.updated_at > first.updated_at
        assert updated.update.created_at == first.created_at

        record = client.get_record(first.id[:9]).record
        assert record is not None and record.content == "Acme renews in April."
        old = client.get_record(first.id, as_of=first.updated_at).record
        assert old is not None and old.content == "Acme renews in March."

        gathered = client.gather(["org:Acme"]).gather
        assert gathered.total_count == 2
        assert {item.id for item in gathered.items} == {first.id, many[1].id}

        hits = client.search(text="discount").search
        assert [hit.record.id for hit in hits.items] == [many[0].id]
        assert hits.items[0].highlights[0].text.lower() == "discount"

        values = client.values("org", prefix="Ac").values
        assert [(value.value, value.member_count) for value in values.items] == [("Acme", 2)]

        walked = client.traverse(first.id).traverse
        assert many[1].id in {item.record.id for item in walked.items}

        retired = client.retire_record(many[0].id, reason="lost").retire_record
        assert retired.retired is not None and retired.retired.reason == "lost"
        with pytest.raises(EdgeloomError) as refused:
            client.get_record(many[0].id)
        assert refused.value.code == "NOT_FOUND" and "restoreRecord" in refused.value.message
        assert client.restore_record(many[0].id).restore_record.retired is None


def test_a_refusal_carries_the_gateways_code_and_message(served: Served) -> None:
    with Edgeloom(served.url) as client:
        record = client.ingest(IngestInput(content="One version.")).ingest
        with pytest.raises(EdgeloomError) as refused:
            client.update(record.id, content="Two.", expected_version=7)
        assert refused.value.code == "CONFLICT"
        assert "version" in refused.value.message
        with pytest.raises(EdgeloomError) as refused:
            client.ingest(IngestInput(content="Elsewhere.", lane="nowhere"))
        assert refused.value.code in ("BAD_USER_INPUT", "FORBIDDEN")
        assert "default" in refused.value.message
        assert refused.value.extensions["requestId"]


async def test_tokens_and_lanes(served_crm: Served) -> None:
    planner = await mint(served_crm.database_url, "planner")
    async with AsyncEdgeloom(served_crm.url) as anonymous:
        with pytest.raises(EdgeloomError) as refused:
            await anonymous.profile()
        assert refused.value.code == "UNAUTHENTICATED" and refused.value.status == 401
    async with AsyncEdgeloom(served_crm.url, token=planner) as client:
        profile = (await client.profile()).profile
        assert profile.agent == "planner" and profile.write_lanes == ["default"]
        with pytest.raises(EdgeloomError) as refused:
            await client.ingest(AsyncIngestInput(content="Deal.", lane="crm", sourceType="deal"))
        assert refused.value.code == "FORBIDDEN"
        assert "default" in refused.value.message


async def next_of(stream: Any) -> Any:
    return await asyncio.wait_for(anext(stream), 10)


async def test_subscriptions_resume_from_a_cursor(served: Served) -> None:
    async with AsyncEdgeloom(served.url) as client:
        first = (
            await client.ingest(AsyncIngestInput(content="Watched.", properties=["team:live"]))
        ).ingest
        events = client.audit_events(after="0", record_ids=[first.id])
        event = await next_of(events)
        assert (event.audit_events.kind, event.audit_events.record_id) == ("sr_ingested", first.id)
        cursor = event.audit_events.cursor
        await events.aclose()

        await client.update(first.id, content="Watched, changed.")
        resumed = client.audit_events(after=cursor, record_ids=[first.id])
        event = await next_of(resumed)
        assert event.audit_events.kind == "sr_updated"
        await resumed.aclose()

        watch = client.watch(["team:live"], initial=True)
        change = await next_of(watch)
        assert (change.watch.change.value, change.watch.record.id) == ("JOINED", first.id)
        second = (
            await client.ingest(AsyncIngestInput(content="Joins.", properties=["team:live"]))
        ).ingest
        change = await next_of(watch)
        assert (change.watch.change.value, change.watch.record.id) == ("JOINED", second.id)
        await watch.aclose()


async def test_a_subscription_refused_raises_the_gateways_error(served: Served) -> None:
    async with AsyncEdgeloom(served.url) as client:
        events = client.audit_events(lanes=["nowhere"])
        with pytest.raises(EdgeloomError) as refused:
            await next_of(events)
        assert refused.value.code == "BAD_USER_INPUT"
        assert "readable lanes: ['default']" in refused.value.message
