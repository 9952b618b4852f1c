"""`EdgeloomStore`: LangGraph's long-term memory (`BaseStore`) kept in edgeloom.

Each item is one record in one lane (`lane`, "default" unless given), its value the
record's content as JSON, and its place edge properties the store writes beside it:

- `lg_item:1` on every item (an empty namespace prefix gathers them all);
- `lg_ns:["users","u1"]` the whole namespace (listed by `list_namespaces` with `values`);
- `lg_ns0:"users"`, `lg_ns1:"u1"`, ... one per segment, so that a namespace prefix is a
  `match` of its segments (`("users",)` gathers `lg_ns0:"users"`, never `("users2",)`);
- `lg_key:"k1"` the key;
- `lg_v.<field>:<JSON>` each top-level field whose value is a string, number, boolean or
  null, so that `filter={"field": value}` is a `match` too.

Segments, keys and values are written as JSON, which keeps spaces, non-ASCII text and
control characters exact. `put` with a key already held is an `update` of the same record (a
new version: `created_at` stays, `updated_at` moves), `delete` retires it, `get` gathers
namespace and key, `search(query=...)` is edgeloom's `search` narrowed by the namespace's
and the filter's `match`, and without a query it is a `gather`. docs/clients.md has the
whole mapping and what LangGraph behaviours do not apply.

The store's logic is written once, as plans (generators) that yield the client calls they
need and receive each answer; `batch` runs them on the sync client, `abatch` on the async
one.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from edgeloom_client.client import DEFAULT_URL, AsyncEdgeloom, Edgeloom

ITEM = "lg_item:1"
NAMESPACE = "lg_ns"
SEGMENT = "lg_ns"  # + the segment's position: lg_ns0, lg_ns1, ...
KEY = "lg_key"
FIELD = "lg_v."  # + the field's name
# edgeloom's limits on one edge property (policies.properties) and on one page.
MAX_LABEL = 128
MAX_VALUE = 1024
MAX_PAGE = 500
# Fields past this many are kept in the value but not indexed for `filter`: a record holds
# at most 256 edge properties, and the namespace takes some.
MAX_FIELDS = 200
RETIRED_REASON = "deleted through the LangGraph store"

R = TypeVar("R")
Call = tuple[str, dict[str, Any]]  # a client method's name and its keyword arguments
Plan = Generator[Call, Any, R]


class FilterError(ValueError):
    """A `search` filter the store cannot turn into edge properties."""


def encode(value: Any) -> str:
    """JSON as the store writes it into a property value: one form for one value."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1.0 == 1 in Python: one property for both
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def namespace_properties(namespace: Sequence[str]) -> list[str]:
    whole = f"{NAMESPACE}:{encode(list(namespace))}"
    if len(whole) - len(NAMESPACE) - 1 > MAX_VALUE:
        raise InvalidNamespaceError(
            f"namespace {tuple(namespace)!r} is too long for edgeloom: written as JSON it "
            f"may be at most {MAX_VALUE} characters"
        )
    return [whole, *prefix_match(namespace)]


def prefix_match(prefix: Sequence[str]) -> list[str]:
    """The edge properties every item under `prefix` carries (its segments in place)."""
    return [f"{SEGMENT}{n}:{encode(segment)}" for n, segment in enumerate(prefix)]


def field_properties(value: Mapping[str, Any]) -> list[str]:
    """`lg_v.<field>:<JSON>` for the top-level scalar fields a filter can ask for."""
    found: list[str] = []
    for name, field in value.items():
        if len(found) == MAX_FIELDS:
            break
        if _indexable(name, field):
            found.append(f"{FIELD}{name}:{encode(field)}")
    return found


def _indexable(name: object, field: object) -> bool:
    return (
        isinstance(name, str)
        and bool(name)
        and len(FIELD + name) <= MAX_LABEL
        and name == name.strip()
        and not any(ch in name for ch in ": ")
        and name.isprintable()
        and (field is None or isinstance(field, str | int | float | bool))
        and len(encode(field)) <= MAX_VALUE
    )


