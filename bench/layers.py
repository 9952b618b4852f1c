"""What the outermost layer costs a request, apart from everything else.

    .venv/bin/python -m bench.layers [--requests 100000] [--rounds 5]

An app that answers at once (a response start and a body) is called through:
the security headers alone (the layer `gql.server.front.Front` replaced, as it was), `Front`
without metrics or log, with the metrics, and with the metrics and the request log (to
/dev/null, as `serve` writes it to stderr). Rounds alternate the four; printed: the
median microseconds a request of each, and what each adds to the headers alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gql.api import observe
from gql.server.front import Front
from gql.server.headers import with_security_headers
from gql.server.metrics import Metrics

Message = dict[str, Any]
App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
START = {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
BODY = {"type": "http.response.body", "body": b"{}"}


async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(START)
    await send(BODY)


class HeadersAlone:
    """The security-header layer as it was before `Front`."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = with_security_headers(message)
            await send(message)

        await self.app(scope, receive, with_headers)


async def per_request(app: App, count: int, sink: observe.LineSink | None) -> float:
    scope = {"type": "http", "path": "/graphql", "method": "POST", "headers": []}

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        pass

    started = time.perf_counter()
    for _ in range(count):
        await app(scope, receive, send)
    if sink is not None:
        sink.flush()  # the lines are made here, and that is part of their cost
    return (time.perf_counter() - started) / count * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    metrics = Metrics()
    logged = observe.LineSink(open("/dev/null", "wb"))  # noqa: SIM115
    layers: dict[str, tuple[App, observe.LineSink | None]] = {
        "security headers alone (before)": (HeadersAlone(answer), None),
        "Front, no metrics, no log": (Front(answer), None),
        "Front with metrics": (Front(answer, metrics.request_done), None),
        "Front with metrics and log": (Front(answer, metrics.request_done), logged),
    }
    times: dict[str, list[float]] = {name: [] for name in layers}
    for number in range(args.rounds):
        names = list(layers) if number % 2 == 0 else list(layers)[::-1]
        for name in names:
            app, sink = layers[name]
            observe.sink = sink
            times[name].append(await per_request(app, args.requests, sink))
    base = statistics.median(times["security headers alone (before)"])
    for name, found in times.items():
        median = statistics.median(found)
        print(f"{name:34} {median:6.2f} us a request (+{median - base:5.2f})")


if __name__ == "__main__":
    asyncio.run(main())
