"""Answering a request over HTTP on the compiled path, or declining so strawberry answers it.

Runs in the GraphQL view before strawberry: the caller is authorised first, the same
way (`authorize`; its `Session` is kept on the request so the ordinary path does not
repeat it), the document is parsed and validated once with the schema's own rules. A query
is answered by one statement whose JSON text is the response body as PostgreSQL
wrote it (`plan`); an `ingest` or `ingestMany` runs its command and answers its
record fields directly (`writes`). Anything not covered (other mutations,
subscriptions, introspection, directives, batches, fields not compiled) or refused
before it runs (bad arguments, ambiguous ids, no policy, a mutation over GET) is
declined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import asyncpg
import orjson
from graphql import (
    DocumentNode,
    GraphQLSchema,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    OperationDefinitionNode,
    OperationType,
    TypeNode,
    specified_rules,
    validate,
)
from graphql.utilities import get_operation_ast
from starlette.requests import Request
from starlette.responses import Response
from strawberry.schema.name_converter import NameConverter

from gql.api.auth import authorize
from gql.api.compiled.plan import Bound, Declined, Operation, compile_operation
from gql.api.compiled_writes import Write, compile_write
from gql.api.errors import error_extensions, parse_cached
from gql.api.limits import check_variables, too_many_fields
from gql.api.observe import note_operation
from gql.api.operation_label import operation_label
from gql.api.session import Services, Session, vector_scope
from gql.server import lsn, over_http
from policies.errors import UnknownAgentError
from store.errors import (
    NoPolicyError,
    ResponseTooLargeError,
    StoreError,
    TimedOutError,
    refusal_for,
)
from store.reads.compiled_sql import NotCompilable
from store.reads.lane_floor import gated, joined
from store.reads.replicas import fetchrow_once

log = logging.getLogger("edgeloom.compiled")

# A check the ordinary path makes per request beyond validation (a cost limit that
# reads variables, say): true lets the compiled path answer. Its answer may depend on
# the variables only through Int ones (sizes such as `first:`), so it is made once per
# operation and values of those.
RequestCheck = Callable[[GraphQLSchema, DocumentNode, str | None, Mapping[str, Any]], bool]

# Set on a request's state by the lean path (gql.server.lean) when it ran the compiled
# path and declined: the view's compiled path does not run it again.
DECLINED = "compiled_declined"

# Verdicts of the checks kept per operation: a client sending ever new sizes costs a
# check each, never unbounded memory.
MAX_VERDICTS = 256


Compiled = Operation | Write


class _Cached:
    """A compiled operation with the verdicts of the request checks, by its Int variables."""

    def __init__(self, compiled: Compiled, label: str) -> None:
        self.compiled = compiled
        self.label = label  # the operation, as the request log and the metrics name it
        self.ints = _int_variables(compiled.operation)
        self.verdicts: dict[tuple[Any, ...], bool] = {}


class CompiledPath:
    """The compiled path of one GraphQL view: a cache of operations and the answer."""

    def __init__(
        self,
        schema: GraphQLSchema,
        names: NameConverter,
        validation_rules: Sequence[Any],
        max_tokens: int,
        max_fields: int,
        anonymous_agent: str | None,
        checks: Sequence[RequestCheck] = (),
        max_documents: int = 1024,
    ) -> None:
        self.schema = schema
        self.names = names
        self.rules = [*specified_rules, *validation_rules]
        self.max_tokens = max_tokens
        self.max_fields = max_fields
        self.anonymous_agent = anonymous_agent
        self.checks = list(checks)
        self.max_documents = max_documents
        self.operations: dict[tuple[str, str | None], _Cached | None] = {}
        # Counts answers by path, for tests and the bench.
        self.answered = 0
        self.declined = 0

    def operation(self, query: str, name: str | None) -> _Cached | None:
        """The compiled operation for a document, made once; None when not covered."""
        key = (query, name)
        try:
            return self.operations[key]
        except KeyError:
            pass
        compiled = self._compile(query, name)
        found = (
            None
            if compiled is None
            else _Cached(compiled, operation_label(self.schema, compiled.document, name))
        )
        if len(self.operations) >= self.max_documents:
            # Forget the oldest document: a client sending ever new documents costs
            # one compilation each, never unbounded memory.
            del self.operations[next(iter(self.operations))]
        self.operations[key] = found
        return found

    def _compile(self, query: str, name: str | None) -> Compiled | None:
        try:
            # With the options strawberry parses with, so that it finds this one cached.
            document = parse_cached(query, max_tokens=self.max_tokens)
            # Over the field limit it is not validated: the ordinary path refuses it.
            if too_many_fields(document, self.max_fields) is not None:
                return None
            # A rule that fails on an odd document fails the ordinary path the same way.
            if validate(self.schema, document, self.rules):
                return None
        except Exception:
            return None
        operation = get_operation_ast(document, name)
        if operation is None:
            return None
        try:
            if operation.operation is OperationType.MUTATION:
                return compile_write(self.schema, document, operation, self.names)
            return compile_operation(self.schema, document, operation)
        except NotCompilable as exc:
            log.debug("not compiled (%s)", exc)
            return None

    def _passes(self, cached: _Cached, name: str | None, variables: dict[str, Any] | None) -> bool:
        values = variables or {}
        key = tuple(values.get(n) for n in cached.ints)
        try:
            return cached.verdicts[key]
        except KeyError:
            pass
        except TypeError:  # a list or object where an Int belongs: coercion refuses it
            return self._check(cached, name, values)
        verdict = self._check(cached, name, values)
        if len(cached.verdicts) < MAX_VERDICTS:
            cached.verdicts[key] = verdict
        return verdict

    def _check(self, cached: _Cached, name: str | None, values: dict[str, Any]) -> bool:
        document = cached.compiled.document
        return all(check(self.schema, document, name, values) for check in self.checks)

    async def answer(self, request: Request) -> Response | None:
        """The response to a request the compiled path covers, else None (strawberry answers)."""
        response = await self._answer(request)
        if response is None:
            self.declined += 1
        else:
            self.answered += 1
        return response

    async def _answer(self, request: Request) -> Response | None:
        # A request the lean path ran here and declined goes on to strawberry at once.
        if getattr(request.state, DECLINED, False):
            return None
        # Who is calling comes first: an unauthorised request is not parsed here, and
        # the ordinary path, which refuses it, does not authorise it again.
        session: Session | None = getattr(request.state, "session", None)
        if session is None:
            services: Services = request.state.services
            caller = await authorize(
                request.headers.get("authorization"), services, self.anonymous_agent
            )
            session = request.state.session = lsn.http_session(services, caller, request)
        if session.caller.agent is None:
            return None
        payload = await _payload(request)
        if payload is None:
            return None
        query, variables, name = payload
        cached = self.lookup(query, variables, name)
        if cached is None:
            return None
        if isinstance(cached.compiled, Write):
            response = await self._write(request, cached.compiled, session, variables)
            if response is not None:
                note_operation(cached.label, name, "compiled")
            return response
        body = await self.read(session, cached, name, variables)
        return None if body is None else over_http.answer(request, body)

    def lookup(
        self, query: str, variables: dict[str, Any] | None, name: str | None
    ) -> _Cached | None:
        """The compiled operation that answers this request, or None (not covered, or
        over a limit the ordinary path checks)."""
        cached = self.operation(query, name)
        if cached is None or not self._passes(cached, name, variables):
            return None
        return cached

    async def read(
        self,
        session: Session,
        cached: _Cached,
        name: str | None,
        variables: dict[str, Any] | None,
    ) -> bytes | str | None:
        """The response body of a compiled read (`cached.compiled` is an `Operation`),
        or None: declined, the ordinary path answers."""
        operation = cached.compiled
        assert isinstance(operation, Operation)
        try:
            policy, profile = await session.agent()
        except (NoPolicyError, UnknownAgentError):
            return None
        services = session.services
        limit = services.max_response_bytes
        try:
            scope = vector_scope(services, policy)
            bound = operation.bind(variables, profile.readable_lanes(policy), limit, scope)
        except Declined:
            return None
        try:
            if bound.reads:
                row = await _read_first(session, bound)
            else:
                # On a standby when one may serve it, else (or when it fails) the
                # primary; a connection whose statement failed half-way is not reused.
                # The statement sets the lanes PostgreSQL lets it read itself, in its
                # own implicit transaction (store.reads.lane_floor.gated).
                args = bound.args()
                text = gated(bound.statement.text, len(args))
                args.append(joined(profile.readable_lanes(policy)))
                replicas = services.replicas
                if replicas is not None:
                    row = await replicas.fetchrow(session.freshness, text, *args)
                else:
                    row = await fetchrow_once(services.pool, text, args)
        except Declined:
            return None
        except (asyncpg.PostgresError, OSError, asyncpg.InterfaceError) as exc:
            stopped = refusal_for(exc)
            if isinstance(stopped, TimedOutError):
                return _refusal(stopped)  # the same reads would run as long again
            # The ordinary path runs the same reads and reports the failure its way.
            log.warning("compiled read failed; answered the ordinary way", exc_info=True)
            return None
        if row is None or not row["ok"]:
            return None
        note_operation(cached.label, name, "compiled")
        body: str | None = row["body"]
        if body is None:  # built only as far as the limit, and not sent
            return _refusal(ResponseTooLargeError(limit))
        return body

    async def _write(
        self,
        request: Request,
        write: Write,
        session: Session,
        variables: dict[str, Any] | None,
    ) -> Response | None:
        if request.method != "POST":
            return None  # the ordinary path refuses a mutation over GET
        try:
            inputs = write.inputs(variables)
        except Declined:
            return None
        try:
            written = await session.execute(write.command(inputs))
        except Exception as exc:
            # The command ran (and was refused or failed): answered here, never run twice.
            body = write.failure(exc)
        else:
            body = lsn.in_body(write.answer(written), lsn.written(request))
        return over_http.answer(request, body)


async def _read_first(session: Session, bound: Bound) -> Any:
    """The statement's row after the reads it needs first (a walk), all in the session's
    one snapshot, which ends here (a declined request's ordinary path opens its own)."""
    try:
        async with session.read() as (db, _):
            await bound.read(db)
            return await db.fetchrow(bound.statement.text, *bound.args())
    finally:
        await session.end_reads()


def _refusal(error: StoreError) -> bytes:
    """The body the ordinary path answers a refused operation with."""
    extensions = error_extensions(error.code, error.extensions())
    return orjson.dumps(
        {"data": None, "errors": [{"message": error.message, "extensions": extensions}]}
    )


def _int_variables(operation: OperationDefinitionNode) -> tuple[str, ...]:
    """The names of the operation's variables of type Int (or lists of Int)."""
    names = []
    for definition in operation.variable_definitions or ():
        named: TypeNode = definition.type
        while isinstance(named, ListTypeNode | NonNullTypeNode):
            named = named.type
        if isinstance(named, NamedTypeNode) and named.name.value == "Int":
            names.append(definition.variable.name.value)
    return tuple(names)


Payload = tuple[str, dict[str, Any] | None, str | None]


async def _payload(request: Request) -> Payload | None:
    """query, variables and operationName of a single GraphQL request, or None."""
    if request.method == "POST":
        return post_payload(request.headers.get("content-type", ""), await request.body())
    if request.method == "GET":
        return get_payload(request.query_params)
    return None


def post_payload(content_type: str, body: bytes) -> Payload | None:
    """The payload of a POST with this Content-Type and body, or None."""
    if "application/json" not in content_type:
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return _fields(data)


def get_payload(params: Mapping[str, str]) -> Payload | None:
    """The payload of a GET with these query parameters, or None."""
    raw = params.get("variables")
    try:
        variables = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None
    return _fields(
        {
            "query": params.get("query"),
            "variables": variables,
            "operationName": params.get("operationName"),
            "extensions": params.get("extensions"),
        }
    )


def _fields(data: object) -> Payload | None:
    # Extensions (even malformed ones, which strawberry refuses) go the ordinary way.
    if not isinstance(data, dict) or data.get("extensions") not in (None, {}):
        return None
    query, variables, name = data.get("query"), data.get("variables"), data.get("operationName")
    if not isinstance(query, str) or not isinstance(name, str | None):
        return None
    if not isinstance(variables, dict | None):
        return None
    # The limits the ordinary path checks on decoded variables (RequestLimitError).
    check_variables(variables)
    return query, variables, name
