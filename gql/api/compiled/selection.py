"""A query's selection as GraphQL executes it: fields by response key, fragments merged."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
)

from store.reads.compiled_sql import NotCompilable


@dataclass
class Node:
    """One response key: the field it names and every field node merged into it."""

    key: str
    name: str
    nodes: list[FieldNode] = field(default_factory=list)


def plain_operation(
    document: DocumentNode, operation: OperationDefinitionNode, kind: OperationType
) -> dict[str, FragmentDefinitionNode]:
    """The document's fragments by name, if the operation is of this kind and carries no
    directives (on itself or its variables); raises NotCompilable otherwise."""
    if operation.operation is not kind or operation.directives:
        raise NotCompilable(f"not a plain {kind.value}")
    if any(v.directives for v in operation.variable_definitions or ()):
        raise NotCompilable("variable directives")
    return {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}


def collect(
    selection_sets: Sequence[SelectionSetNode],
    fragments: Mapping[str, FragmentDefinitionNode],
    type_name: str,
    interfaces: Collection[str] = (),
) -> list[Node]:
    """The fields the selection sets ask of an object of `type_name`, in response order.

    As GraphQL's CollectFields: fields with one response key merge (validation has
    made sure they agree), fragments on the type or on an interface it implements
    contribute their fields in place. Directives (@include, @skip) are not followed
    here: a selection holding one is not compiled.
    """
    applies = {type_name, *interfaces}
    merged: dict[str, Node] = {}
    seen_fragments: set[str] = set()

    def visit(selection_set: SelectionSetNode) -> None:
        for selection in selection_set.selections:
            if selection.directives:
                raise NotCompilable("directive")
            if isinstance(selection, FieldNode):
                key = (selection.alias or selection.name).value
                node = merged.get(key)
                if node is None:
                    node = merged[key] = Node(key, selection.name.value)
                node.nodes.append(selection)
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                if condition is not None and condition.name.value not in applies:
                    raise NotCompilable("type condition")
                visit(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                if name in seen_fragments:
                    continue
                seen_fragments.add(name)
                fragment = fragments[name]
                if fragment.type_condition.name.value not in applies:
                    raise NotCompilable("type condition")
                visit(fragment.selection_set)

    for selection_set in selection_sets:
        visit(selection_set)
    return list(merged.values())


def children(node: Node) -> list[SelectionSetNode]:
    """The selection sets of every field node merged into `node`."""
    return [n.selection_set for n in node.nodes if n.selection_set is not None]
