"""A hit's highlights: the words `ts_headline` marks in the content of the version read,
with their offsets in code points into that content."""

from __future__ import annotations

# Highlights per hit: a long record's every occurrence of a common word is not a snippet.
MAX_HIGHLIGHTS = 50

# The markers ts_headline puts around a matched word; the content read has none.
_START, _STOP = "\\x01", "\\x02"


def version_content_sql(hit: str) -> str:
    """SQL: the content of the version a hit (its alias, with id and from_version) read."""
    return (
        "(SELECT e.state->>'content' FROM ledger e WHERE e.kind = 'record' "
        f"AND e.object_id = {hit}.id AND e.version = {hit}.from_version)"
    )


def highlights_sql(content: str, config: str, query: str) -> str:
    """SQL: the JSON list of the words of `content` that `query` matches, each with its
    offsets (code points, end exclusive) into `content`, at most MAX_HIGHLIGHTS.

    One pass marks the words and one splits at the marks; each of the first
    MAX_HIGHLIGHTS + 1 pieces gives a word, placed by the lengths of the pieces before it
    less their markers, so the cost is the content's length once, whatever the number of
    occurrences."""
    marked = (
        f"ts_headline({config}, translate({content}, E'{_START}{_STOP}', E'\\x20\\x20'), "
        f"{query}, E'StartSel={_START}, StopSel={_STOP}, HighlightAll=true')"
    )
    # The n-th piece (n > 1) starts with the (n-1)-th marked word and holds one stop
    # marker; it starts after the pieces before it, less the n - 2 stop markers there.
    return f"""(SELECT coalesce(json_agg(json_build_object('text', t.w, 'start', t.s,
          'end', t.s + length(t.w)) ORDER BY t.n), '[]'::json)
        FROM (SELECT x.n, split_part(x.piece, E'{_STOP}', 1) AS w,
                     coalesce(sum(length(x.piece)) OVER (ORDER BY x.n ROWS BETWEEN
                       UNBOUNDED PRECEDING AND 1 PRECEDING), 0) - (x.n - 2) AS s
              FROM (SELECT y.piece, y.n FROM (SELECT {marked} AS h OFFSET 0) hl,
                      string_to_table(hl.h, E'{_START}') WITH ORDINALITY AS y(piece, n)
                    LIMIT {MAX_HIGHLIGHTS + 1}) x) t
        WHERE t.n > 1)"""
