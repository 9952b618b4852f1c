"""The operation a request asks for, as the request log and the metrics name it: the
root field, from the schema's names only (`gql.api.observe` carries it, without graphql)."""

from __future__ import annotations

from graphql import DocumentNode, FieldNode, GraphQLSchema, OperationType
from graphql.utilities import get_operation_ast

# The operation label of a document whose root fields are not all the schema's (it
# fails validation): never the client's own words, so metrics stay bounded.
UNKNOWN = "unknown"
MULTIPLE = "multiple"

_LABELS: dict[tuple[int, str, str | None], str] = {}


def label_of(schema: GraphQLSchema, query: str, name: str | None, document: DocumentNode) -> str:
    """`operation_label`, made once per document text and operation name."""
    key = (id(schema), query, name)
    try:
        return _LABELS[key]
    except KeyError:
        pass
    if len(_LABELS) >= 1024:
        _LABELS.clear()
    label = _LABELS[key] = operation_label(schema, document, name)
    return label


def operation_label(schema: GraphQLSchema, document: DocumentNode, name: str | None) -> str:
    """The root field an operation asks for, `MULTIPLE` for several, `UNKNOWN` for any
    the schema does not have (so a metric's labels are the schema's names only)."""
    operation = get_operation_ast(document, name)
    if operation is None:
        return UNKNOWN
    root = {
        OperationType.QUERY: schema.query_type,
        OperationType.MUTATION: schema.mutation_type,
        OperationType.SUBSCRIPTION: schema.subscription_type,
    }[operation.operation]
    fields = set()
    for selection in operation.selection_set.selections:
        if not isinstance(selection, FieldNode):
            return UNKNOWN  # a fragment at the root: rare, and not worth expanding here
        field = selection.name.value
        if field.startswith("__"):
            field = "introspection"
        elif root is None or field not in root.fields:
            return UNKNOWN
        fields.add(field)
    if len(fields) == 1:
        return fields.pop()
    return MULTIPLE if fields else UNKNOWN
