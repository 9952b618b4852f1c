"""What the isolation walks share: the worlds written by one script, the walk of every
query field generated from the schema, and the naming of made values that compares answers."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from graphql import (
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLType,
    get_named_type,
    is_leaf_type,
)

from gql.api.schema import schema
from tests.conftest import GatewayFactory
from tests.gql._asserted import CONNECT, CORRECT, DISCONNECT, GROUP, UNGROUP
from tests.gql._edges import RESOLVE, RETIRE, UPSERT
from tests.gql._policy_support import ADD, INGEST, REMOVE, UPDATE, mint
from tests.support import Gateway

POLICY = """
lanes:
  open: { embedding: { dimensions: 3, model: m3 } }
  hidden: { embedding: { dimensions: 3, model: m3 } }
agents:
  reader: { read: [open], write: [open] }
  curator: { read: ["*"], write: ["*"] }
"""

# Fields the walk does not visit, each with why. Everything else reachable is walked.
UNWALKED: dict[tuple[str, str], str] = {}

INTAKE = """mutation($lane: String!, $files: [FileInput!]!) {
  intakeFolder(lane: $lane, files: $files, folder: "notes") { created }
}"""
FIND = "query($match: [String!]!) { gather(match: $match) { items { id } } }"

# Values for arguments, by argument name; `None` stands for the argument left out.
PROPERTIES = ["org:Acme", "topic:x", "secret:s", "person:Sam"]
PAGE = 3
# Each record's vector: the hidden ones nearest the vectors searched for.
VECTORS = {
    "v1": [1, 0, 0],
    "v2": [0, 1, 0],
    "v3": [0, 0, 1],
    "h1": [1, 0.1, 0],
    "h2": [0.1, 1, 0.2],
    "h3": [0, 0.1, 1],
}


@dataclass
class World:
    gateway: Gateway
    tokens: dict[str, str]
    ids: dict[str, str] = field(default_factory=dict)
    edges: dict[str, str] = field(default_factory=dict)
    marks: list[str] = field(default_factory=list)
    # Event ids by position: the reader's own, then those only the curator may read.
    events: list[str] = field(default_factory=list)
    # The same database without the compiled path (the retired walk asks both).
    plain: Gateway | None = None

    async def as_agent(self, agent: str, query: str, variables: dict[str, Any]) -> Any:
        return await self.gateway.data(query, variables, self.tokens[agent])


async def write(world: World, hidden: bool, lane: str = "hidden") -> None:
    """The script both worlds are written by; `hidden` adds the hidden part, written by the
    curator in `lane` (the lane the reader cannot read, or for the retired world its own)."""

    async def ingest(name: str, into: str, props: list[str], adjusts: list[str] = ()) -> None:
        agent = "reader" if name.startswith("v") else "curator"
        into = lane if into == "hidden" else into
        # Tags shared by both parts, and one only the hidden part holds.
        tagged = "#common #" + ("plain" if name.startswith("v") else "secret")
        content = f"{name} content {tagged}"
        fields: dict[str, Any] = {"content": content, "lane": into, "properties": props}
        fields["embedding"] = VECTORS[name]
        if adjusts:
            fields["adjusts"] = [world.ids[a] for a in adjusts]
        world.ids[name] = (await world.as_agent(agent, INGEST, {"input": fields}))["ingest"]["id"]

    async def curator(query: str, **variables: Any) -> Any:
        return await world.as_agent("curator", query, variables)

    async def reader(query: str, **variables: Any) -> Any:
        return await world.as_agent("reader", query, variables)

    ids = world.ids
    await ingest("v1", "open", ["org:Acme", "topic:x", "person:Sam"])
    if hidden:
        await ingest("h1", "hidden", ["org:Acme", "topic:x", "secret:s"])
    await ingest("v2", "open", ["org:Acme", "person:Kim"])
    if hidden:
        await ingest("h2", "hidden", ["org:Acme", "secret:s", "person:Sam"])
        await ingest("h3", "hidden", ["topic:x"], adjusts=["h1"])
    await ingest("v3", "open", ["topic:x"], adjusts=["v1"])
    world.marks.append(datetime.now(UTC).isoformat())
    await reader(CONNECT, a=ids["v1"], b=ids["v2"], hint="pair")
    if hidden:
        done = await curator(CONNECT, a=ids["h1"], b=ids["h2"], hint="secretpair")
        world.edges["secretpair"] = done["connect"]["id"]
        done = await curator(GROUP, ids=[ids["h1"], ids["h2"], ids["h3"]], hint="cabal")
        world.edges["cabal"] = done["group"]["id"]
    await reader(GROUP, ids=[ids["v1"], ids["v2"], ids["v3"]], hint="team")
    # Across lanes: a group joining a record the reader cannot read shows the reader only
    # its own records, and its events count only those; the bare world's group has just them.
    mixed = [ids["v1"], ids["v2"], *([ids["h1"]] if hidden else [])]
    await curator(GROUP, ids=mixed, hint="mixed")
    await reader(CORRECT, id=ids["v2"], content="v2 fixed", reason="typo")
    if hidden:
        await curator(CORRECT, id=ids["h2"], content="h2 fixed", reason="typo")
        await curator(UPDATE, id=ids["h1"], content="h1 changed", properties=["topic:y"])
        await curator(ADD, id=ids["h3"], properties=["org:Acme", "person:Kim"])
        await curator(REMOVE, id=ids["h2"], labels=["secret"])
        await curator(UNGROUP, id=world.edges["cabal"], ids=[ids["h3"]])
        await curator(DISCONNECT, id=world.edges["secretpair"])
    await reader(UPDATE, id=ids["v1"], content="v1 changed", properties=["topic:y"])

    # Typed edges: the reader's own, and the curator's in and into the hidden lane (from a
    # readable record to a hidden one, and back), resolved and retired as well.
    async def edge(agent: str, start: str, end: str, kind: str, **fields: Any) -> str:
        made = await world.as_agent(
            agent,
            UPSERT,
            {"input": {"fromId": ids[start], "toId": ids[end], "type": kind, **fields}},
        )
        return str(made["upsertEdge"]["id"])

    quote = {"quote": "v1 content", "source": "notes.md", "offset": 0}
    await edge("reader", "v1", "v2", "supports", weight=0.8, evidence=quote)
    conflict = await edge("reader", "v2", "v3", "contradicts", confidence=0.5)
    gone = await edge("reader", "v3", "v1", "derived_from")
    await reader(RETIRE, id=gone)
    if hidden:
        await edge("curator", "h1", "h2", "supports", evidence=quote)
        into = await edge("curator", "v1", "h1", "contradicts", weight=0.9)
        await edge("curator", "h2", "v2", "supports")
        await edge("curator", "v3", "h3", "contradicts")
        await curator(
            RESOLVE, edgeId=into, resolution="SUPERSEDED", resolver="c", winnerId=ids["h1"]
        )
        await curator(RETIRE, id=await edge("curator", "v2", "h2", "derived_from"))
    await curator(RESOLVE, edgeId=conflict, resolution="ACCEPTED_DUAL", resolver="c")

    # A note taken in by intake: its records hold metadata (a file's size and hash, a
    # section's offset) and it has names (title, alias). One note, whose two sections make
    # one edge: edges written in one transaction share their time, and a page of them
    # would be ordered by their ids, made afresh in each world.
    async def note(agent: str, into: str, name: str) -> None:
        text = f"---\naliases: [{name} alias]\n---\n# {name}\nText #common\n"
        files = [{"path": f"{name}.md", "content": text}]
        await world.as_agent(agent, INTAKE, {"lane": into, "files": files})
        found = await world.as_agent(agent, FIND, {"match": [f"path:{name}.md"]})
        [ids[f"{'v' if agent == 'reader' else 'h'}_{name}"]] = [
            r["id"] for r in found["gather"]["items"]
        ]

    await note("reader", "open", "Home")
    if hidden:
        # Always in the hidden lane: the retired mode retires the h records only, and this
        # note stays out of the reader's sight in every world.
        await note("curator", "hidden", "Secret")
    world.marks.append(datetime.now(UTC).isoformat())


async def make_worlds(start_gateway: GatewayFactory) -> tuple[World, World]:
    """The full world (with the hidden part) and the bare one (without), written alike."""
    made = []
    for hidden in (True, False):
        gateway = await start_gateway(policy_yaml=POLICY)
        world = World(gateway, await mint(gateway, "reader", "curator"))
        await write(world, hidden)
        made.append(world)
    for world in made:
        for agent in ("reader", "curator"):
            page = await world.as_agent(agent, "{ audit(first: 500) { items { id } } }", {})
            world.events += [e["id"] for e in page["audit"]["items"] if e["id"] not in world.events]
    full, bare = made
    # The hidden records' and events' ids mean nothing in the bare world: asked there, they
    # must be answered as in the full one, as ids of nothing.
    bare.ids |= {k: v for k, v in full.ids.items() if k not in bare.ids}
    bare.events += full.events[len(bare.events) :]
    return full, bare


def unwrap(gtype: GraphQLType) -> tuple[GraphQLNamedType, bool]:
    """The named type under non-null and list wrappers, and whether a list was among them."""
    listed = False
    while isinstance(gtype, GraphQLNonNull | GraphQLList):
        listed = listed or isinstance(gtype, GraphQLList)
        gtype = gtype.of_type
    return get_named_type(gtype), listed


def arguments(world: World, name: str, gfield: GraphQLField, nested: bool) -> Iterator[str]:
    """Argument lists to send with a field: every required one filled, and each optional
    one set in turn (nested fields take only their page size)."""
    # By name, so both worlds send their documents in the same order.
    ids = [world.ids[name] for name in sorted(world.ids)]
    pools: dict[str, list[Any]] = {
        "id": ids,
        "recordId": ids,
        "from": ids,
        "property": PROPERTIES,
        "match": [[p] for p in PROPERTIES] + [["org:Acme", "topic:x"]],
        "lane": ["open", "hidden"],
        "lanes": [["open"], ["hidden"], ["open", "hidden"]],
        "asOf": world.marks[:2],
        "mode": ["UNION", "TIMELINE"],
        "depth": [2],
        "labels": [["org", "topic"]],
        "kinds": [["sr_ingested", "connected"], ["edge_upserted", "conflict_resolved"]],
        "nodes": [[i] for i in ids] + [ids],
        "fromId": ids,
        "toId": ids,
        "type": ["contradicts"],
        "types": [["supports", "contradicts"]],
        "edgeTypes": [["supports", "contradicts"], []],
        "hops": [2],
        "direction": ["IN"],
        "status": ["ALL", "RESOLVED"],
        "includeExpired": [True],
        "namespace": ["default"],
        "tag": ["common", "secret"],
        "named": ["home", "HOME alias", "secret", "secret alias"],
        "text": ["content", "changed or secret", "h1 conte", '"v1 content" -fixed'],
        "vector": [[1, 0, 0], [0.1, 1, 0.2]],
        "sourceTypes": [["conversational"]],
        "label": ["org", "person", "secret"],
        "prefix": ["A", "S"],
        "similarTo": ["acme", "ACME!", "Sal", "kim"],
    }
    if name == "auditEvent":
        pools["id"] = world.events
    required = {n: a for n, a in gfield.args.items() if isinstance(a.type, GraphQLNonNull)}
    optional = [n for n in gfield.args if n not in required]
    base: dict[str, Any] = {}
    if "first" in gfield.args:
        base["first"] = PAGE
    choices = [[(n, v) for v in pools[n]] for n in required]
    for chosen in itertools.product(*choices):
        args = base | dict(chosen)
        yield render(args, gfield)
        if nested:
            continue
        for name in optional:
            for value in pools.get(name, []):
                yield render(args | {name: value}, gfield)


def render(args: dict[str, Any], gfield: GraphQLField) -> str:
    if not args:
        return ""
    parts = []
    for name, value in args.items():
        named, _ = unwrap(gfield.args[name].type)
        if named.name in ("GatherMode", "Direction", "ConflictStatus"):
            parts.append(f"{name}: {value}")
        else:
            parts.append(f"{name}: {json.dumps(value)}")
    return "(" + ", ".join(parts) + ")"


def selection(world: World, gtype: GraphQLNamedType, depth: int) -> str:
    """Every field of `gtype`, objects expanded to `depth` levels."""
    assert isinstance(gtype, GraphQLObjectType | GraphQLInterfaceType), gtype
    parts = ["__typename"]
    for name, gfield in gtype.fields.items():
        if (gtype.name, name) in UNWALKED:
            continue
        named, _ = unwrap(gfield.type)
        args = next(arguments(world, name, gfield, nested=True), "")
        if is_leaf_type(named):
            parts.append(f"{name}{args}")
        elif depth > 0:
            parts.append(f"{name}{args} {{ {selection(world, named, depth - 1)} }}")
    return " ".join(parts)


def queries(world: World, depth: int) -> Iterator[tuple[str, str]]:
    """(root field, document) for every Query field and its argument lists, selecting
    objects to `depth` levels."""
    query_type = schema._schema.query_type
    assert query_type is not None
    for name, gfield in query_type.fields.items():
        if ("Query", name) in UNWALKED:
            continue
        named, _ = unwrap(gfield.type)
        for args in arguments(world, name, gfield, nested=False):
            if is_leaf_type(named):
                yield name, f"{{ {name}{args} }}"
            else:
                yield name, f"{{ {name}{args} {{ {selection(world, named, depth)} }} }}"


MADE = re.compile(
    r"\b(?:sr|ae|co|ep)_[0-9a-f]{6,32}\b|\b(?:[A-Za-z0-9-]+_)?[0-9a-f]{32}\b|\b[0-9a-f]{64}\b"
)
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def blank_times(text: str) -> str:
    text = TIME.sub("<time>", text)
    return re.sub(r'"(cursor|endCursor)": "[^"]*"', r'"\1": "<cursor>"', text)


def in_order(answer: Any) -> Any:
    """Lists of objects sorted by what they hold but made values: some lists (a gather's
    page) are ordered by record id, and ids are made afresh in each world."""
    if isinstance(answer, dict):
        return {k: in_order(v) for k, v in answer.items()}
    if isinstance(answer, list):
        items = [in_order(v) for v in answer]
        if all(isinstance(v, dict) for v in items):
            items.sort(key=lambda v: MADE.sub("<made>", blank_times(json.dumps(v, sort_keys=True))))
        return items
    return answer


class Namer:
    """Names made values by order of first appearance, so two worlds' answers compare
    equal exactly when they have the same shape and the same facts."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, answer: Any) -> str:
        return MADE.sub(self.name, blank_times(json.dumps(in_order(answer), sort_keys=True)))

    def name(self, match: re.Match[str]) -> str:
        return self.names.setdefault(match.group(0), f"<made {len(self.names)}>")


def first_difference(a: str, b: str) -> str:
    pairs = enumerate(zip(a, b, strict=False))
    at = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    start = max(0, at - 150)
    return f"with the hidden lane: ...{a[start : at + 150]}\nwithout: ...{b[start : at + 150]}"


def over_cost(body: dict[str, Any]) -> bool:
    return any("cost" in e.get("extensions", {}) for e in body.get("errors", []))
