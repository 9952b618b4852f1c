from __future__ import annotations

import pytest

from policies.errors import (
    ContentFormatError,
    HiddenMemberError,
    LabelNotAllowedError,
    LaneForbiddenError,
    LaneNotDeclaredError,
    PolicyApplyForbiddenError,
    RequiredKeysError,
    ReservedLabelError,
    SourceTypeNotAllowedError,
    UnknownAgentError,
    ValueNotAllowedError,
)
from policies.guard import (
    SetChange,
    Stamp,
    check_added_labels,
    check_apply_policy,
    check_caller_properties,
    check_record,
    check_write_lane,
    decide_set,
)
from policies.loader import dev_policy, load_policy
from policies.model import AgentProfile, Policy
from policies.properties import Property, parse_properties

REPORT = '{"title": "Q3 renewal", "body": "..."}'


def curator(policy: Policy) -> AgentProfile:
    return policy.agent("curator")


# -- the seed's refusals, word for word --------------------------------------------------


def test_seed_label_refusal(crm: Policy) -> None:
    props = parse_properties(["org:Acme", "budget:120k"])
    with pytest.raises(LabelNotAllowedError) as caught:
        check_record(crm, curator(crm), "crm", "meeting", "Renewal call with Acme.", props)
    assert caught.value.message == (
        "label(s) ['budget'] not allowed for source_type 'meeting' in lane 'crm'; "
        "allowed: ['org', 'person', 'topic']"
    )
    assert caught.value.extensions() == {
        "allowed": ["org", "person", "topic"],
        "lane": "crm",
        "sourceType": "meeting",
        "got": ["budget"],
    }


def test_seed_closed_lane_refusal(crm: Policy) -> None:
    with pytest.raises(SourceTypeNotAllowedError) as caught:
        check_record(crm, curator(crm), "crm", None, "hello", [])
    assert caught.value.message == (
        "lane 'crm' is closed — source_type must be one of "
        "['contact', 'deal', 'meeting', 'report'] (got 'conversational'); "
        "builtins are excluded in a closed lane."
    )
    assert caught.value.allowed == ["contact", "deal", "meeting", "report"]


def test_seed_value_refusal(crm: Policy) -> None:
    props = parse_properties(["org:Acme", "stage:maybe"])
    with pytest.raises(ValueNotAllowedError) as caught:
        check_record(crm, curator(crm), "crm", "deal", "Acme deal", props)
    assert caught.value.message == (
        "value 'maybe' not allowed for label 'stage' on source_type 'deal' in lane 'crm'; "
        "allowed values (in order): ['lead', 'proposal', 'won', 'lost']"
    )
    assert caught.value.extensions() == {
        "allowed": ["lead", "proposal", "won", "lost"],
        "lane": "crm",
        "sourceType": "deal",
        "label": "stage",
        "got": "maybe",
    }


def test_seed_open_lane_refusal(crm: Policy) -> None:
    with pytest.raises(SourceTypeNotAllowedError) as caught:
        check_record(crm, curator(crm), "notes", "meeting", "hello", [])
    assert caught.value.message == (
        "lane 'notes' is open — source_type must be a builtin "
        "['conversational', 'documentary'] (got 'meeting')."
    )


def test_json_refusal(crm: Policy) -> None:
    with pytest.raises(ContentFormatError) as caught:
        check_record(crm, curator(crm), "crm", "report", "not json", [])
    assert caught.value.message == (
        "content must be JSON for source_type 'report' in lane 'crm'; "
        "got invalid JSON (Expecting value at line 1 column 1)"
    )


def test_json_error_position_is_reported(crm: Policy) -> None:
    with pytest.raises(ContentFormatError, match=r"\(Expecting ',' delimiter at line 2 column 1\)"):
        check_record(crm, curator(crm), "crm", "report", '{"title": 1\n"x": 2}', [])


