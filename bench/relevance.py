"""Relevance: does `search` find the evidence of a question asked as an agent asks it?

    .venv/bin/python -m bench.relevance [--split dev|tst|all] [--limit N] [--pooled]
        [--syntax NAME] [--no-vectors] [--data DIR] [--json FILE]

On FriendsQA (`bench/friendsqa.py`: dialogue turns with the turns that answer each
question), every utterance is written as a record with `ingestMany` (properties
`scene:<title>` and `speaker:<name>`) to a real gateway (`edgeloom serve`) on a fresh
database:

- lane `default` of a gateway started without a policy (the development policy);
- lanes `english` (declaring `text_search: english`) and `vectors` (the default language and
  a 384-dimension `embedding`, each record with its all-MiniLM-L6-v2 vector:
  `bench/embed.py`; `--no-vectors` leaves it out) of a gateway started with `--policy`.

Each question is then asked as it is written, `search(text: <question>, first: 20,
match: ["scene:<its scene>"], lanes: [<lane>])` (the scoped setting: an agent's memory
search within one conversation; `--pooled` drops `match`, every question against every
utterance of the split), by text, by vector (`search(vector:)`) and both (hybrid). Beside
them, bm25s (Lucene's BM25 as bm25s's `lucene` method, k1 = 1.5 and b = 0.75, English
stop words, the Snowball English stemmer of PyStemmer) indexes the same texts and answers the
same questions, scoped the same way (scored over the whole split, as the gateway's
statistics are per lane, and kept to the question's scene).

Per method: recall@5/10/20 (the share of a question's evidence in its first k, averaged),
hit@10 (at least one), MRR (of the first evidence hit in the 20), the share of questions
the search answered with nothing, and the number of questions. A markdown table on stdout;
the figures as JSON under bench/results/ (or `--json FILE`).

`--syntax NAME` passes `syntax: NAME` to every search, where the gateway's schema has that
argument (read by introspection); without it the gateway's default applies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench import friendsqa
from bench.friendsqa import NOTE, Passage, Question, Split
from bench.measure import say
from bench.server import REPO, BenchDatabase, gateway_process

RESULTS = REPO / "bench" / "results"
FIRST = 20
KS = (5, 10, 20)
CONCURRENCY = 4
ENGLISH = "english"
VECTORS = "vectors"
POLICY = f"""\
# The relevance bench's lanes: PostgreSQL's English (stop words dropped), and the default
# language with the caller's vectors.
lanes:
  default: {{}}
  {ENGLISH}:
    text_search: english
  {VECTORS}:
    embedding: {{ dimensions: 384, model: all-MiniLM-L6-v2 }}
agents:
  bench: {{ read: ["*"], write: ["*"] }}
"""
INGEST = "mutation($inputs: [IngestInput!]!) { ingestMany(inputs: $inputs) { id } }"
SEARCH_ARGS = """query {
  __type(name: "Query") { fields { name args { name
    type { kind name ofType { kind name ofType { kind name } } } } } } }"""
PGVECTOR = "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
BM25S = "bm25s (Lucene BM25, English stop words, Snowball stemmer)"
RANDOM = "random order (the floor)"


class Gateway:
    """GraphQL over HTTP to one gateway, a few calls in flight."""

    def __init__(self, url: str, token: str | None = None) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.AsyncClient(base_url=url, headers=headers, timeout=120)
        self.slots = asyncio.Semaphore(CONCURRENCY)

    async def call(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        async with self.slots:
            reply = await self.client.post(
                "/graphql", json={"query": query, "variables": variables or {}}
            )
        body = reply.json()
        if reply.status_code != 200 or body.get("errors"):
            raise RuntimeError(f"HTTP {reply.status_code}: {str(body)[:600]}")
        data: dict[str, Any] = body["data"]
        return data

    async def close(self) -> None:
        await self.client.aclose()


def _type_text(ref: dict[str, Any]) -> str:
    if ref["kind"] == "NON_NULL":
        return _type_text(ref["ofType"]) + "!"
    if ref["kind"] == "LIST":
        return f"[{_type_text(ref['ofType'])}]"
    return str(ref["name"])


async def syntax_type(gateway: Gateway) -> str | None:
    """The GraphQL type of search's `syntax` argument, or None where search has none."""
    fields = (await gateway.call(SEARCH_ARGS))["__type"]["fields"]
    (search,) = [f for f in fields if f["name"] == "search"]
    for arg in search["args"]:
        if arg["name"] == "syntax":
            return _type_text(arg["type"])
    return None


