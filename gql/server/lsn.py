"""Read-your-writes over HTTP with read replicas: the LSN a request wrote at, and the one
a client sends back.

A request that wrote answers with the WAL position its writes committed at or before:
`extensions.lsn` in the body, the `Edgeloom-Lsn` response header and the cookie
`edgeloom_lsn`. A request that sends it back (the header, else the cookie) has its reads
served by a standby only once that standby has replayed it (store.reads.replicas), so
it sees what it wrote. Without read replicas no LSN is reported and none is needed.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gql.api.session import Caller, Services, Session
from store.reads.replicas import Freshness, format_lsn, parse_lsn

HEADER = "edgeloom-lsn"
COOKIE = "edgeloom_lsn"
# A position is kept for a day: a client that comes back later needs nothing past it.
COOKIE_SECONDS = 86_400


def http_session(services: Services, caller: Caller, request: Request) -> Session:
    """The session of an HTTP request, whose reads see the LSN the client sent back."""
    if services.replicas is None or not services.replicas.enabled:
        # Every read is on the primary: what the client sent back is not needed.
        return Session(services, caller, freshness=Freshness())
    sent = request.headers.get(HEADER) or request.cookies.get(COOKIE)
    return Session(services, caller, freshness=Freshness(after=parse_lsn(sent)))


def written(request: Request) -> str | None:
    """The LSN the request's writes committed at or before, as PostgreSQL writes it."""
    session: Session | None = getattr(request.state, "session", None)
    if session is None or session.freshness.written is None:
        return None
    return format_lsn(session.freshness.written)


def with_extension(result: dict[str, Any], lsn: str | None) -> dict[str, Any]:
    """The response `result` with `extensions.lsn` when the request wrote."""
    if lsn is not None:
        extensions = result.get("extensions")
        result["extensions"] = {**(extensions if isinstance(extensions, dict) else {}), "lsn": lsn}
    return result


def in_body(body: bytes, lsn: str | None) -> bytes:
    """A JSON response body with `extensions.lsn` when the request wrote."""
    if lsn is None:
        return body
    return orjson.dumps(with_extension(orjson.loads(body), lsn))


def mark(request: Request, response: Response) -> Response:
    """The header and the cookie, when the request wrote."""
    lsn = written(request)
    if lsn is not None:
        response.headers[HEADER] = lsn
        response.set_cookie(
            COOKIE, lsn, max_age=COOKIE_SECONDS, httponly=True, samesite="lax", path="/"
        )
    return response
