"""Which detected edges a run upserts and retires."""

from __future__ import annotations

from store.intake.detect import SAME_DIR, WIKILINK, Edge, Ref
from store.intake.edges import plan_edges
from store.intake.seams import LiveEdge

A, A0, B = Ref("a.md"), Ref("a.md", 0), Ref("b.md")
IDS = {A: "sr_a", A0: "sr_a0", B: "sr_b"}
QUOTE = {"quote": "see [[b]]", "source": "a.md", "offset": 4}


def test_new_edges_are_upserted_and_live_ones_left() -> None:
    link = Edge(WIKILINK, A0, B, QUOTE)
    chain = Edge(SAME_DIR, A, B, {"rationale": "a.md and b.md share directory .", "source": "a.md"})
    plan = plan_edges([link, chain], IDS, [])
    assert [(u.from_id, u.to_id, u.edge.detector.id) for u in plan.upserts] == [
        ("sr_a0", "sr_b", "wikilink@1"),
        ("sr_a", "sr_b", "same_dir@1"),
    ]
    live = [
        LiveEdge("edge_1", "sr_a0", "sr_b", "wikilink@1", QUOTE),
        LiveEdge("edge_2", "sr_a", "sr_b", "same_dir@1", dict(chain.evidence)),
    ]
    again = plan_edges([link, chain], IDS, live)
    assert again.upserts == [] and again.retires == []


def test_moved_evidence_is_written_again_and_gone_edges_retired() -> None:
    live = [
        LiveEdge("edge_1", "sr_a0", "sr_b", "wikilink@1", QUOTE),
        LiveEdge("edge_2", "sr_a", "sr_b", "same_dir@1", {}),
    ]
    moved = Edge(WIKILINK, A0, B, {**QUOTE, "offset": 10})
    plan = plan_edges([moved], IDS, live)
    assert [u.edge for u in plan.upserts] == [moved]
    assert [e.id for e in plan.retires] == ["edge_2"]


def test_an_end_without_a_record_makes_no_edge() -> None:
    plan = plan_edges([Edge(WIKILINK, A0, Ref("refused.md"), QUOTE)], IDS, [])
    assert plan.upserts == [] and plan.retires == []
    # Nor does a link to the file's own record from itself.
    assert plan_edges([Edge(WIKILINK, A, A, QUOTE)], IDS, []).upserts == []