def test_required_keys_refusal(crm: Policy) -> None:
    with pytest.raises(RequiredKeysError) as caught:
        check_record(crm, curator(crm), "crm", "report", '{"name": "x"}', [])
    assert caught.value.message == (
        "content for source_type 'report' in lane 'crm' is missing required key(s) "
        "['title']; required: ['title']"
    )
    assert caught.value.extensions()["missing"] == ["title"]


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("[1, 2]", "array"),
        ('"title"', "string"),
        ("3", "number"),
        ("true", "boolean"),
        ("null", "null"),
    ],
)
def test_required_keys_need_an_object(crm: Policy, content: str, kind: str) -> None:
    with pytest.raises(RequiredKeysError) as caught:
        check_record(crm, curator(crm), "crm", "report", content, [])
    assert caught.value.message == (
        "content for source_type 'report' in lane 'crm' must be a JSON object with keys "
        f"['title']; got a JSON {kind}"
    )


def test_add_properties_refusal_uses_combined_labels(crm: Policy) -> None:
    with pytest.raises(LabelNotAllowedError) as caught:
        check_added_labels(crm, curator(crm), "crm", ["org", "budget", "amount"])
    assert caught.value.message == (
        "label(s) ['amount', 'budget'] not allowed in lane 'crm'; "
        "allowed: ['org', 'person', 'stage', 'title', 'topic']"
    )
    assert "sourceType" not in caught.value.extensions()


def test_reserved_label_refusal() -> None:
    props = parse_properties(["org:Acme", "e_group:team_0123", "e_connect:x_1"])
    with pytest.raises(ReservedLabelError) as caught:
        check_caller_properties(props)
    assert caught.value.message == (
        "label(s) ['e_connect', 'e_group'] are reserved for the engine; "
        "labels beginning with 'e_' cannot be written by ingest or update"
    )
    assert caught.value.code == "BAD_USER_INPUT"


def test_reserved_label_refusal_names_the_operation() -> None:
    error = ReservedLabelError(["e_group"], operation="removed by removeProperties")
    assert error.message.endswith(
        "labels beginning with 'e_' cannot be removed by removeProperties"
    )


def test_caller_properties_without_reserved_labels_pass() -> None:
    check_caller_properties(parse_properties(["org:Acme", "email:a@b.c"]))


# -- open / closed lane matrix -----------------------------------------------------------


@pytest.mark.parametrize("source_type", [None, "conversational", "documentary"])
def test_open_lane_takes_builtins_and_any_label(crm: Policy, source_type: str | None) -> None:
    props = parse_properties(["anything:goes", "budget:120k", "free text"])
    stamp = check_record(crm, curator(crm), "notes", source_type, "hello", props)
    expected = source_type or "conversational"
    assert stamp == Stamp(lane="notes", source_type=expected, authority=expected)


@pytest.mark.parametrize("source_type", ["meeting", "report", "", "Conversational"])
def test_open_lane_refuses_other_types(crm: Policy, source_type: str) -> None:
    with pytest.raises(SourceTypeNotAllowedError, match="lane 'notes' is open"):
        check_record(crm, curator(crm), "notes", source_type, "hello", [])


@pytest.mark.parametrize("source_type", ["conversational", "documentary", "nope"])
def test_closed_lane_refuses_builtins_and_unknown(crm: Policy, source_type: str) -> None:
    with pytest.raises(SourceTypeNotAllowedError, match=f"\\(got '{source_type}'\\)"):
        check_record(crm, curator(crm), "crm", source_type, "hello", [])


DISABLED = """
lanes:
  crm:
    source_types:
      contact: { allowed_labels: [org] }
      legacy: { allowed_labels: [org, budget], enabled: false }
agents:
  a: { read: ["*"], write: ["*"] }
"""


def test_disabled_type_is_refused_as_absent() -> None:
    policy = load_policy(DISABLED, "disabled.yaml")
    with pytest.raises(SourceTypeNotAllowedError) as caught:
        check_record(policy, policy.agent("a"), "crm", "legacy", "x", [])
    assert caught.value.message == (
        "lane 'crm' is closed — source_type must be one of ['contact'] (got 'legacy'); "
        "builtins are excluded in a closed lane."
    )


def test_disabled_type_labels_leave_the_combined_list() -> None:
    policy = load_policy(DISABLED, "disabled.yaml")
    with pytest.raises(LabelNotAllowedError, match=r"\['budget'\] not allowed in lane 'crm'"):
        check_added_labels(policy, policy.agent("a"), "crm", ["budget"])