def search_query(syntax: str | None) -> str:
    declared = f", $syntax: {syntax}" if syntax else ""
    passed = ", syntax: $syntax" if syntax else ""
    return f"""query($text: String, $vector: [Float!], $match: [String!], $lanes: [String!],
    $first: Int{declared}) {{
  search(text: $text, vector: $vector, match: $match, lanes: $lanes, first: $first{passed}) {{
    items {{ record {{ id }} }} }} }}"""


async def write(
    gateway: Gateway, passages: Sequence[Passage], lane: str, vectors: Any = None
) -> dict[str, str]:
    """Every passage as a record of `lane`; record id -> passage id."""
    batch = 200 if vectors is not None else 500
    owner: dict[str, str] = {}
    for start in range(0, len(passages), batch):
        part = passages[start : start + batch]
        inputs = []
        for n, p in enumerate(part, start):
            properties = [f"scene:{p.scene}"] + [f"speaker:{s}" for s in p.speakers if s != NOTE]
            item: dict[str, Any] = {"content": p.text, "lane": lane, "properties": properties}
            if vectors is not None:
                item["embedding"] = [round(float(x), 6) for x in vectors[n]]
            inputs.append(item)
        written = (await gateway.call(INGEST, {"inputs": inputs}))["ingestMany"]
        owner.update((r["id"], p.id) for r, p in zip(written, part, strict=True))
    return owner


async def ask(
    gateway: Gateway,
    query: str,
    questions: Sequence[Question],
    lane: str,
    owner: dict[str, str],
    pooled: bool,
    syntax: str | None,
    *,
    text: bool,
    vectors: Any = None,
) -> list[list[str]]:
    """Each question's first FIRST passage ids, as the gateway ranks them."""

    async def one(n: int, q: Question) -> list[str]:
        variables: dict[str, Any] = {"lanes": [lane], "first": FIRST}
        if text:
            variables["text"] = q.text
        if vectors is not None:
            variables["vector"] = [round(float(x), 6) for x in vectors[n]]
        if not pooled:
            variables["match"] = [f"scene:{q.scene}"]
        if syntax is not None:
            variables["syntax"] = syntax
        items = (await gateway.call(query, variables))["search"]["items"]
        return [owner[i["record"]["id"]] for i in items]

    return list(await asyncio.gather(*(one(n, q) for n, q in enumerate(questions))))


