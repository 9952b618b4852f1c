from __future__ import annotations

import dataclasses

import pytest

from policies.errors import LaneNotDeclaredError
from policies.model import (
    BUILTIN_SOURCE_TYPES,
    AgentProfile,
    LabelRule,
    Lane,
    Policy,
    SourceType,
    builtin_source_type,
)


def test_example_lanes(crm: Policy) -> None:
    assert crm.lane_names() == ["crm", "notes"]
    assert crm.lanes["notes"].is_open
    crm_lane = crm.lanes["crm"]
    assert not crm_lane.is_open
    assert crm_lane.enabled_source_types() == ["contact", "deal", "meeting", "report"]
    assert crm_lane.combined_labels() == ["org", "person", "stage", "title", "topic"]


def test_example_source_types(crm: Policy) -> None:
    types = crm.lanes["crm"].source_types
    assert types["deal"].labels == (
        LabelRule("org"),
        LabelRule("topic"),
        LabelRule("stage", ("lead", "proposal", "won", "lost")),
    )
    assert types["deal"].allowed_labels() == ["org", "stage", "topic"]
    assert types["report"].content_format == "json"
    assert types["report"].required_keys == ("title",)
    assert types["contact"].content_format is None
    assert all(st.authority == "documentary" for st in types.values())


def test_example_agents(crm: Policy) -> None:
    assert crm.agent("planner") == AgentProfile("planner", ("crm", "notes"), ("notes",), False)
    assert crm.agent("curator").apply_policy
    assert crm.agent("sales").writable_lanes(crm) == ["crm"]
    assert crm.agent("curator").writable_lanes(crm) == ["crm", "notes"]
    assert crm.policy_appliers() == ["curator"]


def test_offered_source_types(crm: Policy) -> None:
    offered = crm.lanes["notes"].offered_source_types()
    assert [(st.name, st.authority) for st in offered] == [
        ("conversational", "conversational"),
        ("documentary", "documentary"),
    ]
    assert [st.name for st in crm.lanes["crm"].offered_source_types()] == [
        "contact",
        "deal",
        "meeting",
        "report",
    ]


def test_builtin_source_type_rejects_non_builtins() -> None:
    assert [builtin_source_type(n).name for n in BUILTIN_SOURCE_TYPES] == list(BUILTIN_SOURCE_TYPES)
    with pytest.raises(ValueError):
        builtin_source_type("meeting")


def test_star_profile() -> None:
    star = AgentProfile("a", read=("*",), write=())
    assert star.can_read("anything")
    assert not star.can_write("anything")
    named = AgentProfile("b", read=("x",), write=("x",))
    assert named.can_write("x")
    assert not named.can_write("y")


def test_lane_lookup(crm: Policy) -> None:
    assert crm.lane("notes").name == "notes"
    with pytest.raises(LaneNotDeclaredError):
        crm.lane("nope")


def test_policy_is_immutable(crm: Policy) -> None:
    with pytest.raises(TypeError):
        crm.lanes["x"] = Lane("x")  # type: ignore[index]
    with pytest.raises(TypeError):
        crm.agents["x"] = AgentProfile("x")  # type: ignore[index]
    with pytest.raises(TypeError):
        crm.lanes["crm"].source_types["x"] = SourceType("x")  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        crm.lanes["crm"].name = "other"  # type: ignore[misc]


def test_constructed_policy_copies_its_mappings() -> None:
    lanes = {"a": Lane("a")}
    policy = Policy(lanes=lanes)
    lanes["b"] = Lane("b")
    assert policy.lane_names() == ["a"]


def test_label_rule_values() -> None:
    assert LabelRule("org").allows_value("anything")
    closed = LabelRule("stage", ("won",))
    assert closed.allows_value("won")
    assert not closed.allows_value("lost")
