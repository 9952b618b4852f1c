from __future__ import annotations

import pytest

from policies.errors import PolicyLoadError
from policies.loader import DEV_POLICY_YAML, dev_policy, load_policy
from policies.model import DEFAULT_LANE, LabelRule, Policy

AGENTS = "agents: {a: {read: ['*'], write: ['*']}}\n"


def refuse(text: str, source: str = "test.yaml") -> PolicyLoadError:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy(text, source)
    error = caught.value
    assert error.code == "BAD_USER_INPUT"
    assert error.message.startswith(f"policy {source!r}")
    assert error.source == source
    return error


def one_type(body: str) -> str:
    return f"lanes:\n  crm:\n    source_types:\n      report: {body}\n" + AGENTS


def test_example_loads(crm_yaml: str) -> None:
    policy = load_policy(crm_yaml, "crm.yaml")
    assert sorted(policy.agents) == ["curator", "planner", "sales"]


def test_dev_policy() -> None:
    policy = dev_policy()
    assert policy.lane_names() == [DEFAULT_LANE]
    assert policy.lanes[DEFAULT_LANE].is_open
    dev = policy.agent("dev")
    assert dev.read == ("*",) and dev.write == ("*",) and dev.apply_policy
    assert load_policy(DEV_POLICY_YAML) == policy


@pytest.mark.parametrize(
    "lane", ["notes: {}", "notes:", "notes: {source_types: {}}", "notes: {source_types: }"]
)
def test_open_lane_spellings(lane: str) -> None:
    assert load_policy(f"lanes:\n  {lane}\n").lanes["notes"].is_open


def test_agents_are_optional_and_default_to_no_access() -> None:
    policy = load_policy("lanes: {notes: {}}\nagents: {idle: }")
    idle = policy.agent("idle")
    assert idle.read == () and idle.write == () and not idle.apply_policy
    assert load_policy("lanes: {notes: {}}").agents == {}


def test_duplicate_lane_refs_collapse() -> None:
    policy = load_policy("lanes: {n: {}}\nagents: {a: {read: [n, n, '*']}}")
    assert policy.agent("a").read == ("n", "*")


def test_source_type_defaults() -> None:
    st = load_policy(one_type("{}")).lanes["crm"].source_types["report"]
    assert (st.authority, st.labels, st.content_format, st.required_keys, st.enabled) == (
        "conversational",
        (),
        None,
        (),
        True,
    )
    assert load_policy(one_type("")).lanes["crm"].source_types["report"] == st


def test_label_map_without_values_takes_any_value() -> None:
    policy = load_policy(one_type("{allowed_labels: [{label: org}]}"))
    assert policy.lanes["crm"].source_types["report"].labels == (LabelRule("org", None),)


# -- refusals: each names source, dotted key, and what is allowed --------------------------


def test_required_keys_need_json() -> None:
    error = refuse(one_type("{allowed_labels: [org], required_keys: [title]}"), "crm.yaml")
    assert error.message == (
        "policy 'crm.yaml': key 'lanes.crm.source_types.report.required_keys': "
        "required_keys needs content_format: json"
    )
    assert error.key == "lanes.crm.source_types.report.required_keys"
    assert error.extensions()["key"] == error.key
    assert error.extensions()["source"] == "crm.yaml"


def test_required_keys_with_text_format_refused() -> None:
    refuse(one_type("{content_format: text, required_keys: [title]}"))


