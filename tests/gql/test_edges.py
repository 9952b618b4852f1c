"""Typed edges over GraphQL: upsert on the live key, retire, resolve, and their reads."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

from tests.conftest import GatewayFactory
from tests.gql._api import AUDIT, ingest
from tests.gql._edges import CONFLICTS, RELATED, RESOLVE, RETIRE, UPSERT, edges, ego, upsert
from tests.support import Gateway, sql

QUOTE = {"quote": "See [[00-overview]] for context.", "source": "01-runbook.md", "offset": 170}


async def pair(gateway: Gateway) -> tuple[str, str]:
    a = await ingest(gateway, "The renewal is due in March.")
    b = await ingest(gateway, "The renewal is due in April.")
    return a["id"], b["id"]


async def test_upsert_creates_then_updates_keeping_what_is_left_out(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    made = await upsert(
        gateway,
        fromId=a[:10],
        toId=b,
        type="supports",
        weight=0.9,
        evidence=QUOTE,
        confidence=0.5,
        detector="wikilink@2",
    )
    assert re.fullmatch(r"edge_[0-9a-f]{32}", made["id"])
    assert (made["fromId"], made["toId"], made["namespace"]) == (a, b, "default")
    assert made["provenanceActor"] == "dev" and made["provenanceType"] == "agent"
    assert made["evidence"] == QUOTE and made["version"] == 1 and made["invalidAt"] is None
    assert made["validAt"] == made["createdAt"] and made["conflictState"] is None

    # Same key, named by full ids this time: the same edge, a new version; what the
    # update leaves out keeps its value.
    moved = await upsert(gateway, fromId=a, toId=b, type="supports", weight=0.4)
    assert moved["id"] == made["id"] and moved["version"] == 2 and moved["weight"] == 0.4
    assert moved["evidence"] == QUOTE and moved["confidence"] == 0.5
    assert moved["detector"] == "wikilink@2" and moved["validAt"] == made["validAt"]
    # Nothing new: nothing written.
    same = await upsert(gateway, fromId=a, toId=b, type="supports", weight=0.4)
    assert same["version"] == 2
    # Another namespace is another key.
    other = await upsert(gateway, fromId=a, toId=b, type="supports", namespace="crm")
    assert other["id"] != made["id"] and other["weight"] == 1.0
    assert other["detector"] == "manual@1" and other["evidence"] is None

    events = (await gateway.data(AUDIT, {"recordId": a, "kinds": ["edge_upserted"]}))["audit"]
    payloads = [e["payload"] for e in events["items"]]
    assert [(p["edgeId"], p["created"], p["changed"]) for p in payloads] == [
        (made["id"], True, []),
        (made["id"], False, ["weight"]),
        (other["id"], True, []),
    ]


async def test_two_concurrent_upserts_of_one_key_make_one_edge(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    made = await asyncio.gather(
        *(upsert(gateway, fromId=a, toId=b, type="related_to", weight=w / 10) for w in range(6))
    )
    assert len({e["id"] for e in made}) == 1
    assert sorted(e["version"] for e in made) == [1, 2, 3, 4, 5, 6]


async def test_inputs_out_of_range_or_of_the_wrong_shape_are_refused(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    cases = [
        ({"weight": 1.5}, "weight is 1.5; it must be between 0 and 1 inclusive"),
        ({"confidence": -0.1}, "confidence is -0.1; it must be between 0 and 1"),
        ({"evidence": "a line"}, "evidence must be a JSON object or a list of objects"),
        ({"evidence": 3}, "got a scalar"),
        ({"evidence": [QUOTE, "x"]}, "got a list holding something else"),
        ({"evidence": {"score": 0.5}}, "numbers in evidence are integers"),
        ({"provenanceType": "guess"}, "provenanceType 'guess' is unknown; it is one of"),
        ({"conflictState": "unresolved"}, "conflictState is only for 'contradicts' edges"),
        ({"type": "has space"}, "type 'has space' is not allowed"),
    ]
    for extra, message in cases:
        fields = {"fromId": a, "toId": b, "type": "supports"} | extra
        error = await gateway.error(UPSERT, {"input": fields})
        assert error["extensions"]["code"] == "BAD_USER_INPUT", (extra, error)
        assert message in error["message"], (extra, error["message"])
    # Never clamped: nothing was written.
    assert (await edges(gateway, fromId=a))["totalCount"] == 0
    error = await gateway.error(UPSERT, {"input": {"fromId": a, "toId": a, "type": "supports"}})
    assert "two different records" in error["message"]
    missing = "sr_" + "0" * 32
    error = await gateway.error(UPSERT, {"input": {"fromId": a, "toId": missing, "type": "x"}})
    assert error["extensions"]["code"] == "NOT_FOUND"


async def test_an_inferred_write_never_overwrites_an_asserted_or_resolved_edge(
    gateway: Gateway,
) -> None:
    a, b = await pair(gateway)
    asserted = await upsert(gateway, fromId=a, toId=b, type="supports", provenanceType="human")
    error = await gateway.error(
        UPSERT,
        {
            "input": {
                "fromId": a,
                "toId": b,
                "type": "supports",
                "provenanceType": "inferred",
                "weight": 0.1,
            }
        },
    )
    assert error["extensions"]["code"] == "CONFLICT"
    assert error["extensions"]["edgeId"] == asserted["id"]
    assert f"edge '{asserted['id']}' holds" in error["message"]
    assert "asserted by human 'dev'" in error["message"]
    # An inferred edge may be refined by inference, and an asserted write takes it over.
    inferred = await upsert(gateway, fromId=b, toId=a, type="supports", provenanceType="inferred")
    again = await upsert(
        gateway, fromId=b, toId=a, type="supports", provenanceType="inferred", weight=0.3
    )
    assert again["id"] == inferred["id"] and again["weight"] == 0.3
    # A resolved contradiction is not reopened by inference either.
    c = await upsert(gateway, fromId=a, toId=b, type="contradicts", provenanceType="inferred")
    await gateway.data(RESOLVE, {"edgeId": c["id"], "resolution": "REFUTED", "resolver": "cur"})
    error = await gateway.error(
        UPSERT,
        {"input": {"fromId": a, "toId": b, "type": "contradicts", "provenanceType": "inferred"}},
    )
    assert (
        error["extensions"]["code"] == "CONFLICT"
        and "resolved (REFUTED by cur)" in error["message"]
    )


async def test_every_resolution_and_its_refusals(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    c = await upsert(gateway, fromId=a, toId=b, type="contradicts", evidence=[QUOTE])
    assert c["conflictState"] == "unresolved" and c["resolution"] is None

    def refused(expected: str, code: str = "BAD_USER_INPUT", **args: object) -> object:
        async def check() -> None:
            error = await gateway.error(
                RESOLVE, {"edgeId": c["id"], "resolution": "SUPERSEDED", "resolver": "r"} | args
            )
            assert error["extensions"]["code"] == code, error
            assert expected in error["message"], error["message"]

        return check()

    await refused(f"resolution SUPERSEDED needs winnerId: the edge's fromId '{a}' or its toId")
    await refused("is not an endpoint of edge", winnerId="sr_" + "1" * 32)
    await refused("winnerId is only for resolution SUPERSEDED", resolution="MERGED", winnerId=a)
    await refused("no edge with id", "NOT_FOUND", edgeId="edge_" + "0" * 32)
    await refused("is not a valid id; expected 'edge_' followed by 32 hex", edgeId="nope")
    error = await gateway.error(RESOLVE, {"edgeId": c["id"], "resolution": "WON", "resolver": "r"})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    supports = await upsert(gateway, fromId=a, toId=b, type="supports")
    await refused(
        "only 'contradicts' edges are resolved", edgeId=supports["id"], resolution="REFUTED"
    )

    versions = [c["version"]]
    for resolution, winner in [
        ("ACCEPTED_DUAL", None),
        ("REFUTED", None),
        ("MERGED", None),
        ("SUPERSEDED", b[:12]),
    ]:
        done = (
            await gateway.data(
                RESOLVE,
                {
                    "edgeId": c["id"],
                    "resolution": resolution,
                    "resolver": "curator",
                    "winnerId": winner,
                },
            )
        )["resolveConflict"]
        # As the seed's conflict_state: the resolution itself.
        assert done["conflictState"] == resolution.lower() and done["resolution"] == resolution
        assert done["resolver"] == "curator" and done["winnerId"] == (b if winner else None)
        versions.append(done["version"])
    assert versions == [1, 2, 3, 4, 5]
    # An update that leaves conflictState out keeps it resolved (unlike a last-write-wins
    # upsert that clears it).
    kept = await upsert(gateway, fromId=a, toId=b, type="contradicts", weight=0.7)
    assert kept["conflictState"] == "superseded" and kept["resolution"] == "SUPERSEDED"
    reopened = await upsert(
        gateway, fromId=a, toId=b, type="contradicts", conflictState="unresolved"
    )
    assert reopened["conflictState"] == "unresolved" and reopened["resolution"] is None
    events = await gateway.data(AUDIT, {"recordId": a, "kinds": ["conflict_resolved"]})
    assert [e["payload"]["resolution"] for e in events["audit"]["items"]] == [
        "ACCEPTED_DUAL",
        "REFUTED",
        "MERGED",
        "SUPERSEDED",
    ]


QUEUE_POLICY = """
lanes:
  default: {}
  queue: {}
