from __future__ import annotations

from datetime import UTC, datetime

import pytest

from policies import errors
from policies.errors import (
    ContentFormatError,
    EmbeddingError,
    EraseForbiddenError,
    ExpiryError,
    HiddenMemberError,
    LabelNotAllowedError,
    LaneForbiddenError,
    LaneNotDeclaredError,
    NotReadableError,
    PolicyApplyForbiddenError,
    PolicyError,
    PolicyLoadError,
    PropertyFormatError,
    RequiredKeysError,
    ReservedLabelError,
    SourceTypeNotAllowedError,
    UnknownAgentError,
    ValueNotAllowedError,
    VectorSizeError,
)

SAMPLES: list[PolicyError] = [
    PolicyLoadError("p.yaml", "lanes", "declares no lane"),
    PropertyFormatError(":x", "edge property ':x' has an empty label"),
    ReservedLabelError(["e_group"]),
    LaneNotDeclaredError("x", ["a"]),
    SourceTypeNotAllowedError("crm", "x", ["a"], lane_open=False),
    LabelNotAllowedError("crm", "meeting", ["b"], ["a"]),
    ValueNotAllowedError("crm", "deal", "stage", "x", ["a"]),
    ContentFormatError("crm", "report", "Expecting value at line 1 column 1"),
    RequiredKeysError("crm", "report", ["title"], missing=["title"]),
    LaneForbiddenError("planner", "crm", "write", ["notes"]),
    PolicyApplyForbiddenError("planner", ["curator"]),
    EraseForbiddenError("planner", ["curator"]),
    UnknownAgentError("ghost"),
    HiddenMemberError("group", "e_group:team_0", ["notes"]),
    NotReadableError("record", "sr_0123456789abcdef0123456789abcdef"),
    EmbeddingError("notes", 3, 384, "all-MiniLM-L6-v2"),
    VectorSizeError(3, {"notes": (384, "all-MiniLM-L6-v2")}),
    ExpiryError(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC), False),
]

CODES = {
    HiddenMemberError: "FORBIDDEN",
    LaneForbiddenError: "FORBIDDEN",
    NotReadableError: "NOT_FOUND",
    PolicyApplyForbiddenError: "FORBIDDEN",
    EraseForbiddenError: "FORBIDDEN",
    UnknownAgentError: "UNAUTHENTICATED",
}


def test_every_error_class_has_a_sample() -> None:
    classes = {
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, PolicyError) and obj is not PolicyError
    }
    assert classes == {type(sample) for sample in SAMPLES}


@pytest.mark.parametrize("error", SAMPLES, ids=lambda e: type(e).__name__)
def test_error_shape(error: PolicyError) -> None:
    assert type(error).__name__.endswith("Error")
    doc = type(error).__doc__
    assert doc is not None
    assert "\n" not in doc.strip()
    assert error.code == CODES.get(type(error), "BAD_USER_INPUT")
    assert str(error) == error.message
    assert error.message[0].islower() or error.message.startswith("policy")
    extensions = error.extensions()
    assert "code" not in extensions
    assert all(key == key[0].lower() + key[1:] and "_" not in key for key in extensions)
    if error.allowed is not None:
        assert extensions["allowed"] == error.allowed


def test_extensions_are_copies() -> None:
    error = LaneNotDeclaredError("x", ["a"])
    extensions = error.extensions()
    assert isinstance(extensions["allowed"], list)
    extensions["allowed"].append("b")
    assert error.allowed == ["a"]


def test_root_load_error_has_no_key_clause() -> None:
    error = PolicyLoadError("p.yaml", "", "not valid YAML (x)")
    assert error.message == "policy 'p.yaml': not valid YAML (x)"


def test_a_lane_refused_for_reading_names_the_readable_lanes() -> None:
    error = LaneForbiddenError("planner", "crm", "read", ["notes", "ops"])
    assert (
        error.message == "agent 'planner' may not read lane 'crm'; readable lanes: ['notes', 'ops']"
    )
    assert error.code == "FORBIDDEN"
