"""Fusion: which way of fusing the text and vector lists ranks a question's evidence best?

    .venv/bin/python -m bench.fusion [--split dev|tst|all] [--pooled] [--lists FILE]

What `search(text:, vector:)` fuses are two lists the gateway computes: the text list
(BM25 over the query's words, every candidate with its score) and the vector list (cosine
similarity). This bench asks a real gateway (`edgeloom serve`, the relevance bench's lane
`vectors`: default language and 384-dimension all-MiniLM-L6-v2 vectors) for each FriendsQA
question's whole text list (`search(text:)`, every candidate, paged) and the BM25 bound of
its query (the sum over its terms of idf * (k1 + 1), from the search plan, as the statement
would have it); the vector list is the exact cosine similarity to every utterance of the
scope, computed here from the same vectors. Then each fusion is applied to the same lists
and scored as `bench.relevance` scores a method (recall@k, MRR), beside each list alone:
dozens of fusions for the cost of one gateway run. The lists are kept as JSON under
bench/results/ (`--lists FILE` reads them again instead of asking the gateway).

The fusion the gateway serves is then measured end to end by `bench.relevance`; this bench
is for choosing it. Tune on `dev` only; `tst` and `all` report the chosen one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import friendsqa
from bench.friendsqa import Question, Split
from bench.measure import say
from bench.relevance import FIRST, POLICY, VECTORS, Gateway, figures, mint_token, write
from bench.server import REPO, BenchDatabase, gateway_process, plain_url

RESULTS = REPO / "bench" / "results"
# The vector list's depth, as the gateway reads it (store.kinds.record.search.vector_hits).
VECTOR_DEPTH = 100
TEXT_LIST = """query($text: String, $match: [String!], $after: String) {
  search(text: $text, match: $match, lanes: ["vectors"], first: 500, after: $after) {
    items { score record { id } } pageInfo { hasNextPage endCursor } } }"""


@dataclass
class Lists:
    """One question's two lists: (passage id, score), best first, and its text bound."""

    text: list[tuple[str, float]]
    vector: list[tuple[str, float]]
    bound: float


async def gather_lists(args: argparse.Namespace, split: Split) -> list[dict[str, Any]]:
    import asyncpg

    from store.kinds.record.search import bm25, planner
    from store.kinds.record.search.terms import Syntax

    questions = split.questions
    db = await BenchDatabase.create()
    logs = Path(tempfile.mkdtemp(prefix="edgeloom-fusion-"))
    try:
        policy = logs / "policy.yaml"
        policy.write_text(POLICY)
        async with gateway_process(db.url, logs, extra=["--policy", str(policy)]) as served:
            gateway = Gateway(served.url, await mint_token(db.url, "bench"))
            try:
                # BM25 needs no vectors; the similarities are computed here, below.
                owner = await write(gateway, split.passages, VECTORS)
                say(f"{len(owner):,} records written")

                async def one(q: Question) -> list[tuple[str, float]]:
                    found: list[tuple[str, float]] = []
                    after = None
                    while True:
                        variables: dict[str, Any] = {"text": q.text, "after": after}
                        if not args.pooled:
                            variables["match"] = [f"scene:{q.scene}"]
                        page = (await gateway.call(TEXT_LIST, variables))["search"]
                        found += [(owner[i["record"]["id"]], i["score"]) for i in page["items"]]
                        if not page["pageInfo"]["hasNextPage"]:
                            return found
                        after = page["pageInfo"]["endCursor"]

                texts = list(await asyncio.gather(*(one(q) for q in questions)))
            finally:
                await gateway.close()
        conn = await asyncpg.connect(plain_url(db.url))
        try:
            bounds = []
            for q in questions:
                plan = await planner.plan(conn, [VECTORS], q.text, Syntax.NATURAL)  # type: ignore[arg-type]
                weights = [w for lane in plan.lanes[:1] for w in lane.idfs + lane.phrase_idfs]
                bounds.append((bm25.K1 + 1) * sum(weights))
        finally:
            await conn.close()
    finally:
        await db.drop()
        shutil.rmtree(logs, ignore_errors=True)
    return [{"text": t, "bound": b} for t, b in zip(texts, bounds, strict=True)]


