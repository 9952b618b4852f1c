"""The clients: the generated ones (`async_client`, `sync_client`, from `schema.graphql` and
`operations/`) with the gateway's address, its token, and its refusals as `EdgeloomError`."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosedError

from edgeloom_client.async_client import GeneratedAsyncClient
from edgeloom_client.async_client.exceptions import (
    GraphQLClientGraphQLMultiError as AsyncMultiError,
)
from edgeloom_client.errors import CLOSE_CODES, EdgeloomError
from edgeloom_client.sync_client import GeneratedSyncClient

DEFAULT_URL = "http://127.0.0.1:4000"


def graphql_url(url: str) -> str:
    """The GraphQL endpoint of a gateway given by its base address or the endpoint."""
    url = url.rstrip("/")
    return url if url.endswith("/graphql") else url + "/graphql"


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _data(response: httpx.Response) -> dict[str, Any]:
    """The `data` of a GraphQL answer, or its refusal raised as `EdgeloomError` (a 401
    or 403 answered before execution carries the same JSON `errors`)."""
    try:
        body = response.json()
    except ValueError:
        raise EdgeloomError(
            f"the gateway answered HTTP {response.status_code} without a GraphQL body",
            status=response.status_code,
        ) from None
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        raise EdgeloomError.from_errors(errors, response.status_code)
    if not response.is_success or not isinstance(body, dict) or "data" not in body:
        raise EdgeloomError(
            f"the gateway answered HTTP {response.status_code} without data",
            status=response.status_code,
        )
    data: dict[str, Any] = body["data"]
    return data


class AsyncEdgeloom(GeneratedAsyncClient):
    """Every operation of `operations/` as a typed coroutine (subscriptions as async
    iterators over graphql-transport-ws): `AsyncEdgeloom(url, token=...)`, used as
    `async with` to close its connections."""

    def __init__(
        self, url: str = DEFAULT_URL, token: str | None = None, timeout: float = 30.0
    ) -> None:
        endpoint = graphql_url(url)
        super().__init__(
            url=endpoint,
            headers=_headers(token),
            http_client=httpx.AsyncClient(headers=_headers(token), timeout=timeout),
            ws_url=endpoint.replace("http", "ws", 1),
            ws_connection_init_payload=({"authorization": f"Bearer {token}"} if token else None),
        )
        self._streams: list[AsyncGenerator[dict[str, Any], None]] = []

    def get_data(self, response: Any) -> dict[str, Any]:
        return _data(response)

    def execute_ws(
        self,
        query: str,
        operation_name: str | None = None,
        variables: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        # The generated subscription methods iterate this and never close it: a stream
        # closed early would leave its socket to the garbage collector. The client holds
        # each one and closes what is left with itself.
        stream = self._stream(query, operation_name, variables, **kwargs)
        self._streams.append(stream)
        return stream

    async def _stream(
        self,
        query: str,
        operation_name: str | None,
        variables: dict[str, Any] | None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, Any], None]:
        try:
            # Closed with this one: its socket is held inside it.
            async with aclosing(
                super().execute_ws(query, operation_name, variables, **kwargs)
            ) as messages:
                async for data in messages:
                    yield data
        except AsyncMultiError as exc:
            raise EdgeloomError.from_errors(
                [error.original or {"message": error.message} for error in exc.errors]
            ) from None
        except ConnectionClosedError as exc:
            close = exc.rcvd
            if close is None or close.code not in CLOSE_CODES:
                raise
            raise EdgeloomError(close.reason, CLOSE_CODES[close.code]) from None

    async def _handle_ws_message(
        self, message: Any, websocket: Any, expected_type: Any = None
    ) -> dict[str, Any] | None:
        # A refusal of a subscription comes as a `next` whose payload holds `errors`, which
        # the generated client would skip.
        try:
            decoded = json.loads(message)
        except (TypeError, ValueError):
            decoded = None
        if isinstance(decoded, dict) and decoded.get("type") == "next":
            payload = decoded.get("payload")
            if isinstance(payload, dict) and payload.get("errors"):
                raise EdgeloomError.from_errors(payload["errors"])
        data: dict[str, Any] | None = await super()._handle_ws_message(
            message, websocket, expected_type
        )
        return data

    async def aclose(self) -> None:
        """Closes the subscriptions still open and the HTTP connections."""
        streams, self._streams = self._streams, []
        for stream in streams:
            await stream.aclose()
        await self.http_client.aclose()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Edgeloom(GeneratedSyncClient):
    """Every query and mutation of `operations/` as a typed method: `Edgeloom(url,
    token=...)`, used as `with` to close its connections. Subscriptions are on
    `AsyncEdgeloom`."""

    def __init__(
        self, url: str = DEFAULT_URL, token: str | None = None, timeout: float = 30.0
    ) -> None:
        super().__init__(
            url=graphql_url(url),
            headers=_headers(token),
            http_client=httpx.Client(headers=_headers(token), timeout=timeout),
        )

    def get_data(self, response: Any) -> dict[str, Any]:
        return _data(response)

    def close(self) -> None:
        self.http_client.close()