def bm25s_ranking(
    passages: Sequence[Passage], questions: Sequence[Question], pooled: bool
) -> list[list[str]]:
    """bm25s over the split's passages; scoped, each question's scores kept to its scene
    (a weight mask), as `match` keeps the gateway's to a scene of a lane's statistics."""
    import bm25s
    import numpy as np
    import Stemmer

    stemmer = Stemmer.Stemmer("english")

    def tokens(texts: list[str]) -> list[list[str]]:
        out: list[list[str]] = bm25s.tokenize(
            texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        return out

    retriever = bm25s.BM25(method="lucene")
    retriever.index(tokens([p.text for p in passages]), show_progress=False)
    known = set(retriever.vocab_dict)
    groups: dict[str, list[int]] = defaultdict(list)
    for n, q in enumerate(questions):
        groups["" if pooled else q.scene].append(n)
    ranked: list[list[str]] = [[] for _ in questions]
    for scene, members in groups.items():
        asked = [
            [t for t in words if t in known]
            for words in tokens([questions[n].text for n in members])
        ]
        mask = None
        if scene:
            mask = np.array([p.scene == scene for p in passages], dtype=np.float32)
        for n, words in zip(members, asked, strict=True):
            if not words:
                continue  # every word a stop word or unknown: nothing to score
            docs, scores = retriever.retrieve(
                [words], k=min(FIRST, len(passages)), weight_mask=mask, show_progress=False
            )
            ranked[n] = [
                passages[int(d)].id for d, s in zip(docs[0], scores[0], strict=True) if s > 0
            ]
    return ranked


def random_ranking(
    passages: Sequence[Passage], questions: Sequence[Question], pooled: bool
) -> list[list[str]]:
    """FIRST passages of the question's scope in a random order (seeded): what the scope
    alone gives. Scoped, most scenes hold about 20 utterances, so any ranking that returns
    the whole scene finds most evidence by its 20th; the floor says how much."""
    rng = random.Random(47)
    scopes: dict[str, list[str]] = defaultdict(list)
    for p in passages:
        scopes["" if pooled else p.scene].append(p.id)
    return [
        rng.sample(scope, min(FIRST, len(scope)))
        for scope in (scopes["" if pooled else q.scene] for q in questions)
    ]


def figures(ranked: Sequence[list[str]], questions: Sequence[Question]) -> dict[str, Any]:
    recall: dict[int, list[float]] = {k: [] for k in KS}
    hit10, reciprocal, empty = [], [], 0
    kinds: dict[str, list[float]] = defaultdict(list)
    for got, q in zip(ranked, questions, strict=True):
        for k in KS:
            recall[k].append(len(q.evidence & set(got[:k])) / len(q.evidence))
        kinds[q.kind].append(recall[10][-1])
        hit10.append(1.0 if q.evidence & set(got[:10]) else 0.0)
        first = next((rank for rank, pid in enumerate(got, 1) if pid in q.evidence), None)
        reciprocal.append(1 / first if first else 0.0)
        empty += not got
    out: dict[str, Any] = {f"recall@{k}": statistics.fmean(recall[k]) for k in KS}
    out["hit@10"] = statistics.fmean(hit10)
    out["mrr"] = statistics.fmean(reciprocal)
    out["no_hit"] = empty / len(questions)
    out["questions"] = len(questions)
    out["recall@10 by kind"] = {k: statistics.fmean(v) for k, v in sorted(kinds.items())}
    return out


def table(methods: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| method | recall@5 | recall@10 | recall@20 | hit@10 | MRR | no hit | questions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in methods.items():
        cells = [f"{m[f'recall@{k}']:.3f}" for k in KS] + [f"{m['hit@10']:.3f}", f"{m['mrr']:.3f}"]
        cells += [f"{m['no_hit']:.1%}", f"{m['questions']:,}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def mint_token(database_url: str, agent: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "gql.cli.main", "token", "create", "--agent", agent],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"token create failed: {done.stderr[-1000:]}")
    return done.stdout.strip().splitlines()[-1].strip()


async def has_pgvector(url: str) -> bool:
    import asyncpg

    from bench.server import plain_url

    conn = await asyncpg.connect(plain_url(url))
    try:
        return bool(await conn.fetchval(PGVECTOR))
    finally:
        await conn.close()


async def lane_language(url: str, lane: str) -> str | None:
    """The language a lane's words are indexed in, as the store keeps it (None: unknown)."""
    import asyncpg

    from bench.server import plain_url

    conn = await asyncpg.connect(plain_url(url))
    try:
        value = await conn.fetchval("SELECT edgeloom_search_config($1)::text", lane)
        return str(value) if value is not None else None
    except asyncpg.PostgresError:
        return None
    finally:
        await conn.close()


async def gateway_methods(
    args: argparse.Namespace, split: Split, questions: list[Question], vectors: Any
) -> tuple[dict[str, list[list[str]]], dict[str, Any]]:
    """Each gateway method's rankings, and what the run found out about the gateway."""
    passage_vectors, question_vectors = vectors if vectors is not None else (None, None)
    ranked: dict[str, list[list[str]]] = {}
    about: dict[str, Any] = {}
    db = None if args.database else await BenchDatabase.create(args.data_dir_pg)
    url = db.url if db is not None else args.database
    logs = Path(tempfile.mkdtemp(prefix="edgeloom-relevance-"))
    say(f"database: {db.where if db else 'the one given'}")
    try:
        if question_vectors is not None and not await has_pgvector(url):
            say("vector methods left out: this server has no pgvector")
            about["vectors"] = "left out: the server has no pgvector"
            passage_vectors = question_vectors = None
        async with gateway_process(url, logs) as served:
            gateway = Gateway(served.url)
            try:
                syntax_arg = await syntax_type(gateway)
                about["syntax argument"] = syntax_arg
                if args.syntax and syntax_arg is None:
                    raise SystemExit(
                        f"--syntax {args.syntax} given, but this gateway's search takes no "
                        "syntax argument: omit --syntax"
                    )
                syntax = args.syntax if syntax_arg else None
                query = search_query(syntax_arg if syntax else None)
                t0 = time.perf_counter()
                owner = await write(gateway, split.passages, "default")
                say(f"default lane: {len(owner):,} records in {time.perf_counter() - t0:.1f}s")
                t0 = time.perf_counter()
                ranked["edgeloom text, default policy"] = await ask(
                    gateway, query, questions, "default", owner, args.pooled, syntax, text=True
                )
                say(f"  {len(questions):,} text searches in {time.perf_counter() - t0:.1f}s")
            finally:
                await gateway.close()
        about["default lane language"] = await lane_language(url, "default")
        policy = logs / "relevance-policy.yaml"
        policy.write_text(POLICY)
        async with gateway_process(url, logs, extra=["--policy", str(policy)]) as served:
            gateway = Gateway(served.url, await mint_token(url, "bench"))
            try:
                t0 = time.perf_counter()
                owner = await write(gateway, split.passages, ENGLISH)
                say(f"{ENGLISH} lane: {len(owner):,} records in {time.perf_counter() - t0:.1f}s")
                t0 = time.perf_counter()
                ranked[f"edgeloom text, lane text_search: {ENGLISH}"] = await ask(
                    gateway, query, questions, ENGLISH, owner, args.pooled, syntax, text=True
                )
                if question_vectors is not None:
                    owner = await write(gateway, split.passages, VECTORS, passage_vectors)
                    ranked["edgeloom vectors (all-MiniLM-L6-v2 int8, 384-d)"] = await ask(
                        gateway,
                        query,
                        questions,
                        VECTORS,
                        owner,
                        args.pooled,
                        syntax,
                        text=False,
                        vectors=question_vectors,
                    )
                    ranked["edgeloom hybrid (default text + vectors)"] = await ask(
                        gateway,
                        query,
                        questions,
                        VECTORS,
                        owner,
                        args.pooled,
                        syntax,
                        text=True,
                        vectors=question_vectors,
                    )
                say(f"  {ENGLISH} and {VECTORS} lanes' searches in {time.perf_counter() - t0:.1f}s")
            finally:
                await gateway.close()
        about["syntax"] = syntax
    finally:
        if db is not None:
            await db.drop()
        shutil.rmtree(logs, ignore_errors=True)
    return ranked, about


def embed(split: Split, questions: list[Question]) -> Any:
    from bench import embed as model

    reason = model.missing()
    if reason:
        raise SystemExit(f"vectors need the model: {reason}; or pass --no-vectors")
    t0 = time.perf_counter()
    embedder = model.Embedder()
    passages = embedder.embed([p.text for p in split.passages])
    asked = embedder.embed([q.text for q in questions])
    say(
        f"vectors ({model.MODEL}): {len(passages):,} passages and {len(asked):,} questions "
        f"in {time.perf_counter() - t0:.1f}s (cached under {model.CACHE})"
    )
    return passages, asked


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    folder = friendsqa.data_dir(args.data)
    if folder is None:
        given = args.data or os.environ.get(friendsqa.ENV)
        raise SystemExit(
            f"no friendsqa/ folder in {given}"
            if given
            else "no shared/data/relevance beside the repository or a parent folder; "
            f"give --data DIR or {friendsqa.ENV}"
        )
    split = friendsqa.load(folder, args.split)
    questions = split.questions[: args.limit] if args.limit else split.questions
    if args.their_scenes:
        scenes = {q.scene for q in questions}
        split = Split(split.name, [p for p in split.passages if p.scene in scenes], questions)
    setting = "pooled" if args.pooled else "scoped"
    say(
        f"FriendsQA {args.split}: {len(split.passages):,} utterances, {len(questions):,} "
        f"questions, {setting}"
    )
    vectors = None if args.no_vectors else embed(split, questions)
    about: dict[str, Any] = {"vectors": "left out: --no-vectors" if vectors is None else "on"}
    ranked, found = await gateway_methods(args, split, questions, vectors)
    about.update(found)
    t0 = time.perf_counter()
    ranked[BM25S] = bm25s_ranking(split.passages, questions, args.pooled)
    say(f"bm25s in {time.perf_counter() - t0:.1f}s")
    ranked[RANDOM] = random_ranking(split.passages, questions, args.pooled)
    return {
        "split": args.split,
        "setting": setting,
        "limit": args.limit,
        "their_scenes": args.their_scenes,
        "passages": len(split.passages),
        "first": FIRST,
        **about,
        "methods": {name: figures(r, questions) for name, r in ranked.items()},
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--split", choices=sorted(friendsqa.SPLITS), default="all")
    p.add_argument("--limit", type=int, help="only the first N questions of the split")
    p.add_argument(
        "--their-scenes",
        action="store_true",
        help="write only the asked questions' scenes (quick; statistics over those alone)",
    )
    p.add_argument("--pooled", action="store_true", help="every question against every utterance")
    p.add_argument("--syntax", help="pass syntax: NAME to search (where the schema has it)")
    p.add_argument("--no-vectors", action="store_true", help="text and bm25s only")
    p.add_argument("--data", type=Path, help="the relevance data folder (default ../shared/...)")
    p.add_argument(
        "--database", help="an empty database to use as it is (default: a fresh one, dropped after)"
    )
    p.add_argument("--data-dir-pg", type=Path, help="embedded server folder (default: temp dir)")
    p.add_argument("--json", type=Path, help="write the figures here (default bench/results/)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = asyncio.run(measure(args))
    name = f"relevance-{out['split']}-{out['setting']}"
    name += f"-{args.limit}" if args.limit else ""
    name += "-their-scenes" if args.their_scenes else ""
    name += f"-{args.syntax}" if args.syntax else ""
    target = args.json or RESULTS / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"FriendsQA {out['split']}, {out['setting']}, first: {FIRST}"
        + (f", syntax: {out['syntax']}" if out.get("syntax") else "")
        + f"; lane default's words in {out.get('default lane language')}"
    )
    print()
    print(table(out["methods"]))
    say(f"figures in {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
