"""A search's arguments checked (refusing what is wrong, naming it) and bound: the
values its statement takes, and its shape (what of them changes the statement's text)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.guard import vector_lanes
from policies.model import Embedding
from store.errors import InvalidInputError
from store.kinds.record import embedding
from store.kinds.record.queries import bind_properties, gather_properties
from store.kinds.record.search.terms import Syntax
from store.reads.gather_mode import GatherMode
from store.reads.pages import key_cursor

MAX_QUERY_CHARS = 1000

# The largest float32: a cursor's score beyond it is none a search gave.
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class SearchShape:
    """What varies the statement's text: how many properties `match` has (0: none), how
    they combine, and which optional arguments are set."""

    properties: int = 0
    mode: GatherMode = GatherMode.INTERSECT
    as_of: bool = False
    source_types: bool = False
    after: bool = False
    text: bool = True
    vector: int = 0  # the search vector's size (0: none)
    syntax: Syntax = Syntax.NATURAL
    # Whether the page's rows carry their highlights (the compiled path builds them
    # where the field is asked instead).
    highlights: bool = True
    vector_lanes: int = 0  # how many lanes it is compared in (a walk of each one's index)

    @property
    def fused(self) -> bool:
        return self.text and self.vector > 0


def check_text(text: str | None) -> str:
    """The query text, or a refusal naming what is wrong with it."""
    if text is None or not text.strip():
        raise InvalidInputError(
            'text is empty: give the words to search for, e.g. "renewal risk"', allowed="words"
        )
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInputError(
            f"text is {len(text)} characters long; a search takes at most {MAX_QUERY_CHARS}",
            allowed=MAX_QUERY_CHARS,
        )
    if "\x00" in text:
        raise InvalidInputError("text holds a NUL character, which no content holds")
    return text


def prefix_last(text: str) -> bool:
    """Whether the query's last word is a bare word the caller may still be typing (not
    closing a phrase, not negated, not the word `or`)."""
    stripped = text.rstrip()
    if stripped.endswith('"') or stripped.count('"') % 2 == 1:
        return False
    last = stripped.split()[-1]
    return not last.startswith("-") and last.lower() != "or" and last[-1].isalnum()


def search_cursor(after: str | None) -> tuple[float, datetime, str] | None:
    """The (score, since, id) after which a page of hits goes on (None: from the start)."""
    key = key_cursor(after, 3)
    if key is None:
        return None
    try:
        score, since = float(key[0]), datetime.fromisoformat(key[1])
        # No search scores past float32 (a strict text score is one).
        if not math.isfinite(score) or abs(score) > FLOAT32_MAX or since.tzinfo is None:
            raise ValueError(key)
    except ValueError as exc:
        raise InvalidInputError(
            f"cursor '{(after or '')[:40]}' is not one this list gave out: a cursor is a "
            "page's endCursor, passed back unchanged; omit after for the first page"
        ) from exc
    return score, since, key[2]


@dataclass(frozen=True)
class VectorScope:
    """What a search by vector may use: the embeddings the policy declares, by lane, and
    why this memory cannot search by vector (None: it can)."""

    embeddings: Mapping[str, Embedding] = field(default_factory=dict)
    off: str | None = None


@dataclass(frozen=True)
class SearchArgs:
    """A search's arguments, as the caller gave them (`lanes`: those it may read)."""

    text: str | None
    match: Sequence[str] | None
    mode: GatherMode
    lanes: Sequence[str]
    source_types: Sequence[str] | None
    as_of: datetime | None
    after: str | None
    vector: Sequence[float] | None = None
    scope: VectorScope = field(default_factory=lambda: VectorScope())
    syntax: Syntax = Syntax.NATURAL


def check_vector(args: SearchArgs) -> tuple[bytes, list[str]]:
    """The search vector (as float32 values) and the lanes it is compared in, or a
    refusal naming what is wrong."""
    if args.scope.off is not None:
        raise InvalidInputError(args.scope.off)
    assert args.vector is not None
    packed = embedding.pack(args.vector, "vector")
    return packed, vector_lanes(args.scope.embeddings, args.lanes, embedding.size(packed))


def bind(values: dict[str, Any], prefix: str, args: SearchArgs) -> SearchShape | None:
    """Check a search's arguments (refusing what is wrong, naming it), put the values its
    statement takes in `values` (each name after `prefix`), and say its shape; None when
    `match` leaves nothing to find (only the engine's labels)."""
    if args.text is None and args.vector is None:
        raise InvalidInputError(
            "search needs text, vector or both: the words to find, and/or the vector of "
            "what to find near (of the size the lanes' policy declares)"
        )
    words = None if args.text is None else check_text(args.text)
    vector = None if args.vector is None else check_vector(args)
    props = gather_properties(args.match) if args.match else []
    if args.match and not props:
        return None
    key = search_cursor(args.after)
    values.update(
        {
            prefix + "lanes": list(args.lanes),
            prefix + "as_of": args.as_of,
            prefix + "source_types": list(args.source_types or ()),
        }
    )
    values[prefix + "narrowed"], values[prefix + "mode"] = len(props), args.mode
    if words is not None:
        values[prefix + "text"], values[prefix + "syntax"] = words, args.syntax
        values[prefix + "prefix"] = args.syntax is Syntax.STRICT and prefix_last(words)
    if vector is not None:
        values[prefix + "vector"] = list(embedding.unpack(vector[0]))
        values[prefix + "vector_lanes"] = vector[1]
        for i, lane in enumerate(vector[1]):
            values[prefix + f"vector_lane_{i}"] = lane
    bind_properties(values, prefix, props)
    if key is not None:
        values[prefix + "after_score"], values[prefix + "after_at"], values[prefix + "after_id"] = (
            key
        )
    given = args.source_types is not None
    return SearchShape(
        len(props),
        args.mode,
        args.as_of is not None,
        given,
        key is not None,
        text=words is not None,
        vector=0 if vector is None else embedding.size(vector[0]),
        syntax=args.syntax,
        vector_lanes=0 if vector is None else len(vector[1]),
    )
