"""A record's names: the title in its metadata and its `alias` edge properties (a note's
frontmatter `aliases`), found by `records(named:)` in any case.

A lookup, not link resolution: links resolve by path and file name only
(`store.intake.resolve`). The names of a record are one SQL function of its properties
(`edgeloom_record_names`, migration 0022) with a GIN index over current records, so the
lookup is an index probe whatever the lane's size.
"""

from __future__ import annotations

from store.kinds.record.tags import tagged
from store.reads.visibility import RULE

ALIAS = "alias"
TITLE = "title"
# A folder's file: its record holds `path` and `file_id`, and each of its parts (sections)
# `file_id` too, so the note is the file's record with its parts.
FILE_ID = "file_id"
PATH = "path"
# The labels whose values name a record (the function's text names them too).
NAMING_LABELS = (RULE.metadata_prefix + TITLE, ALIAS)


def normal_name(text: str) -> str:
    """A name as it is compared: trimmed, in lower case."""
    return text.strip().lower()


def named(r: str, name: str) -> str:
    """SQL: the record aliased `r` has the name `name` (a placeholder, normal_name'd)."""
    return f"edgeloom_record_names({r}.properties) @> ARRAY[{name}]::text[]"


def named_count(
    lanes: str, name: str, source_type: str | None = None, tag: str | None = None
) -> str:
    """SQL: how many readable records of `lanes` have the name (of `source_type`, and
    holding `tag`, if given), counted from the index (no count is kept of them)."""
    kind = "" if source_type is None else f" AND n.source_type = {source_type}"
    if tag is not None:
        kind += f" AND {tagged('n', tag)}"
    return (
        f"SELECT count(*) FROM records n WHERE {named('n', name)} "
        f"AND {RULE.record('n', lanes)}{kind}"
    )


def note_of(ident: str, lanes: str, at: str | None) -> str:
    """SQL: the ids of the records the record `ident` speaks for as a note: itself and,
    when it is a file's record (it holds a `path`), its parts (the records sharing its
    `file_id`) the reader may read, now or as held at `at`."""
    # The parts are an index probe by the file's value whatever the statistics say (a
    # join let the planner read every file_id membership of the lanes before ANALYZE).
    return (
        f"(SELECT {ident} UNION ALL SELECT n_.record_id FROM edge_properties f_ "
        f"CROSS JOIN LATERAL (SELECT n_.record_id FROM edge_properties n_ "
        f"WHERE n_.label = f_.label AND n_.value_key = f_.value_key AND n_.value = f_.value "
        f"AND {RULE.member('n_', lanes, at)} OFFSET 0) n_ "
        f"WHERE f_.record_id = {ident} AND f_.label = '{FILE_ID}' AND {RULE.held('f_', at)} "
        f"AND n_.record_id <> {ident} "
        f"AND EXISTS (SELECT 1 FROM edge_properties h_ WHERE h_.record_id = {ident} "
        f"AND h_.label = '{PATH}' AND {RULE.held('h_', at)}))"
    )