def filter_match(filter: Mapping[str, Any] | None) -> list[str]:
    """The edge properties a `search` filter asks for: equality on top-level fields, as a
    value or `{"$eq": value}`; anything else is refused, naming what is allowed."""
    found: list[str] = []
    for name, wanted in (filter or {}).items():
        if isinstance(wanted, Mapping):
            operators = sorted(wanted)
            if operators != ["$eq"]:
                raise FilterError(
                    f"filter on {name!r} uses {operators}: EdgeloomStore filters by equality "
                    'only, a value or {"$eq": value} ($ne, $gt, $gte, $lt, $lte and nested '
                    "fields are not supported)"
                )
            wanted = wanted["$eq"]
        if not _indexable(name, wanted):
            raise FilterError(
                f"filter on {name!r} = {wanted!r} cannot be matched: EdgeloomStore filters "
                "top-level fields of a name without ':' or spaces (at most "
                f"{MAX_LABEL - len(FIELD)} characters) equal to a string, number, boolean or "
                f"null of at most {MAX_VALUE} characters as JSON"
            )
        found.append(f"{FIELD}{name}:{encode(wanted)}")
    return found


def _item(record: Any, namespace: tuple[str, ...] | None = None) -> Item:
    return Item(**_fields(record, namespace))


def _fields(record: Any, namespace: tuple[str, ...] | None) -> dict[str, Any]:
    held = dict(prop.split(":", 1) for prop in record.properties)
    if namespace is None:
        namespace = tuple(json.loads(held[NAMESPACE]))
    return {
        "namespace": namespace,
        "key": json.loads(held[KEY]),
        "value": json.loads(record.content),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def _find(namespace: tuple[str, ...], key: str, lane: str) -> Plan[Any]:
    """The record holding `key` in `namespace`, or None."""
    match = [f"{NAMESPACE}:{encode(list(namespace))}", f"{KEY}:{encode(key)}"]
    page = (yield "gather", {"match": match, "lanes": [lane], "first": 1}).gather
    return page.items[0] if page.items else None


def get_plan(op: GetOp, lane: str) -> Plan[Item | None]:
    record = yield from _find(op.namespace, op.key, lane)
    return None if record is None else _item(record, op.namespace)


def put_plan(op: PutOp, lane: str) -> Plan[None]:
    if op.ttl is not None:
        raise NotImplementedError(
            "EdgeloomStore keeps every item until it is deleted (a retired record stays "
            "readable as it was): put without ttl"
        )
    record = yield from _find(op.namespace, op.key, lane)
    if op.value is None:
        if record is not None:
            yield "retire_record", {"id": record.id, "reason": RETIRED_REASON}
        return None
    content = json.dumps(dict(op.value), ensure_ascii=False)
    fields = field_properties(op.value)
    properties = [ITEM, *namespace_properties(op.namespace), f"{KEY}:{encode(op.key)}", *fields]
    if record is None:
        written = {"content": content, "properties": properties, "lane": lane}
        yield "ingest", {"input": written}
        return None
    # A new version of the same record; `update` replaces the labels it names and keeps
    # the others, so the fields the value no longer has are removed after it.
    yield "update", {"id": record.id, "content": content, "properties": properties}
    kept = {prop.split(":", 1)[0] for prop in fields}
    stale = sorted(
        {
            prop.split(":", 1)[0]
            for prop in record.properties
            if prop.startswith(FIELD) and prop.split(":", 1)[0] not in kept
        }
    )
    if stale:
        yield "remove_properties", {"id": record.id, "labels": stale}
    return None


def search_plan(op: SearchOp, lane: str) -> Plan[list[SearchItem]]:
    match = [ITEM, *prefix_match(op.namespace_prefix), *filter_match(op.filter)]
    wanted = op.offset + op.limit
    hits: list[SearchItem] = []
    after = None
    while len(hits) < wanted:
        first = min(MAX_PAGE, wanted - len(hits))
        if op.query:
            arguments: dict[str, Any] = {"text": op.query, "match": match, "lanes": [lane]}
            page = (yield "search", {**arguments, "first": first, "after": after}).search
            hits += [SearchItem(**_fields(hit.record, None), score=hit.score) for hit in page.items]
        else:
            gathered: dict[str, Any] = {"match": match, "lanes": [lane], "first": first}
            page = (yield "gather", {**gathered, "after": after}).gather
            hits += [SearchItem(**_fields(record, None)) for record in page.items]
        if not page.page_info.has_next_page:
            break
        after = page.page_info.end_cursor
    return hits[op.offset : wanted]


def list_plan(op: ListNamespacesOp, lane: str) -> Plan[list[tuple[str, ...]]]:
    conditions = op.match_conditions or ()
    # The leading segments every prefix condition fixes narrow the values read.
    fixed: list[str] = []
    for condition in conditions:
        if condition.match_type == "prefix":
            for segment in condition.path:
                if segment == "*":
                    break
                fixed.append(segment)
            break
    prefix = encode(fixed)[:-1] if fixed else None
    found: set[tuple[str, ...]] = set()
    after = None
    while True:
        page = (
            yield (
                "values",
                {
                    "label": NAMESPACE,
                    "lane": lane,
                    "prefix": prefix,
                    "first": MAX_PAGE,
                    "after": after,
                },
            )
        ).values
        for value in page.items:
            namespace = tuple(json.loads(value.value))
            if value.member_count > 0 and all(_meets(namespace, c) for c in conditions):
                found.add(namespace if op.max_depth is None else namespace[: op.max_depth])
        if not page.page_info.has_next_page:
            break
        after = page.page_info.end_cursor
    return sorted(found)[op.offset : op.offset + op.limit]


def _meets(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want in ("*", have) for want, have in zip(path, part, strict=True))


def plan_of(op: Op, lane: str) -> Plan[Result]:
    if isinstance(op, GetOp):
        return get_plan(op, lane)
    if isinstance(op, PutOp):
        return put_plan(op, lane)
    if isinstance(op, SearchOp):
        return search_plan(op, lane)
    if isinstance(op, ListNamespacesOp):
        return list_plan(op, lane)
    raise TypeError(f"EdgeloomStore runs GetOp, PutOp, SearchOp and ListNamespacesOp, not {op!r}")


def _checked(ops: Iterable[Op]) -> list[Op]:
    listed = list(ops)
    for op in listed:
        namespace = (
            op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())
        )
        for segment in namespace:
            if not isinstance(segment, str) or "." in segment or not segment:
                raise InvalidNamespaceError(
                    f"namespace label {segment!r} in {namespace!r}: labels are non-empty "
                    "strings without '.'"
                )
    return listed