@pytest.mark.parametrize(
    ("text", "key", "allowed_words"),
    [
        ("not: [valid", "", "not valid YAML"),
        ("- a\n- b\n", "", "['agents', 'lanes']"),
        ("just a string", "", "['agents', 'lanes']"),
        ("", "", "needs 'lanes'"),
        ("agents: {}", "lanes", "at least one lane"),
        ("lanes: {}", "lanes", "at least one"),
        ("lanes:", "lanes", "lane names"),
        ("lanes: [a, b]", "lanes", "mapping of lane names"),
        ("lanes: {a: {}}\nextra: 1", "", "allowed keys: ['agents', 'lanes']"),
        (
            "lanes: {a: {types: {}}}",
            "lanes.a",
            "allowed keys: ['embedding', 'properties_personal', 'source_types', 'text_search', "
            "'ttl']",
        ),
        (
            "lanes: {a: {text_search: klingon}}",
            "lanes.a.text_search",
            "allowed: simple, stemmed_english, arabic",
        ),
        ("lanes: {a: {text_search: 3}}", "lanes.a.text_search", "english"),
        (
            "lanes: {a: {embedding: {dimensions: 0, model: m}}}",
            "lanes.a.embedding.dimensions",
            "whole number from 1 to",
        ),
        (
            "lanes: {a: {embedding: {dimensions: true, model: m}}}",
            "lanes.a.embedding.dimensions",
            "e.g. 384",
        ),
        (
            "lanes: {a: {embedding: {dimensions: [384], model: m}}}",
            "lanes.a.embedding.dimensions",
            "a list",
        ),
        (
            "lanes: {a: {embedding: {dimensions: {n: 384}, model: m}}}",
            "lanes.a.embedding.dimensions",
            "a mapping",
        ),
        ("lanes: {a: {embedding: {dimensions: 384, model: ' '}}}", "lanes.a.embedding.model", ""),
        ("lanes: {a: {embedding: {dimensions: 384}}}", "lanes.a.embedding.model", ""),
        (
            "lanes: {a: [x]}",
            "lanes.a",
            "mapping with keys ['embedding', 'properties_personal', 'source_types', "
            "'text_search', 'ttl']",
        ),
        ("lanes: {a: {source_types: [x]}}", "lanes.a.source_types", "source type names"),
        (
            one_type("{labels: [org]}"),
            "lanes.crm.source_types.report",
            "['allowed_labels', 'authority', 'content_format', 'enabled', 'required_keys']",
        ),
        (
            one_type("[org]"),
            "lanes.crm.source_types.report",
            "['allowed_labels', 'authority', 'content_format', 'enabled', 'required_keys']",
        ),
        (
            one_type("{allowed_labels: org}"),
            "lanes.crm.source_types.report.allowed_labels",
            "{label, values}",
        ),
        (
            one_type("{allowed_labels: [{values: [a]}]}"),
            "lanes.crm.source_types.report.allowed_labels[0]",
            "needs 'label'",
        ),
        (
            one_type("{allowed_labels: [{label: stage, value: [a]}]}"),
            "lanes.crm.source_types.report.allowed_labels[0]",
            "allowed keys: ['label', 'values']",
        ),
        (
            one_type("{allowed_labels: [{label: stage, values: []}]}"),
            "lanes.crm.source_types.report.allowed_labels[0].values",
            "leave 'values' out to allow any",
        ),
        (
            one_type("{allowed_labels: [{label: stage, values: lead}]}"),
            "lanes.crm.source_types.report.allowed_labels[0].values",
            "list of strings",
        ),
        (
            one_type("{allowed_labels: [{label: stage, values: }]}"),
            "lanes.crm.source_types.report.allowed_labels[0].values",
            "list of strings",
        ),
        (
            one_type("{allowed_labels: [{label: stage, values: [lead, 3]}]}"),
            "lanes.crm.source_types.report.allowed_labels[0].values[1]",
            "non-empty string",
        ),
        (
            one_type("{allowed_labels: [{label: stage, values: [lead, lead]}]}"),
            "lanes.crm.source_types.report.allowed_labels[0].values[1]",
            "listed twice",
        ),
        (
            one_type("{allowed_labels: [{label: stage, values: [' lead']}]}"),
            "lanes.crm.source_types.report.allowed_labels[0].values[0]",
            "values are trimmed",
        ),
        (
            one_type("{allowed_labels: [[org]]}"),
            "lanes.crm.source_types.report.allowed_labels[0]",
            "a name or a map {label, values}",
        ),
        (
            one_type("{allowed_labels: [org, topic, org]}"),
            "lanes.crm.source_types.report.allowed_labels[2]",
            "list each label once",
        ),
        (
            one_type("{allowed_labels: [org, {label: org, values: [a]}]}"),
            "lanes.crm.source_types.report.allowed_labels[1]",
            "list each label once",
        ),
        (
            one_type("{allowed_labels: [e_connect]}"),
            "lanes.crm.source_types.report.allowed_labels[0]",
            "labels beginning with 'e_' cannot be declared",
        ),
        (
            one_type("{allowed_labels: [{label: e_group}]}"),
            "lanes.crm.source_types.report.allowed_labels[0].label",
            "reserved for the engine",
        ),
        (
            one_type("{allowed_labels: [Org]}"),
            "lanes.crm.source_types.report.allowed_labels[0]",
            "names must match ^[a-z][a-z0-9_]{0,62}$",
        ),
        (
            one_type("{content_format: xml}"),
            "lanes.crm.source_types.report.content_format",
            "allowed: ['json', 'text']",
        ),
        (
            one_type("{content_format: json, required_keys: title}"),
            "lanes.crm.source_types.report.required_keys",
            "list of strings",
        ),
        (
            one_type("{content_format: json, required_keys: [title, '']}"),
            "lanes.crm.source_types.report.required_keys[1]",
            "non-empty string",
        ),
        (
            one_type("{content_format: json, required_keys: [title, title]}"),
            "lanes.crm.source_types.report.required_keys[1]",
            "listed twice",
        ),
        (
            one_type("{authority: ''}"),
            "lanes.crm.source_types.report.authority",
            "names must match",
        ),
        (
            one_type("{authority: [documentary]}"),
            "lanes.crm.source_types.report.authority",
            "names must match",
        ),
        (
            one_type("{enabled: 'false'}"),
            "lanes.crm.source_types.report.enabled",
            "true or false",
        ),
        (
            one_type("{enabled: 0}"),
            "lanes.crm.source_types.report.enabled",
            "true or false",
        ),
        ("lanes: {n: {}}\nagents: [a]", "agents", "mapping of agent names"),
        (
            "lanes: {n: {}}\nagents: {a: {admin: true}}",
            "agents.a",
            "['apply_policy', 'erase', 'read', 'read_metrics', 'write']",
        ),
        ("lanes: {n: {}}\nagents: {a: {read: n}}", "agents.a.read", "allowed: ['*', 'n']"),
        (
            "lanes: {n: {}}\nagents: {a: {write: [n, crm]}}",
            "agents.a.write[1]",
            "allowed: ['*', 'n']",
        ),
        ("lanes: {n: {}}\nagents: {a: {write: [all]}}", "agents.a.write[0]", "['*', 'n']"),
        (
            "lanes: {n: {}}\nagents: {a: {apply_policy: yes please}}",
            "agents.a.apply_policy",
            "true or false",
        ),
    ],
)
def test_refusals_name_key_and_what_is_allowed(text: str, key: str, allowed_words: str) -> None:
    error = refuse(text)
    assert error.key == key
    if key:
        assert f"key {key!r}: " in error.message
    assert allowed_words in error.message


