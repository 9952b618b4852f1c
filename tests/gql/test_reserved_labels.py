"""Reserved labels are written and removed only by connect, group, adjusts and their undo."""

from __future__ import annotations

import pytest

from tests.gql._api import ADD, INGEST, INGEST_MANY, REMOVE, UPDATE, ingest
from tests.gql._asserted import asserted, connect, group
from tests.support import Gateway

RESERVED = ["e_connect", "e_group", "e_adjustment"]


@pytest.mark.parametrize("label", RESERVED)
async def test_every_ordinary_path_refuses_or_rejects_a_reserved_label(
    gateway: Gateway, label: str
) -> None:
    value = f"{label}:x_{'0' * 32}"
    error = await gateway.error(INGEST, {"input": {"content": "x", "properties": [value]}})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["labels"] == [label]
    assert "reserved for the engine" in error["message"]
    error = await gateway.error(
        INGEST_MANY, {"inputs": [{"content": "ok"}, {"content": "x", "properties": [value]}]}
    )
    assert error["extensions"]["index"] == 1 and "reserved" in error["message"]

    record = await ingest(gateway, "x", ["org:A"])
    error = await gateway.error(UPDATE, {"id": record["id"], "properties": [value]})
    assert error["extensions"]["labels"] == [label]
    for variables in ({"labels": [label]}, {"properties": [value]}):
        error = await gateway.error(REMOVE, {"id": record["id"], **variables})
        assert error["extensions"]["labels"] == [label]
        assert "cannot be removed by removeProperties" in error["message"]
    change = (await gateway.data(ADD, {"id": record["id"], "properties": [value, "org:B"]}))[
        "addProperties"
    ]
    assert change["rejected"] == [value] and change["added"] == ["org:B"]
    assert change["record"]["properties"] == ["org:A", "org:B"]
    assert (await asserted(gateway, record["id"]))["version"] == 2


async def test_ordinary_edits_keep_the_engines_values(gateway: Gateway) -> None:
    a = (await ingest(gateway, "a", ["org:A", "topic:t"]))["id"]
    b = (await ingest(gateway, "b"))["id"]
    edge = await connect(gateway, a, b)
    team = await group(gateway, [a, b])
    await gateway.data(UPDATE, {"id": a, "content": "a2", "properties": ["org:Z"]})
    await gateway.data(REMOVE, {"id": a, "labels": ["topic"]})
    now = await asserted(gateway, a)
    assert now["properties"] == ["org:Z"]
    assert [c["id"] for c in now["connections"]] == [edge["id"]]
    assert [g["id"] for g in now["groups"]] == [team["id"]]
