"""Names in a policy reach SQL, logs and messages: only the narrow pattern gets through."""

from __future__ import annotations

import time

import pytest
import yaml

from policies.errors import PolicyLoadError
from policies.loader import is_valid_name, load_policy
from policies.strict_yaml import MAX_ALIAS_NODES, MAX_DEPTH, show

HOSTILE_NAMES = [
    "crm'; DROP TABLE records; --",
    'crm"; DROP TABLE records; --',
    "../x",
    "..",
    "a/b",
    "a\\b",
    "",
    " ",
    "crm ",
    " crm",
    "crm\n",
    "crm\nagent: root",
    "crm\x00",
    "crm\r",
    "crm\t",
    "Crm",
    "CRM",
    "1crm",
    "_crm",
    "crm-x",
    "crm.x",
    "crm:x",
    "crm*",
    "*",
    "%",
    "crm%",
    "crm;",
    "crm()",
    "$1",
    "ｃｒｍ",  # fullwidth letters
    "crм",  # Cyrillic em
    "café",
    "crm\u200b",  # zero-width space
    "lane\u202e",  # right-to-left override
    "a" * 64,
    "a" * 10_000,
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_are_invalid(name: str) -> None:
    assert not is_valid_name(name)


@pytest.mark.parametrize("name", ["a", "crm", "crm_2", "a" * 63, "x9_", "default"])
def test_good_names_are_valid(name: str) -> None:
    assert is_valid_name(name)


@pytest.mark.parametrize("name", [None, 1, True, ["crm"], {"a": 1}, b"crm"])
def test_non_strings_are_invalid(name: object) -> None:
    assert not is_valid_name(name)


def refuse(document: dict[str, object]) -> PolicyLoadError:
    text = yaml.safe_dump(document)
    # the hostile name must reach the loader intact, not be mangled by YAML on the way
    assert yaml.safe_load(text) == document
    with pytest.raises(PolicyLoadError) as caught:
        load_policy(text, "hostile.yaml")
    return caught.value


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_lane_name(name: str) -> None:
    error = refuse({"lanes": {"crm": {}, name: {}}})
    assert error.key == "lanes"
    assert "names must match ^[a-z][a-z0-9_]{0,62}$" in error.message


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_source_type_name(name: str) -> None:
    error = refuse({"lanes": {"crm": {"source_types": {name: {}}}}})
    assert error.key == "lanes.crm.source_types"
    assert "source type name" in error.message


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_agent_name(name: str) -> None:
    error = refuse({"lanes": {"crm": {}}, "agents": {name: {"read": ["crm"]}}})
    assert error.key == "agents"
    assert "agent name" in error.message


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_label_name(name: str) -> None:
    lane = {"source_types": {"t": {"allowed_labels": ["org", name]}}}
    error = refuse({"lanes": {"crm": lane}})
    assert error.key == "lanes.crm.source_types.t.allowed_labels[1]"
    assert "label name" in error.message


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_label_name_in_a_map(name: str) -> None:
    lane = {"source_types": {"t": {"allowed_labels": [{"label": name, "values": ["a"]}]}}}
    error = refuse({"lanes": {"crm": lane}})
    assert error.key == "lanes.crm.source_types.t.allowed_labels[0].label"


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_authority(name: str) -> None:
    error = refuse({"lanes": {"crm": {"source_types": {"t": {"authority": name}}}}})
    assert error.key == "lanes.crm.source_types.t.authority"
    assert "authority name" in error.message


@pytest.mark.parametrize("name", [n for n in HOSTILE_NAMES if n != "*"])
def test_hostile_lane_reference(name: str) -> None:
    error = refuse({"lanes": {"crm": {}}, "agents": {"a": {"write": ["crm", name]}}})
    assert error.key == "agents.a.write[1]"
    assert "is not a declared lane" in error.message


@pytest.mark.parametrize("scalar", ["no", "yes", "on", "off", "true", "null", "12", "1.5", "~"])
def test_yaml_non_string_keys_are_refused_with_a_hint(scalar: str) -> None:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy(f"lanes: {{{scalar}: {{}}}}")
    assert caught.value.key == "lanes"
    assert "quote them" in caught.value.message


def test_quoted_yaml_keyword_is_a_fine_name() -> None:
    assert load_policy('lanes: {"no": {}}').lane_names() == ["no"]


def test_hostile_names_are_escaped_in_messages() -> None:
    error = refuse({"lanes": {"crm\nFORGED LOG LINE\x1b[31m": {}}})
    assert "\n" not in error.message
    assert "\x1b" not in error.message
    assert "'crm\\nFORGED LOG LINE\\x1b[31m'" in error.message


def test_huge_names_are_not_echoed_whole() -> None:
    error = refuse({"lanes": {"a" * 10_000: {}}})
    assert len(error.message) < 400


def test_regex_anchor_trailing_newline_regression() -> None:
    # `^...$` with re.match would accept "crm\n"; the loader must use a full match
    assert not is_valid_name("crm\n")
    refuse({"lanes": {"crm\n": {}}})


def alias_bomb(under: str) -> str:
    """Under 1 kB of YAML whose aliases expand to 10^8 strings, the value of `under`."""
    levels = [f"&a0 [{', '.join(['lol'] * 10)}]"]
    levels += [f"&a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 8)]
    bomb = ",\n    ".join(levels)
    return f"lanes: {{crm: {{}}}}\nagents:\n  a:\n   {under}: [\n    {bomb}]\n"


@pytest.mark.parametrize("under", ["apply_policy", "read", "unknown"])
def test_an_alias_bomb_is_refused_at_once(under: str) -> None:
    text = alias_bomb(under)
    assert len(text) < 1000
    started = time.monotonic()
    with pytest.raises(PolicyLoadError) as caught:
        load_policy(text, "policy.yaml")
    assert time.monotonic() - started < 0.5
    message = caught.value.message
    assert message == (
        f"policy 'policy.yaml': not valid YAML (aliases may add at most {MAX_ALIAS_NODES:,} "
        "nodes to a document; those of the node at line 8 column 5)"
    )


def test_a_self_referring_alias_is_refused() -> None:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy("lanes: &l {crm: *l}\n")
    assert caught.value.message == (
        "policy '<policy>': not valid YAML (a node refers to itself through an alias "
        "at line 1 column 8)"
    )


def test_nesting_deeper_than_the_limit_is_refused_not_a_crash() -> None:
    with pytest.raises(PolicyLoadError) as caught:
        load_policy("lanes: " + "[" * 5000 + "]" * 5000)
    assert caught.value.message == (
        f"policy '<policy>': not valid YAML (nested deeper than {MAX_DEPTH} levels "
        "at line 1 column 71)"
    )


def test_aliases_that_add_little_are_still_read() -> None:
    text = "lanes: {crm: {}, notes: {}}\nagents:\n  a: &a {read: [crm, notes]}\n  b: *a\n"
    policy = load_policy(text)
    assert policy.agents["b"].read == policy.agents["a"].read


def test_a_refusal_shows_a_bounded_prefix_of_a_huge_value() -> None:
    """The value is never repr()'d whole: one with 10^8 leaves is shown at once."""
    huge: object = ["lol"] * 10
    for _ in range(7):
        huge = [huge] * 10
    started = time.monotonic()
    shown = show(huge)
    assert time.monotonic() - started < 0.5
    assert len(shown) <= 80 and shown.startswith("[[[")
    assert show("x" * 10**7) == repr("x" * 76)[:-1] + "..."
