"""Search rows: `search(text)` of a question in an agent's words (ten words, half of them
common), a rare word, a common word and a two-word phrase, and with a one-property
`match`, each through the gateway against the same SQL on raw asyncpg (the planner's read
and the statement), and the same search as of an instant against itself now.

The content is drawn from `bench.data`'s vocabulary with Zipf word frequencies, so
common words are common; the words chosen are the data's own by rank.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from bench.data import word
from bench.measure import latencies, percentile, say
from bench.phases import Bench
from bench.raw import replay

SEARCH = """query($text: String, $match: [String!], $first: Int) {
  search(text: $text, match: $match, first: $first) {
    totalCount items { score textRank highlights { text start end } record { id content } }
  } }"""
SEARCH_AS_OF = """query($text: String, $match: [String!], $first: Int, $asOf: DateTime) {
  search(text: $text, match: $match, first: $first, asOf: $asOf) {
    totalCount items { score textRank highlights { text start end } record { id content } }
  } }"""

# Ranks of the vocabulary (1: the most common word): a rare word, a common one, and a
# phrase of two common words that also occur apart.
RARE, COMMON = 4_000, 1
# A question of ten words: five of the ten most common, five rare (ranks 2,000-6,000).
QUESTION = (1, 2, 3, 5, 8, 2_000, 3_000, 4_000, 5_000, 6_000)


async def search_phase(bench: Bench) -> dict[str, Any]:
    org = bench.samples[0][0] if bench.samples else None
    workloads: dict[str, dict[str, Any]] = {
        "question": {"text": " ".join(word(rank) for rank in QUESTION) + "?"},
        "rare word": {"text": word(RARE)},
        "common word": {"text": word(COMMON)},
        "phrase": {"text": f'"{word(2)} {word(3)}"'},
    }
    if org is not None:
        workloads["common word, match"] = {"text": word(COMMON), "match": [org]}
    out: dict[str, Any] = {}
    for name, asked in workloads.items():
        out[name] = await _search(bench, name, {**asked, "first": bench.args.page})
    return out


async def _search(bench: Bench, name: str, variables: dict[str, Any]) -> dict[str, Any]:
    trace, data = await bench.capture(SEARCH, variables)
    total = data["search"]["totalCount"]
    statements = sum(len(u.statements) for u in trace)
    say(f"search {name} ({variables}): {total:,} hits; {statements} statements a call")
    past = {**variables, "asOf": datetime.now(UTC).isoformat()}
    callers = bench.callers(1)
    caller = callers.items[0]
    got = (await caller.call(SEARCH_AS_OF, past))["search"]["totalCount"]
    if got != total:
        raise RuntimeError(f"search asOf counts {got}, now {total}")
    calls = [variables] * bench.args.queries

    async def gateway(v: dict[str, Any]) -> Any:
        return await caller.call(SEARCH, v)

    async def as_of(v: dict[str, Any]) -> Any:
        return await caller.call(SEARCH_AS_OF, past)

    async def raw(_: Any) -> None:
        rows = await replay(bench.pool, trace)
        if rows and "body" in rows[0].keys():  # noqa: SIM118 - a Record's `in` reads values
            json.loads(rows[0]["body"])

    sides = {
        "gateway": lambda: latencies(calls, gateway),
        "raw": lambda: latencies(calls, raw),
        "gateway asOf": lambda: latencies(calls, as_of),
    }
    try:
        for side in sides.values():
            await side()  # warm-up
        rounds = await bench.rounds_of(f"search {name}", sides)
    finally:
        await callers.close()
    out: dict[str, Any] = {"hits": total, "match": bool(variables.get("match"))}
    for side, key in (("gateway", "gateway"), ("raw", "raw"), ("gateway asOf", "as_of")):
        out[f"{key}_p50_ms"] = [percentile(x, 0.5) * 1000 for x in rounds[side]]
    return out