def with_vectors(
    split: Split, questions: Sequence[Question], raw: list[Any], pooled: bool
) -> list[Lists]:
    """Each question's lists: its text list and bound as the gateway gave them, and the
    exact cosine similarity of every utterance of its scope, nearest first."""
    from bench import embed as model

    embedder = model.Embedder()
    passage_vectors = embedder.embed([p.text for p in split.passages])
    question_vectors = embedder.embed([q.text for q in questions])
    ids = [p.id for p in split.passages]
    scenes = np.array([p.scene for p in split.passages])
    out = []
    for n, q in enumerate(questions):
        sims = passage_vectors @ question_vectors[n]
        scope = np.arange(len(ids)) if pooled else np.flatnonzero(scenes == q.scene)
        order = scope[np.argsort(-sims[scope], kind="stable")]
        vector = [(ids[i], float(sims[i])) for i in order]
        text = [(str(i), float(x)) for i, x in raw[n]["text"]]
        out.append(Lists(text, vector, float(raw[n]["bound"])))
    return out


Fusion = Callable[[Lists], list[str]]


def cut(pairs: list[tuple[str, float]], depth: int | None) -> list[tuple[str, float]]:
    return pairs if depth is None else pairs[:depth]


def dbsf(weight: float, text_depth: int | None, vector_depth: int | None) -> Fusion:
    """Each list's scores placed on its distribution: (s - mean + 3 sd) / (6 sd)."""

    def placed(pairs: list[tuple[str, float]]) -> dict[str, float]:
        if not pairs:
            return {}
        scores = [s for _, s in pairs]
        mean, sd = statistics.fmean(scores), statistics.pstdev(scores)
        return {i: (s - mean + 3 * sd) / (6 * sd) if sd else 1.0 for i, s in pairs}

    def fuse(lists: Lists) -> list[str]:
        t = placed(cut(lists.text, text_depth))
        v = placed(cut(lists.vector, vector_depth))
        return top({i: weight * t.get(i, 0) + (1 - weight) * v.get(i, 0) for i in t | v})

    return fuse


def rrf(k: float, weight: float, text_depth: int | None, vector_depth: int | None) -> Fusion:
    """Reciprocal rank fusion, the text's weight `weight` (0.5: plain RRF)."""

    def fuse(lists: Lists) -> list[str]:
        fused: dict[str, float] = {}
        for pairs, w in (
            (cut(lists.text, text_depth), weight),
            (cut(lists.vector, vector_depth), 1 - weight),
        ):
            for rank, (i, _) in enumerate(pairs, 1):
                fused[i] = fused.get(i, 0) + w / (k + rank)
        return top(fused)

    return fuse


def convex(weight: float, text_norm: str, vector_norm: str, compared: int | None = None) -> Fusion:
    """weight * text + (1 - weight) * similarity, each normalised: text 'bound' (over the
    query's BM25 bound: Bruch et al.'s theoretical min-max, what the gateway serves),
    'max' (over the list's best) or 'minmax' (between the list's least and best); the
    similarity 'theory' ((cos + 1) / 2), 'raw' or 'minmax'. The candidates are the text
    list and the VECTOR_DEPTH nearest. A record in no text list holds none of the words
    it was read by: BM25 0. A text hit past the nearest: among the text list's best
    `compared` (None: all), its own similarity (as the gateway computes it); past them,
    0 (as the gateway reads it), or with `compared` 0 the least of the nearest."""

    def normalise(pairs: list[tuple[str, float]], how: str, bound: float) -> dict[str, float]:
        if not pairs:
            return {}
        lo, hi = min(s for _, s in pairs), max(s for _, s in pairs)
        if how == "bound":
            return {i: s / bound if bound else 0.0 for i, s in pairs}
        if how == "max":
            return {i: s / hi if hi else 0.0 for i, s in pairs}
        if how == "minmax":
            return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in pairs}
        if how == "theory":
            return {i: (s + 1) / 2 for i, s in pairs}
        return dict(pairs)

    def fuse(lists: Lists) -> list[str]:
        t = normalise(lists.text, text_norm, lists.bound)
        vector = lists.vector[:VECTOR_DEPTH]
        floor_least = compared == 0
        if not floor_least:
            nearest = {i for i, _ in vector}
            asked = {i for i, _ in lists.text[:compared]}
            vector = vector + [(i, s) for i, s in lists.vector if i in asked and i not in nearest]
        v = normalise(vector, vector_norm, 0)
        floor = min(v.values(), default=0.0) if floor_least else 0.0
        return top({i: weight * t.get(i, 0) + (1 - weight) * v.get(i, floor) for i in t | v})

    return fuse


