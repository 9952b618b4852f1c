"""The gateway's refusals as exceptions: the code and message it answered, kept as sent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# graphql-transport-ws close codes the gateway uses, with the code a GraphQL error of the
# same refusal carries.
CLOSE_CODES = {4400: "BAD_USER_INPUT", 4401: "UNAUTHENTICATED", 4403: "FORBIDDEN"}


class EdgeloomError(Exception):
    """A call the gateway refused or failed: `code` is the error's `extensions.code`
    (`BAD_USER_INPUT`, `UNAUTHENTICATED`, `FORBIDDEN`, `NOT_FOUND`, `CONFLICT`,
    `AMBIGUOUS_ID`, ...), `message` the sentence naming what is allowed, `extensions` the
    rest of what it sent (`allowed`, `requestId`, ...); `errors` holds every error of a
    response that had several, `status` the HTTP status when the call got no GraphQL
    answer."""

    def __init__(
        self,
        message: str,
        code: str | None = None,
        extensions: Mapping[str, Any] | None = None,
        errors: Iterable[Mapping[str, Any]] = (),
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.extensions: dict[str, Any] = dict(extensions or {})
        self.errors: list[dict[str, Any]] = [dict(error) for error in errors]
        self.status = status

    @classmethod
    def from_errors(
        cls, errors: Iterable[Mapping[str, Any]], status: int | None = None
    ) -> EdgeloomError:
        """The first error of a GraphQL response's `errors`, with all of them kept."""
        listed = [dict(error) for error in errors]
        first = listed[0] if listed else {"message": "the gateway answered an error"}
        extensions = first.get("extensions") or {}
        code = extensions.get("code") if isinstance(extensions, dict) else None
        return cls(str(first.get("message")), code, extensions, listed, status)

    def __str__(self) -> str:
        return self.message if self.code is None else f"{self.code}: {self.message}"