def test_closed_lane_with_only_disabled_types_takes_nothing() -> None:
    policy = load_policy(
        "lanes: {crm: {source_types: {old: {enabled: false}}}}\nagents: {a: {write: [crm]}}"
    )
    assert not policy.lanes["crm"].is_open
    with pytest.raises(SourceTypeNotAllowedError, match=r"must be one of \[\] \(got 'old'\)"):
        check_record(policy, policy.agent("a"), "crm", "old", "x", [])
    with pytest.raises(SourceTypeNotAllowedError, match="is closed"):
        check_record(policy, policy.agent("a"), "crm", None, "x", [])


# -- labels, values, content ---------------------------------------------------------------


def test_labels_are_limited_not_demanded(crm: Policy) -> None:
    stamp = check_record(crm, curator(crm), "crm", "meeting", "call", [])
    assert stamp == Stamp("crm", "meeting", "documentary")


def test_all_offending_labels_are_listed_sorted(crm: Policy) -> None:
    props = parse_properties(["zeta:1", "org:Acme", "alpha:2", "zeta:3"])
    with pytest.raises(LabelNotAllowedError, match=r"label\(s\) \['alpha', 'zeta'\] not allowed"):
        check_record(crm, curator(crm), "crm", "meeting", "x", props)


def test_type_with_no_labels_allows_none() -> None:
    policy = load_policy("lanes: {crm: {source_types: {bare: {}}}}\nagents: {a: {write: [crm]}}")
    agent = policy.agent("a")
    assert check_record(policy, agent, "crm", "bare", "x", []).authority == "conversational"
    with pytest.raises(LabelNotAllowedError, match=r"allowed: \[\]$"):
        check_record(policy, agent, "crm", "bare", "x", parse_properties(["org:Acme"]))


def test_general_label_needs_allowing_on_a_closed_lane(crm: Policy) -> None:
    with pytest.raises(LabelNotAllowedError, match=r"\['general'\]"):
        check_record(crm, curator(crm), "crm", "meeting", "x", parse_properties(["free text"]))


@pytest.mark.parametrize("stage", ["lead", "proposal", "won", "lost"])
def test_closed_values_accept_each_listed_value(crm: Policy, stage: str) -> None:
    props = parse_properties([f"stage:{stage}", "org:any value at all"])
    assert check_record(crm, curator(crm), "crm", "deal", "x", props).source_type == "deal"


@pytest.mark.parametrize("stage", ["Won", "won ", "maybe"])
def test_closed_values_are_exact(crm: Policy, stage: str) -> None:
    props = [*parse_properties(["org:Acme"]), Property("stage", stage)]
    with pytest.raises(ValueNotAllowedError):
        check_record(crm, curator(crm), "crm", "deal", "x", props)


def test_labels_are_checked_before_values(crm: Policy) -> None:
    props = parse_properties(["stage:maybe", "budget:1"])
    with pytest.raises(LabelNotAllowedError):
        check_record(crm, curator(crm), "crm", "deal", "x", props)


def test_source_type_is_checked_before_labels(crm: Policy) -> None:
    with pytest.raises(SourceTypeNotAllowedError):
        check_record(crm, curator(crm), "crm", "memo", "x", parse_properties(["budget:1"]))


def test_values_are_checked_before_content(crm: Policy) -> None:
    policy = load_policy(
        """
lanes:
  crm:
    source_types:
      report: { allowed_labels: [{label: stage, values: [won]}], content_format: json,
                required_keys: [title] }
agents: { a: { write: [crm] } }
"""
    )
    agent = policy.agent("a")
    with pytest.raises(ValueNotAllowedError):
        check_record(policy, agent, "crm", "report", "not json", parse_properties(["stage:lost"]))
    with pytest.raises(ContentFormatError):
        check_record(policy, agent, "crm", "report", "not json", parse_properties(["stage:won"]))
    with pytest.raises(RequiredKeysError):
        check_record(policy, agent, "crm", "report", "{}", parse_properties(["stage:won"]))


