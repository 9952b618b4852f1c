"""A generated vault shaped like a real Obsidian one, for the intake and walk benches.

Notes named in words (with spaces; a few names repeated in other folders), in nested
folders; a frontmatter on some (title, aliases, tags); two to eight sections; links whose
targets follow a Zipf law (a few notes are linked from everywhere, most from a few), in
every form the editors write: `[[Name]]`, `[[name]]` in another case, `[[Name|alias]]`,
`[[Name#Heading]]`, `[[#Heading]]` within the note, relative Markdown links, embeds of
attachments (images, PDFs), escaped pipes in tables, links to notes not written yet;
fenced code (also inside a callout) holding link-like text that is no link; a few #tags.
Deterministic for a seed.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "service",
    "runbook",
    "deploy",
    "rollback",
    "metric",
    "alert",
    "owner",
    "plan",
    "review",
    "budget",
    "vendor",
    "schema",
    "index",
    "cache",
    "queue",
    "worker",
    "incident",
    "retro",
    "goal",
    "draft",
    "meeting",
]
TOPICS = ("Project", "Area", "Meeting", "Person", "Concept", "Recipe", "Book", "Journal")
FOLDERS = (
    "Projects",
    "Projects/Archive",
    "Areas",
    "Meetings",
    "Meetings/2026",
    "People",
    "Concepts",
    "Reading",
    "Journal",
    "",
)
TAGS = ("project", "idea", "todo", "review", "reading", "person")
# Attachments per note, on average, and the share of notes that hold a table, code, a
# callout with code, a frontmatter.
ATTACHMENTS_PER_NOTE = 0.06
TABLE, CODE, CALLOUT, FRONT = 0.2, 0.15, 0.05, 0.4
ZIPF = 1.1
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)
PDF = b"%PDF-1.4\n" + bytes(256)


@dataclass(frozen=True)
class Vault:
    """What was written: each note's path, the attachments, and how often each note is
    the target of a link (the hub is the most linked)."""

    notes: tuple[str, ...]
    attachments: tuple[str, ...]
    linked: Counter[str]

    @property
    def hub(self) -> str:
        return self.linked.most_common(1)[0][0]


def _name(rng: random.Random, n: int) -> str:
    return f"{rng.choice(TOPICS)} {rng.choice(WORDS).title()} {n}"


def write_vault(folder: Path, notes: int, seed: int = 11) -> Vault:
    """Write a vault of `notes` notes (and its attachments) into `folder`."""
    rng = random.Random(seed)
    names = [_name(rng, n) for n in range(notes)]
    # A few names again in another folder: a link to such a name reaches the nearest.
    for n in range(0, notes, 97):
        names[n] = names[max(0, n - 1)] if n else names[n]
    paths = []
    for n, name in enumerate(names):
        where = FOLDERS[(n * 7 + len(name)) % len(FOLDERS)]
        path = f"{where}/{name}.md" if where else f"{name}.md"
        while path in paths:
            path = path.replace(".md", " again.md")
        paths.append(path)
    attachments = [
        f"Attachments/{'image' if k % 5 else 'scan'}-{k}.{'png' if k % 5 else 'pdf'}"
        for k in range(max(1, int(notes * ATTACHMENTS_PER_NOTE)))
    ]
    weights = [1 / (rank + 1) ** ZIPF for rank in range(notes)]
    order = list(range(notes))
    rng.shuffle(order)  # the most linked notes are anywhere in the vault
    linked: Counter[str] = Counter()

    def target() -> int:
        return order[rng.choices(range(notes), weights)[0]]

    for n, path in enumerate(paths):
        text = _note(rng, n, names, paths, attachments, target, linked)
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    for k, rel in enumerate(attachments):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(PDF if rel.endswith(".pdf") else PNG + bytes([k % 256]))
    return Vault(tuple(paths), tuple(attachments), linked)


def _note(
    rng: random.Random,
    n: int,
    names: list[str],
    paths: list[str],
    attachments: list[str],
    target: object,
    linked: Counter[str],
) -> str:
    pick = target  # a callable: the index of a Zipf-chosen note
    assert callable(pick)
    lines: list[str] = []
    if rng.random() < FRONT:
        lines += ["---", f"title: {names[n]} notes" if rng.random() < 0.3 else f"id: {n}"]
        lines.append(f"aliases: [{rng.choice(WORDS).title()} {n}]")
        lines += [f"tags: [{rng.choice(TAGS)}]", "---"]
    lines += [f"# {names[n]}", _words(rng, 25) + (f" #{rng.choice(TAGS)}" if n % 4 == 0 else "")]
    sections = [f"{rng.choice(WORDS).title()} {s}" for s in range(rng.randint(1, 7))]
    for heading in sections:
        lines += [f"## {heading}", _words(rng, 40)]
        for _ in range(rng.randint(0, 5)):
            lines.append(_link(rng, n, names, paths, attachments, pick(), sections, linked))
        if rng.random() < TABLE:
            t = pick()
            linked[paths[t]] += 1
            lines += [
                "| Note | Why |",
                "| --- | --- |",
                f"| [[{names[t]}\\|{rng.choice(WORDS)}]] | {_words(rng, 4)} |",
            ]
        if rng.random() < CODE:
            lines += ["```", f"[[Not a link {n}]] #not-a-tag", "```"]
        if rng.random() < CALLOUT:
            lines += ["> [!note]", "> ```", f"> [[Not a link either {n}]]", "> ```"]
    return "\n".join(lines) + "\n"


def _link(
    rng: random.Random,
    n: int,
    names: list[str],
    paths: list[str],
    attachments: list[str],
    t: int,
    sections: list[str],
    linked: Counter[str],
) -> str:
    roll = rng.random()
    if roll < 0.05:
        return f"Embedded: ![[{rng.choice(attachments).rsplit('/', 1)[1]}]]"
    if roll < 0.08:
        return f"Later: [[Unwritten {n} {rng.randrange(1000)}]]"
    if roll < 0.12:
        return f"Within: [[#{rng.choice(sections)}]]"
    linked[paths[t]] += 1
    name = names[t]
    if roll < 0.2:
        return f"See [{rng.choice(WORDS)}]({quote(paths[t])})."
    if roll < 0.3:
        return f"See [[{name.lower()}]]."
    if roll < 0.45:
        return f"See [[{name}|{rng.choice(WORDS)}]]."
    if roll < 0.55:
        return f"See [[{name}#{rng.choice(WORDS).title()} 0]]."
    return f"See [[{name}]] {_words(rng, 6)}."


def _words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices(WORDS, k=k))
