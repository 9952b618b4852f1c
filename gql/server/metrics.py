"""`/metrics` in the Prometheus text format: what the gateway does, for a scraper.

Per request (`request_done`, called by `gql.server.front.Front`): requests by operation and the
path that answered, errors by operation and code, latency by operation. Sampled from the
process every few seconds and at each scrape (`sample`): the read pool's connections,
the feed's subscribers, groups, deliveries, lag and slow consumers closed; with read
replicas, the reads each server served and each standby's state. Read from the
database at each scrape: the ledger's position and entries per second, the newest
checkpoint's age; the same whichever process answers.

Under `serve --workers N` the processes write their values to files in
`PROMETHEUS_MULTIPROC_DIR` (set by `serve`), and the process that answers a scrape sums
them (prometheus-client's multiprocess mode); gauges of processes that are gone are left
out. Served to loopback clients, and to others whose bearer token names an agent with
`read_metrics: true` in the policy in force (docs/operations.md, "Metrics").
"""

from __future__ import annotations

import asyncio
import os
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from gql.api.auth import authorize
from gql.api.errors import refusal_response
from gql.api.observe import RequestNote
from gql.api.session import Services, policy_in_force
from gql.server.hosts import is_loopback

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
GRAPHQL_PATH = "/graphql"
# Under --workers a scrape reads what each process has flushed: at most this far behind.
SAMPLE_SECONDS = 1.0
# The window the ledger's entries per second are measured over.
RATE_SECONDS = 60.0
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
NOT_ALLOWED = (
    "/metrics is served to loopback clients, and to others with a bearer token whose agent "
    "has 'read_metrics: true' in the policy in force"
)
_DATABASE = """
SELECT (SELECT coalesce(max(seq), 0) FROM ledger) AS position,
       (SELECT extract(epoch FROM now() - max(at))::float8 FROM checkpoints) AS checkpoint_age
"""