def test_valid_report_is_stamped(crm: Policy) -> None:
    props = parse_properties(["org:Acme", "topic:renewal"])
    stamp = check_record(crm, curator(crm), "crm", "report", REPORT, props)
    assert stamp == Stamp(lane="crm", source_type="report", authority="documentary")


def test_json_without_required_keys_accepts_any_json() -> None:
    policy = load_policy(
        "lanes: {l: {source_types: {blob: {content_format: json}}}}\nagents: {a: {write: [l]}}"
    )
    agent = policy.agent("a")
    for content in ["[1]", '"s"', "null", "{}"]:
        check_record(policy, agent, "l", "blob", content, [])
    with pytest.raises(ContentFormatError):
        check_record(policy, agent, "l", "blob", "{'single': 'quotes'}", [])


def test_text_content_format_checks_nothing() -> None:
    policy = load_policy(
        "lanes: {l: {source_types: {memo: {content_format: text}}}}\nagents: {a: {write: [l]}}"
    )
    check_record(policy, policy.agent("a"), "l", "memo", "not json {", [])


@pytest.mark.parametrize("content", ['{"title": NaN}', '{"title": Infinity}', "-Infinity"])
def test_python_json_extensions_are_not_json(crm: Policy, content: str) -> None:
    with pytest.raises(ContentFormatError, match="is not JSON"):
        check_record(crm, curator(crm), "crm", "report", content, [])


def test_deeply_nested_json_is_refused_not_crashed(crm: Policy) -> None:
    content = "[" * 200_000 + "]" * 200_000
    with pytest.raises(ContentFormatError, match="nested too deeply"):
        check_record(crm, curator(crm), "crm", "report", content, [])


def test_extra_keys_in_json_are_fine(crm: Policy) -> None:
    check_record(crm, curator(crm), "crm", "report", '{"title": "t", "more": [1]}', [])


# -- authority ------------------------------------------------------------------------------


def test_authority_follows_the_type() -> None:
    policy = load_policy(
        """
lanes:
  l:
    source_types:
      fact: { authority: documentary }
      chat: {}
      rumour: { authority: hearsay }
agents: { a: { write: [l] } }
"""
    )
    agent = policy.agent("a")
    assert check_record(policy, agent, "l", "fact", "x", []).authority == "documentary"
    assert check_record(policy, agent, "l", "chat", "x", []).authority == "conversational"
    assert check_record(policy, agent, "l", "rumour", "x", []).authority == "hearsay"


def test_builtin_authority_is_its_name(crm: Policy) -> None:
    agent = curator(crm)
    assert check_record(crm, agent, "notes", "documentary", "x", []).authority == "documentary"
    assert check_record(crm, agent, "notes", None, "x", []).authority == "conversational"


# -- reserved labels in check_record and check_added_labels ----------------------------------


def test_check_record_ignores_engine_labels(crm: Policy) -> None:
    # update passes the merged set, which may hold the engine's own labels
    props = parse_properties(["org:Acme", "e_connect:ab_0123", "e_adjustment:fix_1"])
    check_record(crm, curator(crm), "crm", "meeting", "x", props)


def test_check_added_labels_skips_reserved(crm: Policy) -> None:
    check_added_labels(crm, curator(crm), "crm", ["org", "e_connect"])


def test_check_added_labels_does_not_check_values_or_type(crm: Policy) -> None:
    # stage is allowed by deal only, and with closed values; add checks neither
    check_added_labels(crm, curator(crm), "crm", ["stage", "title", "person"])


def test_open_lane_allows_any_added_label(crm: Policy) -> None:
    check_added_labels(crm, curator(crm), "notes", ["budget", "Whatever Label"])


# -- lanes and agents ---------------------------------------------------------------------


def test_write_outside_profile_is_forbidden(crm: Policy) -> None:
    with pytest.raises(LaneForbiddenError) as caught:
        check_record(crm, crm.agent("planner"), "crm", "meeting", "x", [])
    error = caught.value
    assert error.message == "agent 'planner' may not write to lane 'crm'; writable lanes: ['notes']"
    assert error.code == "FORBIDDEN"
    assert error.extensions() == {
        "allowed": ["notes"],
        "agent": "planner",
        "lane": "crm",
        "access": "write",
    }