class EdgeloomStore(BaseStore):
    """LangGraph's `BaseStore` on an edgeloom gateway: `EdgeloomStore(url, token=...,
    lane="default")`; sync and async. Every write is a ledgered version under the token's
    agent and policy."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        lane: str = "default",
        *,
        client: Edgeloom | None = None,
        aclient: AsyncEdgeloom | None = None,
    ) -> None:
        self.lane = lane
        self._url, self._token = url, token
        self._client = client
        self._aclient = aclient

    @property
    def client(self) -> Edgeloom:
        """The sync client `batch` runs on."""
        if self._client is None:
            self._client = Edgeloom(self._url, self._token)
        return self._client

    @property
    def aclient(self) -> AsyncEdgeloom:
        """The async client `abatch` runs on."""
        if self._aclient is None:
            self._aclient = AsyncEdgeloom(self._url, self._token)
        return self._aclient

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(plan_of(op, self.lane)) for op in _checked(ops)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._arun(plan_of(op, self.lane)) for op in _checked(ops)]

    def _run(self, plan: Plan[R]) -> R:
        try:
            name, arguments = next(plan)
            while True:
                name, arguments = plan.send(getattr(self.client, name)(**_typed(arguments)))
        except StopIteration as done:
            result: R = done.value
            return result

    async def _arun(self, plan: Plan[R]) -> R:
        try:
            name, arguments = next(plan)
            while True:
                answer = await getattr(self.aclient, name)(**_typed(arguments))
                name, arguments = plan.send(answer)
        except StopIteration as done:
            result: R = done.value
            return result

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._aclient.aclose()


def _typed(arguments: dict[str, Any]) -> dict[str, Any]:
    # The generated clients send a plain dict as it is: an input's names as in the schema.
    return {name: value for name, value in arguments.items() if value is not None}


__all__ = ["EdgeloomStore", "FilterError"]
