"""GraphQL over HTTP as the spec has it: media types, request-error status, GET caching.

- `application/graphql-response+json` is answered when the client accepts it; a
  request error (the document does not parse or validate, variables do not coerce)
  is then status 400 with no `data` entry. `application/json` stays as it was:
  status 200, `data: null`.
- Every answer varies with the token and the media type asked for and is the
  caller's alone: `Cache-Control: no-store`, `Vary: Authorization, Accept`.
- A mutation over GET is refused with 405 and `Allow: POST`; other methods with 405
  and `Allow: GET, POST`, as JSON like every refusal.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response
from strawberry.types import ExecutionResult

from gql.server.headers import API_HEADER_LINES, SecuredHeaders

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
HEADERS = {"cache-control": "no-store", "vary": "Authorization, Accept"}


def media_type(request: Request) -> str:
    """The response media type the client asked for (the GraphQL one when it lists it)."""
    return accepted(request.headers.get("accept", ""))


def accepted(accept: str) -> str:
    """The response media type for this Accept value (see `media_type`)."""
    return GRAPHQL_RESPONSE if GRAPHQL_RESPONSE in accept else JSON


class Answer(Response):
    """A body the compiled path made, with the headers and media type every answer carries
    (`finish` leaves it as it is) and the security headers. Its header lines are encoded
    once per media type."""

    def __init__(self, body: bytes, media: str) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = answer_headers(body, media)


def answer_headers(body: bytes, media: str) -> SecuredHeaders:
    """The header lines of the compiled path's answer `body` in `media`."""
    return SecuredHeaders([*_ANSWER_HEADERS[media], (b"content-length", b"%d" % len(body))])


_ANSWER_HEADERS = {
    media: [
        *((name.encode(), value.encode()) for name, value in HEADERS.items()),
        (b"content-type", media.encode()),
        *API_HEADER_LINES,
    ]
    for media in (GRAPHQL_RESPONSE, JSON)
}


def answer(request: Request, body: bytes | str) -> Response:
    """The compiled path's answer to `request` (see `Answer`)."""
    return Answer(body.encode() if isinstance(body, str) else body, media_type(request))


def is_request_error(result: ExecutionResult) -> bool:
    """No execution started: parsing, validation or variable coercion failed.

    Errors raised while executing always carry the path of their field; the ones
    before execution never do.
    """
    errors = result.errors or []
    return result.data is None and bool(errors) and all(e.path is None for e in errors)


def note_result(request: Request, result: ExecutionResult) -> None:
    """Remember a request error for `finish`, which shapes the response by media type."""
    if is_request_error(result):
        request.state.request_error = True


def finish(request: Request, response: Response) -> Response:
    """The headers every GraphQL answer carries; the status and body the media type calls for."""
    if isinstance(response, Answer):
        return response
    response.headers.update(HEADERS)
    if response.headers.get("content-type", "").startswith(JSON) and media_type(request) == (
        GRAPHQL_RESPONSE
    ):
        if getattr(request.state, "request_error", False):
            body = json.loads(bytes(response.body))
            body.pop("data", None)
            response = Response(json.dumps(body), status_code=400, headers=HEADERS)
        response.headers["content-type"] = f"{GRAPHQL_RESPONSE}; charset=utf-8"
    return response
