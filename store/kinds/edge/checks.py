"""What an edge's input must be, checked before anything reaches the database; each
refusal names what is accepted."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import orjson

from store.errors import InvalidIdError, InvalidInputError
from store.ids import EDGE_ID
from store.kinds.edge.model import CONTRADICTS, PROVENANCE_TYPES, UNRESOLVED
from store.limits import check_storable

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$")
MAX_TEXT = 200
MAX_EVIDENCE_BYTES = 64 * 1024
_NAME_RULE = "1 to 128 letters, digits, '_', '.', ':', '/' or '-', starting with a letter"


def check_edge_id(ident: str) -> str:
    cleaned = ident.strip().lower()
    if not EDGE_ID.fullmatch(cleaned):
        raise InvalidIdError(ident, "'edge_' followed by 32 hex characters")
    return cleaned


def check_name(what: str, value: str) -> None:
    if not NAME.fullmatch(value):
        raise InvalidInputError(f"{what} '{value[:64]}' is not allowed; a {what} is {_NAME_RULE}")


def check_unit(what: str, value: float | None) -> None:
    """Weight and confidence are in [0, 1]: out of range is refused, never clamped."""
    if value is None:
        return
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(
            f"{what} is {value}; it must be between 0 and 1 inclusive "
            "(a value out of range is refused, never clamped)",
            allowed=[0, 1],
        )


def check_provenance_type(value: str | None) -> None:
    if value is not None and value not in PROVENANCE_TYPES:
        raise InvalidInputError(
            f"provenanceType '{value[:64]}' is unknown; it is one of {list(PROVENANCE_TYPES)}",
            allowed=list(PROVENANCE_TYPES),
        )


def check_text(what: str, value: str | None) -> None:
    if value is None:
        return
    if not value.strip() or len(value) > MAX_TEXT:
        raise InvalidInputError(f"{what} must be 1 to {MAX_TEXT} characters, not only spaces")
    check_storable(value)


def check_evidence(evidence: Any) -> None:
    """An object or a list of objects (with `quote`, `source`, `offset` when it quotes a
    text); numbers in it are integers, since the ledger's canonical bytes hold no
    fractions."""
    if evidence is None:
        return
    items = evidence if isinstance(evidence, list) else [evidence]
    if not all(isinstance(item, Mapping) for item in items):
        got = "a list holding something else" if isinstance(evidence, list) else "a scalar"
        raise InvalidInputError(
            "evidence must be a JSON object or a list of objects, e.g. "
            '{"quote": "See [[00-overview]].", "source": "01-runbook.md", "offset": 170}; '
            f"got {got}"
        )
    _check_json(evidence)
    size = len(orjson.dumps(evidence))
    if size > MAX_EVIDENCE_BYTES:
        raise InvalidInputError(
            f"evidence is {size} bytes of JSON; at most {MAX_EVIDENCE_BYTES} are allowed",
            allowed=MAX_EVIDENCE_BYTES,
        )


def _check_json(value: Any, depth: int = 0) -> None:
    if depth > 32:
        raise InvalidInputError("evidence is nested more than 32 levels deep")
    if isinstance(value, float):
        raise InvalidInputError(
            f"evidence holds the number {value}; numbers in evidence are integers "
            "(write a fraction as a string)"
        )
    if isinstance(value, str):
        check_storable(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_storable(str(key))
            _check_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)


def check_conflict_state(edge_type: str, value: str | None) -> None:
    if value is None:
        return
    if edge_type != CONTRADICTS:
        raise InvalidInputError(
            f"conflictState is only for '{CONTRADICTS}' edges, not '{edge_type}'; leave it out"
        )
    if value != UNRESOLVED:
        raise InvalidInputError(
            f"conflictState '{value[:64]}' cannot be written by upsertEdge: it takes only "
            f"'{UNRESOLVED}' (to reopen a conflict); resolve one with resolveConflict",
            allowed=[UNRESOLVED],
        )
