"""What a query may ask for, counted before it runs: the objects it could make the gateway build.

Depth and alias limits do not bound a query whose lists nest inside lists: each
`members(first: n)` under each of a record's edge properties multiplies the work.
The cost is counted on the document alone, with its variables, before any SQL runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    SelectionSetNode,
    ValueNode,
    VariableNode,
)
from graphql.utilities import get_operation_ast
from strawberry.extensions import SchemaExtension

from store.limits import MAX_PROPERTIES
from store.reads.pages import DEFAULT_PAGE

# Room for a record with every edge property, a page of members each and their versions
# (about 78,000 at the worst case of 256 properties); far below what stalls a gateway.
DEFAULT_MAX_COST = 100_000
# How many items a list without `first` or `limit` is counted as. A record carries at
# most MAX_PROPERTIES edge properties; other unbounded lists (versions, labels) get a
# round guess, since only their length in the data would say more.
LIST_SIZES = {"edgeProperties": MAX_PROPERTIES}
DEFAULT_LIST_SIZE = 100
# Built from the policy in force, in memory: as large as the policy, not as the data.
POLICY_TYPES = frozenset({"Profile"})
SIZE_ARGUMENTS = ("first", "limit")

_Composite = GraphQLObjectType | GraphQLInterfaceType


def query_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation_name: str | None,
    variables: Mapping[str, object] | None,
) -> int:
    """How many objects the operation could return, counting every list at its largest.

    A list counts `first` (or `limit`) items when the field or the page it belongs to
    names one, otherwise its default size; scalars are free, since they are read from
    objects already built. The document must have passed validation.
    """
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return 0
    root = schema.get_root_type(operation.operation)
    if root is None:
        return 0
    counter = _Counter(
        {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)},
        variables or {},
    )
    return counter.selection(root, operation.selection_set, None)


class _Counter:
    def __init__(
        self, fragments: dict[str, FragmentDefinitionNode], variables: Mapping[str, object]
    ) -> None:
        self.fragments = fragments
        self.variables = variables

    def selection(self, parent: _Composite, selection: SelectionSetNode, page: int | None) -> int:
        """The cost of the fields selected on one `parent` object; `page` sizes its items."""
        total = 0
        for owner, field in self.fields(parent, selection):
            name = field.name.value
            if name.startswith("__"):
                # introspection: bounded by the schema, not by the data
                continue
            definition = owner.fields.get(name)
            if definition is None:
                continue
            named, is_list = _unwrap(definition.type)
            if not isinstance(named, _Composite) or field.selection_set is None:
                continue
            if named.name in POLICY_TYPES:
                total += 1
                continue
            size = self.size(field)
            each = 1 + self.selection(named, field.selection_set, self.page_size(named, size))
            if not is_list:
                total += each
            elif name == "items" and page is not None:
                total += page * each
            else:
                total += self.list_size(field, size) * each
        return total

    def fields(
        self, parent: _Composite, selection: SelectionSetNode
    ) -> Iterator[tuple[_Composite, FieldNode]]:
        """Every field selected, through inline fragments and fragment spreads."""
        for node in selection.selections:
            if isinstance(node, FieldNode):
                yield parent, node
            elif isinstance(node, InlineFragmentNode):
                yield from self.fields(parent, node.selection_set)
            elif isinstance(node, FragmentSpreadNode):
                fragment = self.fragments.get(node.name.value)
                if fragment is not None:
                    yield from self.fields(parent, fragment.selection_set)

    def page_size(self, named: _Composite, size: int | None) -> int | None:
        """For a page (a type with `items`), how many items it holds."""
        if "items" not in named.fields:
            return None
        return DEFAULT_PAGE if size is None else size

    def list_size(self, field: FieldNode, size: int | None) -> int:
        if size is not None:
            return size
        # A list made from a list argument (ingestMany's inputs) is as long as it.
        lengths = [self.length(argument.value) for argument in field.arguments or ()]
        known = [n for n in lengths if n is not None]
        if known:
            return max(known)
        return LIST_SIZES.get(field.name.value, DEFAULT_LIST_SIZE)

    def size(self, field: FieldNode) -> int | None:
        """The field's `first` or `limit`, from the document or its variables."""
        for argument in field.arguments or ():
            if argument.name.value in SIZE_ARGUMENTS:
                value = self.value(argument.value)
                if isinstance(value, int) and not isinstance(value, bool):
                    return max(value, 0)
        return None

    def length(self, node: ValueNode) -> int | None:
        value = self.value(node)
        if isinstance(value, list):
            return len(value)
        if isinstance(node, ListValueNode):
            return len(node.values)
        return None

    def value(self, node: ValueNode) -> object:
        if isinstance(node, VariableNode):
            return self.variables.get(node.name.value)
        if isinstance(node, IntValueNode):
            return int(node.value)
        return None


def _unwrap(output: GraphQLOutputType) -> tuple[object, bool]:
    """The named type under any non-null and list wrappers, and whether a list was one."""
    is_list = False
    current: object = output
    while isinstance(current, GraphQLNonNull | GraphQLList):
        is_list = is_list or isinstance(current, GraphQLList)
        current = current.of_type
    return current, is_list


class QueryCostLimit(SchemaExtension):
    """Refuses an operation whose cost is over the limit, before it executes.

    Listed after ValidationCache, whose validation hook has run when this one does;
    a document that failed validation is left to that refusal.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if not context.pre_execution_errors and document is not None:
            cost = query_cost(
                context.schema._schema, document, context.operation_name, context.variables
            )
            if cost > self.limit:
                context.pre_execution_errors = [cost_error(cost, self.limit)]
        yield


def cost_error(cost: int, limit: int) -> GraphQLError:
    return GraphQLError(
        f"this query could return {cost:,} objects, over the limit of {limit:,} per "
        "request; ask for fewer items per list (first:, limit:) or nest fewer lists "
        "(a page of members under each edge property of each record multiplies), "
        "and page through the rest with after:",
        extensions={"code": "BAD_USER_INPUT", "cost": cost, "limit": limit},
    )
