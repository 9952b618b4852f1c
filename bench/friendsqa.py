"""FriendsQA's questions and their evidence utterances, read where they are staged.

The data stays outside the project (its README in `shared/data/relevance/` gives the
source, licence and format): `--data DIR`, else `EDGELOOM_RELEVANCE_DATA`, else the first
`shared/data/relevance` beside the repository or beside one of its parent folders
(`../shared` for a clone beside `shared/`, as CI lays it).

A passage is one utterance, `<scene>:<uid>`, its text "speakers: utterance" (some answers
are a speaker's name). A question's evidence is the distinct utterances its answers point at.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = "EDGELOOM_RELEVANCE_DATA"
SPLITS = {"dev": ("dev",), "tst": ("tst",), "all": ("dev", "tst")}
NOTE = "#NOTE#"  # a stage direction's "speaker"


@dataclass(frozen=True)
class Passage:
    id: str  # <scene>:<uid>
    scene: str
    speakers: tuple[str, ...]
    text: str  # "speakers: utterance"


@dataclass(frozen=True)
class Question:
    id: str
    scene: str
    kind: str  # What, Who, When, Where, Why or How
    text: str
    evidence: frozenset[str]  # passage ids


@dataclass(frozen=True)
class Split:
    name: str
    passages: list[Passage]
    questions: list[Question]


def data_dir(given: Path | None = None) -> Path | None:
    """Where the relevance data is, or None when it is not where it is looked for (the
    folder given, else the environment's, else beside the repository or a parent)."""
    if given is None and os.environ.get(ENV):
        given = Path(os.environ[ENV])
    if given is not None:
        candidates = [given]
    else:
        candidates = [folder / "shared" / "data" / "relevance" for folder in REPO.parents]
    return next((c for c in candidates if (c / "friendsqa").is_dir()), None)


def load(folder: Path, split: str) -> Split:
    passages: list[Passage] = []
    questions: list[Question] = []
    for part in SPLITS[split]:
        raw = json.loads((folder / "friendsqa" / f"friendsqa_{part}.json").read_text())
        for scene in raw["data"]:
            title = scene["title"]
            (paragraph,) = scene["paragraphs"]
            for u in paragraph["utterances:"]:  # the trailing colon is the source's
                speakers = tuple(u["speakers"])
                text = f"{', '.join(speakers)}: {u['utterance']}"
                passages.append(Passage(f"{title}:{u['uid']}", title, speakers, text))
            for q in paragraph["qas"]:
                evidence = frozenset(f"{title}:{a['utterance_id']}" for a in q["answers"])
                kind = q["id"][len(title) + 1 :].split("_")[0]
                questions.append(Question(q["id"], title, kind, q["question"], evidence))
    ids = [p.id for p in passages]
    if len(set(ids)) != len(ids):
        raise ValueError(f"passage ids repeat in split {split}")
    known = set(ids)
    for q in questions:
        if not q.evidence <= known:
            raise ValueError(f"question {q.id} points at an utterance not in its scene")
    return Split(split, passages, questions)
