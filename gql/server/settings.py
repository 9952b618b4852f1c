"""How one gateway process runs: every setting, with its default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gql.api.cost import DEFAULT_MAX_COST
from gql.api.limits import DEFAULT_MAX_BODY, DEFAULT_MAX_FIELDS
from gql.feed.options import FeedOptions
from gql.server.waiting import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT
from store.kinds.record.queries import DEFAULT_MAX_RESPONSE_BYTES
from store.ledger.group_commit import DEFAULT_OUTCOME_TIMEOUT
from store.reads.replicas import ReplicaOptions

DEFAULT_REQUEST_TIMEOUT = 30.0
STATEMENT_GRACE = 5.0


@dataclass(frozen=True)
class Settings:
    """How one gateway process runs."""

    database_url: str
    policy_yaml: str | None = None
    policy_source: str = "policy"
    # The agent a request without a token acts as; only ever set for loopback.
    anonymous_agent: str | None = None
    # Host names a gateway with a policy answers besides loopback names and IP addresses
    # (serve: the name it listens on, --allowed-host, EDGELOOM_ALLOWED_HOSTS); a request
    # addressed to another name, or from a page on one, is refused (gql.server.hosts).
    allowed_hosts: tuple[str, ...] = ()
    # Also the largest WebSocket message.
    max_body_bytes: int = DEFAULT_MAX_BODY
    # The most objects one operation may ask for (see gql.api.cost).
    max_query_cost: int = DEFAULT_MAX_COST
    # The most field selections one document may hold, counted before it is validated.
    max_fields: int = DEFAULT_MAX_FIELDS
    # The most bytes one response may hold (of record content read, on the ordinary
    # path; of JSON built, on the compiled path): over it, refused before it is read.
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    # An HTTP request still running after this many seconds is stopped and answered.
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    # A write whose COMMIT was under way when its request stopped is waited for this many
    # more seconds, then answered with its result, or OUTCOME_UNKNOWN (store.ledger.executor).
    write_outcome_timeout: float = DEFAULT_OUTCOME_TIMEOUT
    # WebSocket connections one process holds at once (lowered at start when the
    # open-file limit leaves room for fewer), and of those, how many may still be
    # waiting for their connection_init to be acknowledged, in all and from one client
    # address. The defaults hold ten thousand subscribers from one address (a proxy).
    max_ws_connections: int = 16_384
    max_ws_unauthenticated: int = 1024
    max_ws_unauthenticated_per_address: int = 256
    # A connection whose request headers are not complete this many seconds after it
    # opened (or after its last response) is closed (gql.server.waiting).
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    # A request whose body has not all arrived this many seconds after its headers is
    # answered 408 (unless its answer began) and closed (gql.server.waiting).
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    # A WebSocket that has not sent connection_init after this many seconds is closed (4408).
    ws_init_timeout: float = 10.0
    # Connections of the SQLAlchemy engine (tokens, the feed's catch-up reads).
    pool_size: int = 10
    # Connections of the pool every read and write runs on, all opened at start: at
    # least the expected number of concurrent requests, so none waits for one to open.
    read_pool_size: int = 20
    # Queries the compiler covers run as one SQL statement building the response, and
    # `ingest`/`ingestMany` answer their records directly (gql.api.compiled); off, every
    # operation runs through strawberry (the differential tests compare).
    compiled_path: bool = True
    run_migrations: bool = True
    # The role the gateway serves as; derived from database_url when None
    # (see store.operations.roles).
    runtime_database_url: str | None = None
    # How often a checkpoint anchors the ledger (0: never; `edgeloom checkpoint` on demand),
    # and the key file that signs them (None: unsigned).
    checkpoint_seconds: float = 60.0
    checkpoint_key: Path | None = None
    # How often the tombstones of expired records are written (0: never). Reads treat a
    # record as retired from its expiry on whether or not its tombstone is written yet.
    expiry_seconds: float = 5.0
    # Sign with the key in checkpoint_key although this memory's newest checkpoints were
    # signed by another (or it is missing): without it such a start is refused.
    new_checkpoint_key: bool = False
    feed: FeedOptions = FeedOptions()
    # Standbys reads go to (EDGELOOM_READ_URLS), each with a pool of read_pool_size
    # connections, and when one is skipped (store.reads.replicas).
    replicas: ReplicaOptions = ReplicaOptions()
    # One JSON line per request on stderr (gql.api.observe), set by `serve` at log level info
    # or debug; off, the lines go to the logger `edgeloom.requests` like any log.
    request_log: bool = False
    # Of the requests answered without error in under slow_request_seconds, the request
    # log writes one in this many (1: every one); the others are always written.
    request_log_every: int = 1
    slow_request_seconds: float = 1.0

    @property
    def statement_timeout(self) -> float:
        """PostgreSQL's statement_timeout on the gateway's connections: the longest a request
        lives (its time, then the wait for a commit's outcome) and STATEMENT_GRACE more, so
        that no statement outlives its request by more than that, and the gateway's own
        answer to one stopped (503, OUTCOME_UNKNOWN) comes first: a commit answered
        OUTCOME_UNKNOWN may still end, written, within the grace."""
        return self.request_timeout + self.write_outcome_timeout + STATEMENT_GRACE
