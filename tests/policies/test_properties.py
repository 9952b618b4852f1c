from __future__ import annotations

import pytest

from policies.errors import PropertyFormatError
from policies.properties import (
    MAX_LABEL_LENGTH,
    MAX_VALUE_LENGTH,
    Property,
    is_reserved_label,
    parse_properties,
    parse_property,
)


@pytest.mark.parametrize(
    ("text", "label", "value"),
    [
        ("org:Acme", "org", "Acme"),
        ("url:https://example.com:8080/a", "url", "https://example.com:8080/a"),
        ("time: 10:30 ", "time", "10:30"),
        ("account owner:Sarah", "account_owner", "Sarah"),
        ("  account  owner  : Sarah", "account__owner", "Sarah"),
        ("topic:  the renewal   plan  ", "topic", "the renewal   plan"),
        ("person:Sarah O'Neil", "person", "Sarah O'Neil"),
        ("just some words", "general", "just some words"),
        ("  padded  ", "general", "padded"),
        ("org:ACME", "org", "ACME"),
    ],
)
def test_parse_rules(text: str, label: str, value: str) -> None:
    assert parse_property(text) == Property(label, value)


def test_value_spaces_are_not_underscored() -> None:
    assert parse_property("a b:c d").value == "c d"
    assert parse_property("a b:c d").label == "a_b"


def test_str_round_trips_label_and_value() -> None:
    prop = parse_property("account owner: Sarah Lee")
    assert str(prop) == "account_owner:Sarah Lee"
    assert parse_property(str(prop)) == prop


def test_empty_label_is_refused_with_a_sentence() -> None:
    with pytest.raises(PropertyFormatError) as caught:
        parse_property(":Acme")
    assert caught.value.message == (
        "edge property ':Acme' has an empty label; write it as label:value, for example org:Acme"
    )
    assert caught.value.code == "BAD_USER_INPUT"


@pytest.mark.parametrize("text", ["   :Acme", " \t:Acme"])
def test_whitespace_label_is_empty(text: str) -> None:
    with pytest.raises(PropertyFormatError, match="empty label"):
        parse_property(text)


@pytest.mark.parametrize("text", ["org:", "org:   ", "", "   "])
def test_empty_value_is_refused(text: str) -> None:
    with pytest.raises(PropertyFormatError, match="has an empty value; write it as label:value"):
        parse_property(text)


def test_label_length_limit() -> None:
    assert parse_property("a" * MAX_LABEL_LENGTH + ":v").label == "a" * MAX_LABEL_LENGTH
    with pytest.raises(PropertyFormatError, match=f"at most {MAX_LABEL_LENGTH} characters"):
        parse_property("a" * (MAX_LABEL_LENGTH + 1) + ":v")


def test_value_length_limit() -> None:
    assert len(parse_property("l:" + "v" * MAX_VALUE_LENGTH).value) == MAX_VALUE_LENGTH
    with pytest.raises(PropertyFormatError, match=f"at most {MAX_VALUE_LENGTH} characters") as c:
        parse_property("l:" + "v" * (MAX_VALUE_LENGTH + 1))
    # the over-long text is not echoed back whole
    assert len(str(c.value.extensions()["property"])) < MAX_VALUE_LENGTH


def test_trimming_happens_before_the_length_check() -> None:
    assert parse_property("l:  " + "v" * MAX_VALUE_LENGTH + "  ").value == "v" * MAX_VALUE_LENGTH


def test_parse_properties_dedupes_in_first_seen_order() -> None:
    parsed = parse_properties(["topic:b", "org:Acme", "org : Acme ", "topic:a", "topic:b"])
    assert parsed == [Property("topic", "b"), Property("org", "Acme"), Property("topic", "a")]


def test_parse_properties_keeps_distinct_case() -> None:
    assert len(parse_properties(["org:Acme", "org:acme", "Org:Acme"])) == 3


def test_parse_properties_refuses_any_bad_entry() -> None:
    with pytest.raises(PropertyFormatError):
        parse_properties(["org:Acme", "org:"])


@pytest.mark.parametrize(
    ("label", "reserved"),
    [
        ("e_connect", True),
        ("e_group", True),
        ("e_adjustment", True),
        ("e_", True),
        ("e", False),
        ("email", False),
        ("E_connect", False),
        ("the_e_x", False),
    ],
)
def test_reserved_labels(label: str, reserved: bool) -> None:
    assert is_reserved_label(label) is reserved
    assert Property(label, "v").reserved is reserved


def test_reserved_prefix_survives_whitespace() -> None:
    assert parse_property("  e_connect : x_1").reserved


def test_property_is_frozen_and_ordered() -> None:
    prop = Property("b", "1")
    with pytest.raises(AttributeError):
        prop.label = "c"  # type: ignore[misc]
    assert sorted([Property("b", "1"), Property("a", "2"), Property("a", "1")]) == [
        Property("a", "1"),
        Property("a", "2"),
        Property("b", "1"),
    ]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a\u001fb:c", "U+001F in its label"),
        ("a:b\u001fc", "U+001F in its value"),
        ("org:Ac\u0000me", "U+0000 in its value"),
        ("org:Acme\u007f\u0007!", "U+0007, U+007F in its value"),
        ("or\tg:Acme", "U+0009 in its label"),
        ("note:line one\nline two", "U+000A in its value"),
    ],
)
def test_control_characters_are_refused_by_name(text: str, named: str) -> None:
    with pytest.raises(PropertyFormatError) as caught:
        parse_property(text)
    assert named in caught.value.message
    assert caught.value.message.endswith(
        "labels and values may hold any characters except the control characters "
        "U+0000 to U+001F and U+007F"
    )


def test_control_characters_around_a_label_or_value_are_trimmed_like_spaces() -> None:
    assert parse_property("\torg:Acme\n") == Property("org", "Acme")
