"""Edge properties as written by callers: one `label:value` string each."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from policies.errors import PropertyFormatError

RESERVED_PREFIX = "e_"
# The labels of record metadata (facts about one record, not relations: a file's size,
# a section's place in it), written only by the engine and never a hyperedge.
METADATA_PREFIX = RESERVED_PREFIX + "meta_"
DEFAULT_LABEL = "general"
MAX_LABEL_LENGTH = 128
MAX_VALUE_LENGTH = 1024

_EXAMPLE = "write it as label:value, for example org:Acme"
# C0 controls and DEL: U+001F is the separator inside ep_ ids (see store.ids), and none
# of them can be told apart by a reader of a label or value.
_CONTROL = frozenset(chr(c) for c in [*range(0x20), 0x7F])
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f]")


@dataclass(frozen=True, order=True)
class Property:
    """One edge property: every record carrying the same label and value shares an edge."""

    label: str
    value: str

    def __str__(self) -> str:
        return f"{self.label}:{self.value}"

    @property
    def reserved(self) -> bool:
        """True for the engine's own labels (`e_connect`, `e_group`, `e_adjustment`, ...)."""
        return is_reserved_label(self.label)


@lru_cache(maxsize=16384)
def property_of(label: str, value: str) -> Property:
    """The Property of a label and value already read (from a stored row or entry):
    repeated ones are made once, as `parse_property` makes them once."""
    return Property(label, value)


def is_reserved_label(label: str) -> bool:
    """Whether only the engine may write or remove `label`."""
    return label.startswith(RESERVED_PREFIX)


# Writers and readers repeat the same few properties (an org, a topic) across calls:
# a parse remembered is a dictionary lookup. Properties are immutable, so one parse
# may serve every caller; a refusal is not remembered.
@lru_cache(maxsize=16384)
def parse_property(text: str) -> Property:
    """Read one `label:value` string.

    The string is split at the first colon; the label is trimmed and its spaces become
    underscores; the value is trimmed and otherwise kept as written. A string without a
    colon gets the label `general`.
    """
    if ":" in text:
        raw_label, _, raw_value = text.partition(":")
        label = raw_label.strip().replace(" ", "_")
    else:
        label, raw_value = DEFAULT_LABEL, text
    value = raw_value.strip()
    if not label:
        raise PropertyFormatError(text, f"edge property {text!r} has an empty label; {_EXAMPLE}")
    if not value:
        raise PropertyFormatError(text, f"edge property {text!r} has an empty value; {_EXAMPLE}")
    if len(label) > MAX_LABEL_LENGTH:
        raise PropertyFormatError(
            text,
            f"edge property label {label[:40]!r}... is {len(label)} characters long; "
            f"labels may be at most {MAX_LABEL_LENGTH} characters",
        )
    if len(value) > MAX_VALUE_LENGTH:
        raise PropertyFormatError(
            text,
            f"edge property value for label {label!r} is {len(value)} characters long; "
            f"values may be at most {MAX_VALUE_LENGTH} characters",
        )
    for part, written in (("label", label), ("value", value)):
        if _ANY_CONTROL.search(written) is None:
            continue
        named = ", ".join(f"U+{ord(ch):04X}" for ch in sorted(set(written) & _CONTROL))
        raise PropertyFormatError(
            text,
            f"edge property {text[:40]!r} has the control character(s) {named} in its "
            f"{part}; labels and values may hold any characters except the control "
            "characters U+0000 to U+001F and U+007F",
        )
    return Property(label, value)


def parse_properties(texts: Sequence[str]) -> list[Property]:
    """Parse each string and drop repeats, keeping the first-seen order."""
    seen: set[Property] = set()
    parsed: list[Property] = []
    for text in texts:
        prop = parse_property(text)
        if prop not in seen:
            seen.add(prop)
            parsed.append(prop)
    return parsed