class Metrics:
    """The metrics of one gateway process (one app)."""

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        # Each app has a registry of its own (tests run several in one process); in
        # multiprocess mode the values live in files and a scrape reads those.
        self.registry = CollectorRegistry(auto_describe=True)
        registry = None if multiprocess_dir else self.registry
        self.requests = Counter(
            "edgeloom_requests",
            "GraphQL requests answered, by root field (operation) and the path that answered "
            "(route: compiled, ordinary; refused: before either ran; websocket: connections)",
            ["operation", "route"],
            registry=registry,
        )
        self.errors = Counter(
            "edgeloom_errors",
            "GraphQL requests answered with an error, by operation and the first error's code",
            ["operation", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "edgeloom_request_duration_seconds",
            "Time from a GraphQL request's arrival to the end of its answer, by operation",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.pool = Gauge(
            "edgeloom_pool_connections",
            "Connections of the read and write pool: in use, and in all (size)",
            ["state"],
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.subscribers = Gauge(
            "edgeloom_feed_subscribers",
            "Live feed subscriptions open",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.groups = Gauge(
            "edgeloom_feed_groups",
            "Groups of subscriptions sharing one rendering (same operation, same rights)",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.deliveries = Counter(
            "edgeloom_feed_deliveries",
            "Batches of feed events handed to subscriptions",
            registry=registry,
        )
        self.slow_closed = Counter(
            "edgeloom_feed_slow_consumers_closed",
            "Subscriptions closed for falling too far behind (they resume from their cursor)",
            registry=registry,
        )
        self.lag = Gauge(
            "edgeloom_feed_lag_seconds",
            "Time from the newest event's write to its hand-out by the feed reader",
            multiprocess_mode="livemax",
            registry=registry,
        )
        self.reads = Counter(
            "edgeloom_reads",
            "Read snapshots and compiled reads, by the server that served them (target: "
            "primary, standby)",
            ["target"],
            registry=registry,
        )
        self.standby_up = Gauge(
            "edgeloom_standby_up",
            "1 while a standby serves reads, 0 while it is skipped (down or lagging)",
            ["standby"],
            multiprocess_mode="livemin",
            registry=registry,
        )
        self.standby_lag = Gauge(
            "edgeloom_standby_lag_bytes",
            "WAL bytes a standby had yet to replay at its last health check",
            ["standby"],
            multiprocess_mode="livemax",
            registry=registry,
        )
        self._served = {"primary": 0, "standby": 0}
        self._pending: dict[tuple[str | None, str | None, str | None, bool], _Pending] = {}
        self._delivered = 0
        self._closed = 0
        self._positions: deque[tuple[float, int]] = deque()

    def request_done(self, note: RequestNote, seconds: float) -> None:
        """Count a request that ended (every path but /graphql is left out).

        Added up here in plain numbers, and handed to prometheus-client by `flush` (at
        every sample and scrape): its counters and histograms take a lock and a lookup per
        value, which would be most of this layer's cost on a small request.
        """
        if note.path != GRAPHQL_PATH:
            return
        key = (note.operation, note.route, note.code, note.status == 101)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending([0] * (len(LATENCY_BUCKETS) + 1))
        pending.count += 1
        pending.seconds += seconds
        pending.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def flush(self) -> None:
        """What `request_done` added up since the last flush, into the metrics."""
        pending, self._pending = self._pending, {}
        for (operation, route, code, websocket), counted in pending.items():
            name = operation or "none"
            path = "websocket" if websocket else route or "refused"
            self.requests.labels(name, path).inc(counted.count)
            if code is not None:
                self.errors.labels(name, code).inc(counted.count)
            if websocket:
                continue  # a connection's life is not a request's latency
            histogram = self.latency.labels(name)
            # Bulk observations: per bucket what observe() adds one at a time.
            histogram._sum.inc(counted.seconds)
            for bucket, count in zip(histogram._buckets, counted.buckets, strict=True):
                if count:
                    bucket.inc(count)

    def sample(self, services: Services) -> None:
        """This process's requests since the last sample, its pool and feed, now."""
        self.flush()
        in_use, size = services.pool.usage()
        self.pool.labels("in_use").set(in_use)
        self.pool.labels("size").set(size)
        replicas = services.replicas
        if replicas is not None and replicas.enabled:
            for target, served in replicas.served.items():
                self.reads.labels(target).inc(served - self._served[target])
                self._served[target] = served
            for standby in replicas.standbys:
                self.standby_up.labels(standby.name).set(1 if standby.up else 0)
                self.standby_lag.labels(standby.name).set(standby.lag_bytes or 0)
        feed = services.feed
        if feed is None:
            return
        stats = feed.stats()
        self.subscribers.set(stats.subscribers)
        self.groups.set(stats.groups)
        self.lag.set(stats.lag_seconds)
        self.deliveries.inc(stats.deliveries - self._delivered)
        self.slow_closed.inc(stats.closed_slow - self._closed)
        self._delivered, self._closed = stats.deliveries, stats.closed_slow

    async def sample_every(self, services: Services, seconds: float = SAMPLE_SECONDS) -> None:
        """`sample` for as long as the process serves (the lifespan's task)."""
        while True:
            with suppress(Exception):
                self.sample(services)
            await asyncio.sleep(seconds)

    async def exposition(self, services: Services) -> bytes:
        """The text a scrape gets."""
        self.sample(services)
        async with services.pool.acquire() as conn:
            row = await conn.fetchrow(_DATABASE)
        assert row is not None
        now = time.monotonic()
        positions = self._positions
        positions.append((now, int(row["position"])))
        while len(positions) > 2 and now - positions[1][0] >= RATE_SECONDS:
            positions.popleft()
        (then, first), last = positions[0], positions[-1][1]
        rate = (last - first) / (now - then) if now > then else 0.0
        database = _Database(last, rate, row["checkpoint_age"])
        if self.multiprocess_dir:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(  # type: ignore[no-untyped-call]
                registry, path=self.multiprocess_dir
            )
            text = generate_latest(registry)
        else:
            text = generate_latest(self.registry)
        own = CollectorRegistry()
        own.register(database)
        return text + generate_latest(own)


@dataclass(slots=True)
class _Pending:
    """Requests of one operation, path and code since the last flush: how many, their
    seconds in all, and how many fell in each latency bucket (the last: above them all)."""

    buckets: list[int]
    count: int = 0
    seconds: float = 0.0


class _Database(Collector):
    """What the database says at a scrape."""

    def __init__(self, position: int, rate: float, checkpoint_age: float | None) -> None:
        self.position = position
        self.rate = rate
        self.checkpoint_age = checkpoint_age

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "edgeloom_ledger_position",
            "The newest ledger entry's position (seq); positions of rolled-back writes are "
            "skipped, so it may grow faster than the entries",
            value=self.position,
        )
        yield GaugeMetricFamily(
            "edgeloom_ledger_entries_per_second",
            "Ledger entries written per second by every gateway, over about the last minute "
            "of this process's scrapes",
            value=self.rate,
        )
        age = GaugeMetricFamily(
            "edgeloom_checkpoint_age_seconds",
            "Seconds since the newest checkpoint was taken (absent: none yet)",
        )
        if self.checkpoint_age is not None:
            age.add_metric([], self.checkpoint_age)
        yield age


def multiprocess_dir() -> str | None:
    """Where the processes of `serve --workers` keep their values, when they do."""
    return os.environ.get(MULTIPROCESS_DIR) or None


def metrics_route(metrics: Metrics) -> Callable[[Request], Awaitable[Response]]:
    """The `/metrics` endpoint of an app."""

    async def endpoint(request: Request) -> Response:
        services: Services = request.state.services
        if not await _allowed(request, services):
            return refusal_response(403, NOT_ALLOWED, code="FORBIDDEN")
        return Response(await metrics.exposition(services), media_type=CONTENT_TYPE_LATEST)

    return endpoint


async def _allowed(request: Request, services: Services) -> bool:
    client = request.client
    if client is not None and is_loopback(client.host):
        return True
    authorization = request.headers.get("authorization")
    if not authorization:
        return False
    # Never the development agent: that one is for loopback alone.
    caller = await authorize(authorization, services, None)
    if caller.agent is None:
        return False
    in_force = await policy_in_force(services)
    return in_force is not None and in_force.policy.agent(caller.agent).read_metrics