agents:
  dev: { read: ["*"], write: ["*"] }
"""


async def test_the_review_queue_before_and_after_a_resolution(
    start_gateway: GatewayFactory,
) -> None:
    gateway = await start_gateway(policy_yaml=QUEUE_POLICY, anonymous_agent="dev")
    lane = "queue"
    elsewhere = (await ingest(gateway, "Elsewhere."))["id"]
    x = await ingest(gateway, "Sam leads the project.", lane=lane)
    y = await ingest(gateway, "Kim leads the project.", lane=lane)
    z = await ingest(gateway, "The project has no lead.", lane=lane)
    first = await upsert(
        gateway,
        fromId=x["id"],
        toId=y["id"],
        type="contradicts",
        evidence=QUOTE,
        provenanceActor="reader-bot",
    )
    second = await upsert(gateway, fromId=y["id"], toId=z["id"], type="contradicts")
    await upsert(gateway, fromId=x["id"], toId=z["id"], type="supports")
    # Of another lane: not in this lane's queue.
    await upsert(gateway, fromId=elsewhere, toId=x["id"], type="contradicts")

    async def queue(status: str | None = None) -> dict[str, object]:
        args = {"lanes": [lane]} | ({"status": status} if status else {})
        page: dict[str, object] = (await gateway.data(CONFLICTS, args))["conflicts"]
        return page

    before = await queue()
    assert before["totalCount"] == 2
    items = before["items"]
    assert isinstance(items, list)
    assert [i["id"] for i in items] == [first["id"], second["id"]]  # oldest first
    assert items[0]["provenanceActor"] == "reader-bot" and items[0]["evidence"] == QUOTE
    assert items[0]["fromRecord"]["content"] == "Sam leads the project."
    assert items[0]["toRecord"]["content"] == "Kim leads the project."

    await gateway.data(
        RESOLVE,
        {
            "edgeId": first["id"],
            "resolution": "SUPERSEDED",
            "resolver": "lead",
            "winnerId": y["id"],
        },
    )
    after = await queue()
    assert after["totalCount"] == 1 and [i["id"] for i in after["items"]] == [second["id"]]
    resolved = await queue("RESOLVED")
    assert [i["id"] for i in resolved["items"]] == [first["id"]]
    assert resolved["items"][0]["conflictState"] == "superseded"
    everything = await queue("ALL")
    assert [i["id"] for i in everything["items"]] == [second["id"], first["id"]]
    paged = await gateway.data(CONFLICTS, {"status": "ALL", "lanes": [lane], "first": 1})
    page = paged["conflicts"]
    assert page["pageInfo"]["hasNextPage"] is True and page["totalCount"] == 2
    rest = await gateway.data(
        CONFLICTS,
        {"status": "ALL", "lanes": [lane], "first": 1, "after": page["pageInfo"]["endCursor"]},
    )
    assert [i["id"] for i in rest["conflicts"]["items"]] == [first["id"]]


async def test_retire_then_read_now_with_include_expired_and_as_of(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    start = datetime.now(UTC) - timedelta(days=10)
    made = await upsert(gateway, fromId=a, toId=b, type="supports", validAt=start.isoformat())
    assert datetime.fromisoformat(made["validAt"]) == start
    during = datetime.now(UTC)
    await asyncio.sleep(0.01)
    retired = (await gateway.data(RETIRE, {"id": made["id"]}))["retireEdge"]
    assert retired["version"] == 2 and retired["invalidAt"] and retired["expiredAt"]
    after = datetime.now(UTC) + timedelta(seconds=1)

    now = await edges(gateway, fromId=a)
    assert now["totalCount"] == 0
    shown = await edges(gateway, fromId=a, includeExpired=True)
    assert [e["id"] for e in shown["items"]] == [made["id"]]
    assert shown["items"][0]["expiredAt"] == retired["expiredAt"]
    # Before it held (validAt), while it held, and after it was retired.
    before = await edges(gateway, fromId=a, asOf=(start - timedelta(days=1)).isoformat())
    assert before["totalCount"] == 0
    then = await edges(gateway, fromId=a, asOf=during.isoformat())
    assert [(e["id"], e["version"], e["invalidAt"]) for e in then["items"]] == [
        (made["id"], 1, None)
    ]
    later = await edges(gateway, fromId=a, asOf=after.isoformat())
    assert later["totalCount"] == 0
    later = await edges(gateway, fromId=a, asOf=after.isoformat(), includeExpired=True)
    assert [e["version"] for e in later["items"]] == [2]

    # Retiring a retired edge changes nothing and says so.
    error = await gateway.error(RETIRE, {"id": made["id"]})
    assert error["extensions"]["code"] == "CONFLICT" and "retired already" in error["message"]
    # The key is free again: a new live edge, the old one kept.
    fresh = await upsert(gateway, fromId=a, toId=b, type="supports")
    assert fresh["id"] != made["id"] and fresh["version"] == 1
    # A retirement dated before the edge held is refused.
    error = await gateway.error(
        RETIRE, {"id": fresh["id"], "invalidAt": (start - timedelta(days=30)).isoformat()}
    )
    assert "is before the edge's validAt" in error["message"]
    kinds = (await gateway.data(AUDIT, {"recordId": a, "kinds": ["edge_retired"]}))["audit"]
    assert [e["payload"]["edgeId"] for e in kinds["items"]] == [made["id"]]
    async with sql(gateway.database_url) as conn:
        rows = await conn.fetch("SELECT version FROM ledger WHERE object_id = $1", made["id"])
    assert sorted(r["version"] for r in rows) == [1, 2]  # never deleted


async def test_edges_filters_and_pages_and_related(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    c = (await ingest(gateway, "A third account."))["id"]
    ab = await upsert(gateway, fromId=a, toId=b, type="supports", namespace="n1")
    ac = await upsert(gateway, fromId=a, toId=c, type="derived_from", namespace="n1")
    ca = await upsert(gateway, fromId=c, toId=a, type="supports", namespace="n2")
    assert [e["id"] for e in (await edges(gateway, fromId=a))["items"]] == [ab["id"], ac["id"]]
    assert [e["id"] for e in (await edges(gateway, toId=a))["items"]] == [ca["id"]]
    both = await edges(gateway, fromId=a, type="supports", namespace="n1")
    assert [e["id"] for e in both["items"]] == [ab["id"]]
    assert (await edges(gateway, fromId=a, namespace="n2"))["totalCount"] == 0
    first = await edges(gateway, fromId=a, first=1)
    assert first["totalCount"] == 2 and first["pageInfo"]["hasNextPage"] is True
    rest = await edges(gateway, fromId=a, first=1, after=first["pageInfo"]["endCursor"])
    assert [e["id"] for e in rest["items"]] == [ac["id"]] and not rest["pageInfo"]["hasNextPage"]
    nothing = await edges(gateway, fromId="sr_" + "0" * 32)
    assert nothing["totalCount"] == 0

    around = (await gateway.data(RELATED, {"id": a[:12]}))["related"]
    assert around["recordId"] == a and around["record"]["id"] == a
    assert [(e["id"], e["toRecord"]["id"]) for e in around["outgoing"]["items"]] == [
        (ab["id"], b),
        (ac["id"], c),
    ]
    assert [(e["id"], e["fromRecord"]["content"]) for e in around["incoming"]["items"]] == [
        (ca["id"], "A third account.")
    ]
    assert around["outgoing"]["totalCount"] == 2 and around["incoming"]["totalCount"] == 1
    only = (await gateway.data(RELATED, {"id": a, "namespace": "n2"}))["related"]
    assert only["outgoing"]["items"] == [] and only["outgoing"]["totalCount"] == 0
    assert [e["id"] for e in only["incoming"]["items"]] == [ca["id"]]
    # Each list is a page, as edges(fromId:) pages the same edges.
    one = (await gateway.data(RELATED, {"id": a, "first": 1}))["related"]["outgoing"]
    assert [e["id"] for e in one["items"]] == [ab["id"]] and one["totalCount"] == 2
    assert one["pageInfo"] == first["pageInfo"]
    after = {"id": a, "first": 1, "after": one["pageInfo"]["endCursor"]}
    rest_of = (await gateway.data(RELATED, after))["related"]["outgoing"]
    assert [e["id"] for e in rest_of["items"]] == [ac["id"]]
    assert rest_of["pageInfo"]["hasNextPage"] is False


async def test_reads_as_of_an_instant_see_the_edge_as_it_was_recorded_then(
    gateway: Gateway,
) -> None:
    a, b = await pair(gateway)
    before = datetime.now(UTC)
    first = await upsert(gateway, fromId=a, toId=b, type="cites", weight=0.5, evidence=QUOTE)
    between = datetime.now(UTC)
    await asyncio.sleep(0.01)
    await upsert(gateway, fromId=a, toId=b, type="cites", weight=0.7, evidence=[])
    now = (await edges(gateway, fromId=a))["items"]
    assert [(e["version"], e["weight"], e["evidence"]) for e in now] == [(2, 0.7, [])]
    then = (await edges(gateway, fromId=a, asOf=between.isoformat()))["items"]
    assert [(e["version"], e["weight"], e["evidence"]) for e in then] == [(1, 0.5, QUOTE)]
    assert then[0]["updatedAt"] == first["updatedAt"]
    assert (await edges(gateway, fromId=a, asOf=before.isoformat()))["totalCount"] == 0
    around = (await gateway.data(RELATED, {"id": a, "asOf": between.isoformat()}))["related"]
    assert [e["id"] for e in around["outgoing"]["items"]] == [first["id"]]
    view = await ego(gateway, nodes=[b], asOf=between.isoformat())
    assert [(e["id"], e["weight"]) for e in view["edges"]] == [(first["id"], 0.5)]
    assert (await ego(gateway, nodes=[b], asOf=before.isoformat()))["edges"] == []


async def test_evidence_as_a_literal_and_a_cursor_from_elsewhere(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    literal = (
        f'mutation {{ upsertEdge(input: {{ fromId: "{a}", toId: "{b}", type: "supports", '
        'evidence: [{ quote: "x", source: "f.md", offset: 3 }] }) { evidence } }'
    )
    made = await gateway.data(literal)
    assert made["upsertEdge"]["evidence"] == [{"quote": "x", "source": "f.md", "offset": 3}]
    for after in ("nope", "WyIyIiwiMjAyNi0wMS0wMVQwMDowMDowMCIsImEiXQ"):
        error = await gateway.error(CONFLICTS, {"after": after})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "is not one this list gave out" in error["message"]


async def test_a_type_spelled_like_an_id_prefix_is_a_type(gateway: Gateway) -> None:
    a, b = await pair(gateway)
    prefix = a[:9]
    made = await upsert(gateway, fromId=prefix, toId=b, type=prefix)
    again = await upsert(gateway, fromId=a, toId=b, type=prefix, weight=0.5)
    assert again["id"] == made["id"] and made["type"] == prefix and again["version"] == 2