def top(fused: dict[str, float]) -> list[str]:
    return [i for i, _ in sorted(fused.items(), key=lambda kv: -kv[1])[:FIRST]]


def candidates() -> dict[str, Fusion]:
    """The fusions measured (bench/journal/2026-12-07-fusion-pass-1.md)."""
    out: dict[str, Fusion] = {
        "text alone": lambda x: [i for i, _ in x.text[:FIRST]],
        "vectors alone": lambda x: [i for i, _ in x.vector[:FIRST]],
    }
    weights = (0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)
    for w in weights:
        for dt, dv in ((20, 20), (None, VECTOR_DEPTH), (None, 1000)):
            out[f"dbsf {w}, text {dt or 'all'}, vectors {dv}"] = dbsf(w, dt, dv)
    for k in (10, 30, 60):
        for w in (0.4, 0.5, 0.6):
            for d in (20, VECTOR_DEPTH):
                out[f"rrf k {k}, text weight {w}, depth {d}"] = rrf(k, w, d, d)
    for tn, vn in (("bound", "theory"), ("max", "theory"), ("max", "raw"), ("minmax", "minmax")):
        for w in weights:
            out[f"convex {tn}/{vn} {w}, nearest only"] = convex(w, tn, vn, 0)
            out[f"convex {tn}/{vn} {w}, every similarity"] = convex(w, tn, vn)
    for n in (50, 100, 200):
        out[f"convex bound/theory 0.65, text's {n} best compared"] = convex(
            0.65, "bound", "theory", n
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--split", choices=sorted(friendsqa.SPLITS), default="dev")
    p.add_argument("--pooled", action="store_true")
    p.add_argument("--lists", type=Path, help="the text lists (default: bench/results/...)")
    p.add_argument("--only", help="only the fusions whose name holds this")
    args = p.parse_args(argv)
    setting = "pooled" if args.pooled else "scoped"
    folder = friendsqa.data_dir(None)
    assert folder is not None, "no shared/data/relevance beside the repository"
    split = friendsqa.load(folder, args.split)
    saved = args.lists or RESULTS / f"fusion-lists-{args.split}-{setting}.json"
    if saved.exists():
        raw = json.loads(saved.read_text())
    else:
        raw = asyncio.run(gather_lists(args, split))
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(raw))
        say(f"text lists in {saved}")
    lists = with_vectors(split, split.questions, raw, args.pooled)
    rows = []
    for name, fuse in candidates().items():
        if args.only and args.only not in name and "alone" not in name:
            continue
        rows.append((name, figures([fuse(x) for x in lists], split.questions)))
    better = max(m["recall@10"] for n, m in rows if "alone" in n)
    print(f"FriendsQA {args.split}, {setting}: better list's recall@10 {better:.3f}")
    print("| fusion | recall@5 | recall@10 | recall@20 | MRR | over the better list |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in rows:
        print(
            f"| {name} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | {m['recall@20']:.3f} "
            f"| {m['mrr']:.3f} | {m['recall@10'] - better:+.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
