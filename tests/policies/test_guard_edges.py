"""The guard's decision on typed edges: both records readable, the from lane writable."""

from __future__ import annotations

import pytest

from policies.errors import LaneForbiddenError, NotReadableError
from policies.guard import EdgeChange, decide_edge
from policies.loader import load_policy

POLICY = load_policy(
    """
lanes:
  open: {}
  shared: {}
  hidden: {}
agents:
  reader: { read: [open, shared], write: [open] }
""",
    "test",
)
READER = POLICY.agent("reader")


def test_an_edge_between_readable_records_from_a_writable_lane_is_allowed() -> None:
    decide_edge(POLICY, READER, EdgeChange("record", "sr_x", "open", "shared"))


@pytest.mark.parametrize("ends", [("open", "hidden"), ("hidden", "open")])
def test_an_unreadable_end_is_refused_as_if_it_did_not_exist(ends: tuple[str, str]) -> None:
    with pytest.raises(NotReadableError) as refused:
        decide_edge(POLICY, READER, EdgeChange("edge", "edge_1", *ends))
    assert refused.value.code == "NOT_FOUND"
    assert refused.value.message == "no edge with id 'edge_1' exists or is readable by you"
    assert refused.value.extensions() == {"id": "edge_1"}


def test_writing_needs_the_from_lane() -> None:
    with pytest.raises(LaneForbiddenError) as refused:
        decide_edge(POLICY, READER, EdgeChange("record", "sr_x", "shared", "open"))
    assert refused.value.allowed == ["open"]
