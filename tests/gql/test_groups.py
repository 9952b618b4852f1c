"""Groups end to end: two or more members, paged members, removal, dissolution, history."""

from __future__ import annotations

import re

from tests.gql._api import ingest
from tests.gql._asserted import GROUP, UNGROUP, asserted, events, group, ids
from tests.support import Gateway

GROUP_ID = re.compile(r"^e_group:team_[0-9a-f]{32}$")


async def records(gateway: Gateway, n: int) -> list[str]:
    return [(await ingest(gateway, f"member {k}", ["topic:groups"]))["id"] for k in range(n)]


async def test_group_writes_one_value_on_every_member(gateway: Gateway) -> None:
    members = await records(gateway, 3)
    made = await group(gateway, [*members, members[0][:10]])  # a repeat is one member
    assert GROUP_ID.match(made["id"]), made["id"]
    assert made["hint"] == "team" and made["actor"] == "dev" and made["active"]
    assert sorted(ids(made)) == sorted(members)
    page = made["members"]
    assert page["totalCount"] == 3 and len(page["items"]) == 2 and page["pageInfo"]["hasNextPage"]
    for record_id in members:
        now = await asserted(gateway, record_id)
        assert now["version"] == 2 and [g["id"] for g in now["groups"]] == [made["id"]]
        assert now["versions"][-1]["event"] == "grouped"
        kind, payload = (await events(gateway, record_id))[-1]
        assert kind == "grouped" and payload["property"] == made["id"] and payload["members"] == 3


async def test_group_needs_two_distinct_records(gateway: Gateway) -> None:
    [one] = await records(gateway, 1)
    for given in ([one], [one, one[:10]], []):
        error = await gateway.error(GROUP, {"ids": given, "hint": "team"})
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "at least two distinct records" in error["message"]
    assert (await asserted(gateway, one))["version"] == 1


async def test_ungroup_removes_named_members_then_dissolves_below_two(gateway: Gateway) -> None:
    a, b, c, d = await records(gateway, 4)
    made = await group(gateway, [a, b, c, d])
    left = (await gateway.data(UNGROUP, {"id": made["id"], "ids": [b]}))["ungroup"]
    assert left["active"] and sorted(ids(left)) == sorted([a, c, d])
    assert left["members"]["totalCount"] == 3
    assert [(h["recordId"], h["change"]) for h in left["history"]][-1] == (b, "left")
    assert (await asserted(gateway, b))["groups"] == []
    kind, payload = (await events(gateway, b))[-1]
    assert kind == "ungrouped" and payload["dissolved"] is False

    # Removing two of the three leaves one: the group is dissolved, the last one leaves too.
    gone = (await gateway.data(UNGROUP, {"id": made["id"], "ids": [a, c]}))["ungroup"]
    assert gone["active"] is False and gone["endedBy"] == "dev"
    assert sorted(ids(gone)) == sorted([a, c, d])
    assert gone["members"]["totalCount"] == 0
    for record_id in (a, c, d):
        now = await asserted(gateway, record_id)
        assert now["groups"] == [] and now["version"] == 3
        kind, payload = (await events(gateway, record_id))[-1]
        assert kind == "ungrouped" and payload["dissolved"] is True
    history = [(h["recordId"], h["change"]) for h in gone["history"]]
    assert sorted(history[:4]) == sorted((r, "joined") for r in (a, b, c, d))
    assert sorted(history[5:]) == sorted((r, "left") for r in (a, c, d))


async def test_ungroup_without_names_dissolves(gateway: Gateway) -> None:
    a, b, c = await records(gateway, 3)
    made = await group(gateway, [a, b, c])
    gone = (await gateway.data(UNGROUP, {"id": made["id"]}))["ungroup"]
    assert gone["active"] is False
    for record_id in (a, b, c):
        assert (await asserted(gateway, record_id))["groups"] == []
    error = await gateway.error(UNGROUP, {"id": made["id"]})
    assert error["extensions"]["code"] == "CONFLICT"
    assert error["message"].startswith(f"group '{made['id']}' has ended already, at ")


async def test_ungroup_refuses_a_record_that_is_not_a_member(gateway: Gateway) -> None:
    a, b, outsider = await records(gateway, 3)
    made = await group(gateway, [a, b])
    error = await gateway.error(UNGROUP, {"id": made["id"], "ids": [outsider]})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "is not on group" in error["message"]
    assert sorted(error["extensions"]["allowed"]) == sorted([a, b])
    assert (await asserted(gateway, a))["version"] == 2