def test_lane_is_checked_before_source_type(crm: Policy) -> None:
    with pytest.raises(LaneForbiddenError):
        check_record(crm, crm.agent("sales"), "notes", "nonsense", "x", [])


def test_add_labels_needs_write_access(crm: Policy) -> None:
    with pytest.raises(LaneForbiddenError, match="writable lanes: \\['notes'\\]"):
        check_added_labels(crm, crm.agent("planner"), "crm", ["org"])


def test_undeclared_lane_takes_no_write(crm: Policy) -> None:
    with pytest.raises(LaneNotDeclaredError) as caught:
        check_write_lane(crm, curator(crm), "archive")
    assert caught.value.message == (
        "lane 'archive' is not declared by the policy in force; declared lanes: ['crm', 'notes']"
    )
    assert caught.value.code == "BAD_USER_INPUT"
    assert caught.value.allowed == ["crm", "notes"]


def test_undeclared_lane_refused_even_for_star_writer(crm: Policy) -> None:
    assert curator(crm).can_write("archive")
    with pytest.raises(LaneNotDeclaredError):
        check_record(crm, curator(crm), "archive", None, "x", [])


def test_default_lane_exists_only_if_declared(crm: Policy) -> None:
    with pytest.raises(LaneNotDeclaredError):
        check_write_lane(crm, curator(crm), "default")
    dev = dev_policy()
    check_write_lane(dev, dev.agent("dev"), "default")


def test_readable_lanes(crm: Policy) -> None:
    assert crm.agent("planner").readable_lanes(crm) == ["crm", "notes"]
    assert crm.agent("sales").readable_lanes(crm) == ["crm"]
    assert crm.agent("curator").readable_lanes(crm) == ["crm", "notes"]


def test_apply_policy(crm: Policy) -> None:
    check_apply_policy(crm, crm.agent("curator"))
    with pytest.raises(PolicyApplyForbiddenError) as caught:
        check_apply_policy(crm, crm.agent("planner"))
    assert caught.value.code == "FORBIDDEN"
    assert caught.value.message == (
        "agent 'planner' may not apply a policy; agents with apply_policy: ['curator']"
    )
    assert caught.value.allowed == ["curator"]


def test_unknown_agent(crm: Policy) -> None:
    with pytest.raises(UnknownAgentError) as caught:
        crm.agent("ghost")
    assert caught.value.code == "UNAUTHENTICATED"
    assert "agent 'ghost' is not declared by the policy in force" in caught.value.message
    assert caught.value.extensions() == {"agent": "ghost"}


# -- changes to connections, groups and chains ----------------------------------------------


def test_a_set_is_changed_only_by_who_may_read_and_write_every_record_on_it(crm: Policy) -> None:
    planner, sales = crm.agent("planner"), crm.agent("sales")
    decide_set(crm, planner, SetChange("group", "e_group:g_0", ("notes", "notes")))
    decide_set(crm, curator(crm), SetChange("group", "e_group:g_0", ("crm", "notes")))
    # Readable but not writable: the refusal names the lanes it may write.
    with pytest.raises(LaneForbiddenError) as refused:
        decide_set(crm, planner, SetChange("group", "e_group:g_0", ("notes", "crm")))
    assert refused.value.message == (
        "agent 'planner' may not write to lane 'crm'; writable lanes: ['notes']"
    )
    # Not readable: the hidden records are not named, the lanes it may change are.
    with pytest.raises(HiddenMemberError) as hidden:
        decide_set(crm, sales, SetChange("adjustment chain", "e_adjustment:adj_0", ("crm",), 1))
    assert hidden.value.message == (
        "adjustment chain 'e_adjustment:adj_0' also joins records in lanes you may not read; "
        "only an agent that may read and write every record it joins can change it (you may "
        "change those whose records are all in the lanes ['crm'])"
    )
    assert hidden.value.extensions() == {"allowed": ["crm"], "id": "e_adjustment:adj_0"}
    with pytest.raises(HiddenMemberError) as hidden:
        decide_set(crm, planner, SetChange("connection", "e_connect:c_0", ("notes",), 1))
    assert hidden.value.allowed == ["notes"]