def test_unknown_key_lists_allowed_as_data() -> None:
    error = refuse("lanes: {a: {}}\nagent: {}")
    assert error.allowed == ["agents", "lanes"]
    assert error.extensions()["allowed"] == ["agents", "lanes"]
    assert "unknown key 'agent'" in error.message


def test_undeclared_lane_in_profile_names_declared_lanes() -> None:
    error = refuse("lanes: {notes: {}, crm: {}}\nagents: {planner: {read: [notes, sales]}}")
    assert error.message == (
        "policy 'test.yaml': key 'agents.planner.read[1]': "
        "'sales' is not a declared lane; allowed: ['*', 'crm', 'notes']"
    )


def test_yaml_syntax_error_names_the_position() -> None:
    error = refuse("lanes:\n  notes: {\n", "broken.yaml")
    assert "not valid YAML" in error.message
    assert "line 3" in error.message


def test_duplicate_keys_are_refused_not_last_wins() -> None:
    error = refuse("lanes:\n  crm: {}\n  crm: {source_types: {a: {}}}\n")
    assert "found key 'crm' twice at line 3" in error.message


def test_duplicate_keys_refused_in_nested_mappings() -> None:
    refuse(one_type("{authority: documentary, authority: conversational}"))


def test_yaml_merge_keys_still_work() -> None:
    text = """
lanes:
  crm:
    source_types:
      base: &base { authority: documentary, allowed_labels: [org] }
      memo: { <<: *base, allowed_labels: [topic] }
"""
    memo = load_policy(text).lanes["crm"].source_types["memo"]
    assert memo.authority == "documentary"
    assert memo.allowed_labels() == ["topic"]


def test_unsafe_yaml_tags_are_refused() -> None:
    error = refuse("lanes: !!python/object/apply:os.system ['echo hi']")
    assert "not valid YAML" in error.message


def test_default_source_is_named() -> None:
    with pytest.raises(PolicyLoadError, match="^policy '<policy>': "):
        load_policy("lanes: {}")


def test_builtin_named_type_on_closed_lane_is_allowed() -> None:
    policy: Policy = load_policy("lanes: {l: {source_types: {documentary: {}}}}")
    assert policy.lanes["l"].enabled_source_types() == ["documentary"]


def test_an_unquoted_date_is_text_judged_by_its_key() -> None:
    """2026-13-01 made YAML's date reader raise; dates are never part of a policy."""
    values = "lanes: {n: {source_types: {t: {allowed_labels: [{label: day, values: [%s]}]}}}}"
    for day in ("2026-13-01", "2026-01-01"):
        policy = load_policy(values % day)
        assert policy.lanes["n"].source_types["t"].labels[0].values == (day,)
    error = refuse("lanes: {n: {}}\nagents: {a: {apply_policy: 2026-13-01}}")
    assert error.key == "agents.a.apply_policy"
    assert "must be true or false; got a string '2026-13-01'" in error.message
    error = refuse("lanes: {2026-13-01: {}}")
    assert error.key == "lanes"
    assert "lane name '2026-13-01' is not allowed" in error.message


@pytest.mark.parametrize("text", ["!!timestamp 2026-13-01", "!!int twelve", "!!float x"])
def test_a_scalar_its_tag_cannot_read_is_refused_at_its_position(text: str) -> None:
    error = refuse(f"lanes:\n  n: {{}}\nagents:\n  a: {{apply_policy: {text}}}\n")
    assert "not valid YAML" in error.message
    assert "line 4" in error.message


def test_a_lane_declares_its_text_search_language() -> None:
    policy = load_policy("lanes: {a: {text_search: english}, b: {}}", "test.yaml")
    assert policy.lanes["a"].text_search == "english"
    # The default: English stemmed, every word kept.
    assert policy.lanes["b"].text_search == "stemmed_english"
