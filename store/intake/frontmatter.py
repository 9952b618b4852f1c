"""A note's frontmatter (the YAML block between `---` lines that opens it), as the
editors read it: `title` is its title, `aliases` (or `alias`) its other names, kept as
`alias:<name>` properties (found by a read, never used to resolve a link), and each other
key with a plain value (text, a number, a date, yes/no, or a list of them) a
`<key>:<value>` property of its file's record, which the lane's source type allows or
refuses like any other. `tags` stay text (tags come from the text), and intake's own
labels and the engine's reserved ones are never taken from a file.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

import yaml

from policies.properties import MAX_LABEL_LENGTH, MAX_VALUE_LENGTH, is_reserved_label
from store.intake.parts import is_markdown

ALIAS = "alias"
_BLOCK = re.compile(r"\A---[ \t]*\r?\n(.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_TEXT_KEYS = frozenset({"tags", "tag"})


@dataclass(frozen=True)
class Frontmatter:
    title: str | None = None
    properties: tuple[str, ...] = ()  # `label:value`, in the order written
    notes: tuple[str, ...] = ()  # what was not kept, and why

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(sorted({p.partition(":")[0] for p in self.properties}))


def frontmatter(path: str, content: str, own: frozenset[str]) -> Frontmatter:
    """The frontmatter of a Markdown note (an empty one when it has none). `own`: the
    labels intake writes itself, never taken from a file."""
    match = _BLOCK.match(content) if is_markdown(path) else None
    if match is None:
        return Frontmatter()
    try:
        body = yaml.safe_load(match.group(1) or "")
    except yaml.YAMLError:
        return Frontmatter(notes=("its frontmatter is not valid YAML: kept as text only",))
    if not isinstance(body, dict):
        return Frontmatter()
    title = body.get("title")
    properties: list[str] = []
    notes: list[str] = []
    for key, raw in body.items():
        name = str(key).strip().replace(" ", "_")
        if name == "title" or name.casefold() in _TEXT_KEYS:
            continue
        label = ALIAS if name in ("aliases", "alias") else name
        why = _refused_label(label, own)
        kept = _values(raw)
        if why is None and kept is None:
            why = "its value is not text, a number, a date, yes/no or a list of them"
        if why is not None:
            notes.append(f"frontmatter key '{name[:40]}' not kept as a property: {why}")
            continue
        assert kept is not None
        properties += [f"{label}:{v}" for v in kept if f"{label}:{v}" not in properties]
    shown = _scalar(title) if title is not None else None
    return Frontmatter(shown or None, tuple(properties), tuple(notes))


def _refused_label(label: str, own: frozenset[str]) -> str | None:
    if label in own:
        return "intake writes this label itself"
    if is_reserved_label(label):
        return "labels starting with 'e_' are the engine's"
    if len(label) > MAX_LABEL_LENGTH or _CONTROL.search(label) or ":" in label:
        return f"a label is at most {MAX_LABEL_LENGTH} characters, without ':' or controls"
    return None


def _values(raw: object) -> list[str] | None:
    """The values a key holds, or None when it holds something else."""
    items = raw if isinstance(raw, list) else [raw]
    found = []
    for item in items:
        if item is None:
            continue
        value = _scalar(item)
        if value is None:
            return None
        if value and len(value) <= MAX_VALUE_LENGTH and not _CONTROL.search(value):
            found.append(value)
    return found


def _scalar(item: object) -> str | None:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, str | int | float):
        return str(item).strip()
    if isinstance(item, datetime.date):
        return item.isoformat()
    return None
