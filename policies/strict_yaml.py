"""A policy document's YAML read strictly: the safe loader, with aliases that may not
expand a document past MAX_ALIAS_NODES nodes, nesting that stops at MAX_DEPTH, no merge
keys, and a value shown in a refusal cut short (`show`)."""

from __future__ import annotations

import reprlib
from collections.abc import Hashable
from typing import cast

import yaml
from yaml.nodes import CollectionNode, MappingNode, Node

from policies.errors import PolicyLoadError

_MERGE_TAG = "tag:yaml.org,2002:merge"

# How many nodes aliases (and merge keys) may add to a document, over those written:
# enough to share a block across many lanes; 987 bytes of nested aliases make 10^8.
MAX_ALIAS_NODES = 100_000

# A policy nests about 7 deep; the composer recurses once per level, and thousands of
# brackets would exhaust Python's stack.
MAX_DEPTH = 64


# Shows a bounded prefix of a value whatever its size: at most 8 items a level, 3 levels
# deep, 80 characters of a string, so a value shared a million times costs nothing.
_SHORT = reprlib.Repr()
_SHORT.maxlevel = 3
_SHORT.maxtuple = _SHORT.maxlist = _SHORT.maxdict = _SHORT.maxset = 8
_SHORT.maxstring = _SHORT.maxother = 80


def show(value: object) -> str:
    # A string keeps its start, cut as any other value is.
    shown = repr(value[:80]) if isinstance(value, str) else _SHORT.repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _check_aliases(root: Node) -> None:
    """Refuse a document whose aliases expand it by more than MAX_ALIAS_NODES nodes, or
    that refers to itself, before anything is built from it.

    An alias is the node its anchor names, shared: the walk sizes each distinct node
    once, so it costs the nodes written, not the nodes they expand to.
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    added = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        key = id(node)
        children = _children(node)
        if closing:
            open_.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
        elif key in sizes:
            added += sizes[key]
            if added > MAX_ALIAS_NODES:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"aliases may add at most {MAX_ALIAS_NODES:,} nodes to a document; those of "
                    "the node",
                    node.start_mark,
                )
        elif key in open_:
            raise yaml.composer.ComposerError(
                None,
                None,
                "a node refers to itself through an alias",
                node.start_mark,
            )
        else:
            open_.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children))


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, CollectionNode):
        return list(node.value)
    return []


class _StrictLoader(yaml.SafeLoader):
    """`yaml.safe_load`, except a key repeated within one mapping is refused, not last-wins,
    aliases may not expand the document past MAX_ALIAS_NODES (see `_check_aliases`) and
    nesting stops at MAX_DEPTH."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            node: Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1

    def compose_document(self) -> Node | None:
        node: Node | None = super().compose_document()
        if node is not None:
            _check_aliases(node)
        return node

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, object]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value if isinstance(node, MappingNode) else ():
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"found key {key!r} twice",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Node, deep: bool = False) -> object:
        """A scalar its tag cannot read (`!!int abc`) is a YAML error at its position."""
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read {show(node.value)} as {node.tag} ({exc})",
                node.start_mark,
            ) from exc


# YAML 1.1 reads an unquoted 2026-01-01 as a date, and 2026-13-01 as a crash. A policy
# holds no dates, so such a scalar stays the text it is and is judged by the key it is under.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_yaml(text: str, source: str) -> object:
    try:
        return cast(object, yaml.load(text, Loader=_StrictLoader))
    except yaml.MarkedYAMLError as exc:
        where = ""
        if exc.problem_mark is not None:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1} column {mark.column + 1}"
        raise PolicyLoadError(source, "", f"not valid YAML ({exc.problem}{where})") from exc
    except yaml.YAMLError as exc:
        raise PolicyLoadError(source, "", f"not valid YAML ({exc})") from exc
