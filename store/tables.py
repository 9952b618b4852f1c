"""The database schema as SQLAlchemy Core tables; migrations create the same shape."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.dialects.postgresql.base import ischema_names
from sqlalchemy.types import UserDefinedType


class XID8(UserDefinedType[int]):
    """PostgreSQL's 64-bit transaction id, which compares as a number."""

    cache_ok = True

    def get_col_spec(self, **kw: object) -> str:
        return "xid8"


# So that reflection (and the migrations-match-tables test) knows the type.
ischema_names["xid8"] = XID8


class Vector(UserDefinedType[list[float]]):
    """pgvector's `vector` of any size; `real[]` where the server has no pgvector (the
    rows are kept alike, unindexed: migration 0023)."""

    cache_ok = True

    def get_col_spec(self, **kw: object) -> str:
        return "vector"


ischema_names["vector"] = Vector


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TZ = DateTime(timezone=True)

# Record ids sort bytewise, so a prefix is a primary-key range scan; every column
# holding one uses the same collation, so joins between them can use the indexes.
RECORD_ID = Text(collation="C")

# Append-only: one entry per version of a ledgered object (kind "record", "policy",
# and each kind to come), holding the object's whole state, hash-chained per object.
# Triggers refuse UPDATE, DELETE and TRUNCATE; the runtime role may only SELECT and
# INSERT. `txid` lets checkpoints cover exactly the entries no running transaction
# can still add to.
ledger = Table(
    "ledger",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=True),
    Column("kind", Text, nullable=False),
    Column("object_id", RECORD_ID, nullable=False),
    Column("version", Integer, nullable=False),
    Column("event", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("at", TZ, nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("state", JSONB, nullable=False),
    Column("prev_hash", Text, nullable=True),
    Column("hash", Text, nullable=False),
    # 3: the canonical bytes docs/ledger.md specifies, over the state's digest; 2: over the
    # state itself; 1: entries written before ledger kinds.
    Column("hash_format", SmallInteger, nullable=False, server_default=text("2")),
    # Format 3: the SHA-256 of the state's canonical JSON, which the hash covers.
    Column("state_sha256", Text, nullable=True),
    # The erasure entry (kind:id:version) that erased this entry's content (migration 0031).
    Column("erased_by", Text, nullable=True),
    Column("txid", XID8, nullable=False, server_default=text("pg_current_xact_id()")),
    Index("uq_ledger_kind_object_id_version", "kind", "object_id", "version", unique=True),
    Index("ix_ledger_txid", "txid"),
)

# Projection: the latest version of each record.
records = Table(
    "records",
    metadata,
    Column("id", RECORD_ID, primary_key=True),
    Column("lane", Text, nullable=False),
    Column("source_type", Text, nullable=False),
    Column("authority", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("properties", JSONB, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("idempotency_key", Text, nullable=True),
    Column("ledger_hash", Text, nullable=False),
    # Set while the record is retired (its newest version is a tombstone): every
    # current read leaves the row out, so the lane indexes hold only live rows.
    Column("retired_at", TZ, nullable=True),
    Column("retired_by", Text, nullable=True),
    Column("retired_reason", Text, nullable=True),
    # The instant from which the record is treated as retired (its state's expiry), set
    # or not whether its tombstone is written yet (migration 0030).
    Column("expires_at", TZ, nullable=True),
    Index(
        "ix_records_lane_created_at_id",
        "lane",
        "created_at",
        "id",
        postgresql_where=text("retired_at IS NULL"),
    ),
    # Counting a lane's records reads this one: the lane alone deduplicates to a tenth.
    Index("ix_records_lane", "lane", postgresql_where=text("retired_at IS NULL")),
    # The retired records' ids: a typed edge is shown only while neither end is one, a
    # probe every edge read makes for each end (migration 0025).
    # With the lane, the policy of the lanes' row-level security (migration 0032) reads
    # no heap page for an edge's retired end.
    Index(
        "ix_records_retired",
        "id",
        postgresql_include=["lane"],
        postgresql_where=text("retired_at IS NOT NULL"),
    ),
    # The pending expiries (their tombstones not written yet), which current reads and
    # counts subtract; and every expiry, which reads at an earlier instant consult.
    Index(
        "ix_records_expiring",
        "expires_at",
        "id",
        postgresql_where=text("retired_at IS NULL AND expires_at IS NOT NULL"),
    ),
    Index(
        "ix_records_expires_at",
        "expires_at",
        "id",
        postgresql_where=text("expires_at IS NOT NULL"),
    ),
    # A record's names (title metadata, aliases): records(named:) (migration 0022).
    Index(
        "ix_records_names",
        text("edgeloom_record_names(properties)"),
        postgresql_using="gin",
        postgresql_where=text("retired_at IS NULL"),
    ),
    Index(
        "uq_records_created_by_idempotency_key",
        "created_by",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)

# Projection: hyperedge membership with the transaction-time interval in which the
# record carried it, so a gather at any point in time is an index scan. The current
# membership has recorded_to NULL. Every index that reads filter by leads with the
# lane, so the lane filter is an index condition whatever the statistics say and on
# every PostgreSQL version (15 uses `lane = ANY(...)` only on a leading column). They
# hold `value_key`, which a btree row can hold for every value the limits allow (see
# migration 0009): reads compare `value_key = edgeloom_value_key(:value)`.
edge_properties = Table(
    "edge_properties",
    metadata,
    Column("id", Text, nullable=False),
    Column("record_id", RECORD_ID, nullable=False),
    Column("lane", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("recorded_from", TZ, nullable=False),
    Column("recorded_to", TZ, nullable=True),
    Column("from_version", Integer, nullable=False),
    Column("to_version", Integer, nullable=True),
    Column(
        "value_key",
        Text(collation="C"),
        Computed("edgeloom_value_key(value)", persisted=True),
        nullable=False,
    ),
    Index("uq_edge_properties_id_from_version", "id", "from_version", unique=True),
    Index(
        "ix_edge_properties_current",
        "lane",
        "label",
        "value_key",
        "record_id",
        postgresql_where=text("recorded_to IS NULL"),
    ),
    # As of T: the memberships held then, in record order from the index alone (0016).
    Index(
        "ix_edge_properties_history",
        "lane",
        "label",
        "value_key",
        "record_id",
        postgresql_include=["recorded_from", "recorded_to"],
    ),
    Index("ix_edge_properties_record_id", "record_id"),
)

# The record ids an event's payload names (a top-level value, or an element of a
# top-level list, holding a record id), as a JSON array, and whether it names any: the
# feed's `recordIds` filter finds the events naming a record on this expression's index
# (store.feed.filters), spelled the same so the planner matches it.
_NAMED_PATH = "'$.*[*]?(@ starts with \"sr_\")'::jsonpath"


def named_ids(payload: str) -> str:
    """SQL: the record ids the payload column `payload` names, as a JSON array."""
    return f"jsonb_path_query_array({payload}, {_NAMED_PATH})"


def names_records(payload: str) -> str:
    """SQL: the payload column `payload` names a record."""
    return f"jsonb_path_exists({payload}, {_NAMED_PATH})"


# Append-only like the ledger: every event names the ledger entry it reports
# (object_kind, object_id, version_after), and verify checks both directions.
audit_events = Table(
    "audit_events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=True),
    Column("id", Text, nullable=False, unique=True),
    Column("kind", Text, nullable=False),
    Column("record_id", RECORD_ID, nullable=True),
    Column("lane", Text, nullable=True),
    Column("actor", Text, nullable=False),
    Column("at", TZ, nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("version_before", Integer, nullable=True),
    Column("version_after", Integer, nullable=True),
    Column("object_kind", Text, nullable=False),
    Column("object_id", RECORD_ID, nullable=False),
    # Transaction id, so the live feed can tell which events are visible to
    # every snapshot even when commits land out of sequence order.
    Column("txid", XID8, nullable=False, server_default=text("pg_current_xact_id()")),
    Index("ix_audit_events_record_id_seq", "record_id", "seq"),
    Index("ix_audit_events_txid", "txid"),
    Index(
        "ix_audit_events_object_kind_object_id_version_after",
        "object_kind",
        "object_id",
        "version_after",
    ),
    Index(
        "ix_audit_events_named",
        text(named_ids("payload")),
        postgresql_using="gin",
        postgresql_where=text(names_records("payload")),
    ),
)

# Projection of the ledger's "policy" entries: every applied policy is a new
# version; policy_head names the one in force and is the row writers share-lock.
policy_versions = Table(
    "policy_versions",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("yaml", Text, nullable=False),
    Column("applied_at", TZ, nullable=False),
    Column("applied_by", Text, nullable=False),
)

policy_head = Table(
    "policy_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", Integer, nullable=False),
)

# Anchors over the whole ledger, computed off the write path: checkpoint n covers
# the entries settled since checkpoint n-1 (transaction id below `below_txid`, all
# committed when it was taken), names their positions in `covers`, and chains to
# checkpoint n-1, so erasing or rewriting history before the newest is detected.
checkpoints = Table(
    "checkpoints",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("below_txid", XID8, nullable=False),
    Column("entries", BigInteger, nullable=False),
    # The ledger positions it covers, as ranges "a-b,c-d" (see store.operations.checkpoints).
    Column("covers", Text, nullable=False),
    Column("at", TZ, nullable=False),
    Column("prev_hash", Text, nullable=True),
    Column("hash", Text, nullable=False),
    Column("signature", Text, nullable=True),
    Column("key_id", Text, nullable=True),
    # 2: the signature covers every field; 1: checkpoints signed before it did.
    Column("signed_format", SmallInteger, nullable=False, server_default=text("2")),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Text, primary_key=True),
    Column("agent", Text, nullable=False),
    Column("token_hash", Text, nullable=False, unique=True),
    Column("created_at", TZ, nullable=False),
    Column("revoked_at", TZ, nullable=True),
    # Refused from this instant on (None: never); a rotated token's is the end of its grace.
    Column("expires_at", TZ, nullable=True),
    # The token `token rotate` made in its place.
    Column("rotated_to", Text, nullable=True),
)

# When each token was last used, at most once a minute: kept apart from `tokens` so that
# the gateway's role, which records it, cannot change a token's revocation or expiry.
token_uses = Table(
    "token_uses",
    metadata,
    Column("token_id", Text, ForeignKey("tokens.id"), primary_key=True),
    Column("last_used_at", TZ, nullable=False),
)

# Projection of the ledger's "correction" entries: a correction is its own object
# attached to one version of a record, which it leaves as it was. `lane` is the
# record's, so reads filter corrections by the lanes the caller may read.
corrections = Table(
    "corrections",
    metadata,
    Column("id", Text, primary_key=True),
    Column("record_id", RECORD_ID, nullable=False),
    Column("record_version", Integer, nullable=False),
    Column("lane", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("reason", Text, nullable=True),
    Column("actor", Text, nullable=False),
    Column("at", TZ, nullable=False),
    Column("ledger_hash", Text, nullable=False),
    Index("ix_corrections_record_id_at", "record_id", "at"),
)

# Projection of the ledger's "edge" entries: each typed edge as its newest entry
# leaves it. `lane` is the from record's and `to_lane` the to record's: an edge is read
# only by a reader of both. Retired edges stay (invalid_at, expired_at set); the live
# key is unique among the others.
edges = Table(
    "edges",
    metadata,
    Column("id", RECORD_ID, primary_key=True),
    Column("from_id", RECORD_ID, nullable=False),
    Column("to_id", RECORD_ID, nullable=False),
    Column("type", Text, nullable=False),
    Column("namespace", Text, nullable=False),
    Column("lane", Text, nullable=False),
    Column("to_lane", Text, nullable=False),
    Column("weight", Float, nullable=False),
    Column("confidence", Float, nullable=True),
    Column("provenance_actor", Text, nullable=False),
    Column("provenance_type", Text, nullable=False),
    Column("evidence", JSONB, nullable=True),
    Column("detector", Text, nullable=False),
    Column("conflict_state", Text, nullable=True),
    Column("resolution", Text, nullable=True),
    Column("resolver", Text, nullable=True),
    Column("winner_id", RECORD_ID, nullable=True),
    Column("valid_at", TZ, nullable=False),
    Column("invalid_at", TZ, nullable=True),
    Column("expired_at", TZ, nullable=True),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("version", Integer, nullable=False),
    Column("ledger_hash", Text, nullable=False),
    Index("ix_edges_from_id_type", "from_id", "type"),
    Index("ix_edges_to_id_type", "to_id", "type"),
    Index("ix_edges_type_namespace", "type", "namespace"),
    Index(
        "uq_edges_live_key",
        "from_id",
        "to_id",
        "type",
        "namespace",
        unique=True,
        postgresql_where=text("expired_at IS NULL"),
    ),
    Index(
        "ix_edges_conflicts",
        "conflict_state",
        "created_at",
        "id",
        postgresql_where=text("type = 'contradicts'"),
    ),
)

# Projection: how many current records carry each caller label, per lane. Writers
# only ever INSERT signed deltas (+1 when a record gains its first value of a label,
# -1 when it loses its last), so no writer waits on a hot label's counter row; the
# deltas are folded into label_counts after commit, off the write transaction, and a
# read adds the few unfolded deltas to the folded counts.
label_counts = Table(
    "label_counts",
    metadata,
    Column("lane", Text, primary_key=True),
    Column("label", Text, primary_key=True),
    Column("records", BigInteger, nullable=False),
)

label_deltas = Table(
    "label_deltas",
    metadata,
    Column("lane", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("delta", Integer, nullable=False),
)

# Projection: how many current records each lane holds of each source type, and how
# many current records carry each edge-property value in each lane (`value_key` as in
# edge_properties). Moved as label_counts is: writers append signed deltas, folded
# after commit (store.kinds.record.counts).
record_counts = Table(
    "record_counts",
    metadata,
    Column("lane", Text, primary_key=True),
    Column("source_type", Text, primary_key=True),
    Column("records", BigInteger, nullable=False),
)

record_deltas = Table(
    "record_deltas",
    metadata,
    Column("lane", Text, nullable=False),
    Column("source_type", Text, nullable=False),
    Column("delta", Integer, nullable=False),
)

member_counts = Table(
    "member_counts",
    metadata,
    Column("label", Text, primary_key=True),
    Column("value_key", Text(collation="C"), primary_key=True),
    Column("lane", Text, primary_key=True),
    Column("value", Text, nullable=False),
    Column("records", BigInteger, nullable=False),
    # For `values(similarTo:)` (migration 0020): the value without case, accents, spacing
    # or punctuation, and that key with each one character deleted, after the label.
    Column(
        "similar_key", Text, Computed("edgeloom_similar_key(value)", persisted=True), nullable=True
    ),
    Column(
        "near_keys",
        ARRAY(Text),
        Computed("edgeloom_near_keys(label, edgeloom_similar_key(value))", persisted=True),
        nullable=True,
    ),
    Index("ix_member_counts_near_keys", "near_keys", postgresql_using="gin"),
)

# A delta row has no key: the fold takes every committed one. A member delta is found by
# its value's hash (edgeloom_member_hash of label and value key, migration 0017).
member_deltas = Table(
    "member_deltas",
    metadata,
    Column("label", Text, nullable=False),
    Column("lane", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("delta", Integer, nullable=False),
    Column("value_hash", BigInteger, nullable=False),
    Index("ix_member_deltas_hash", "value_hash"),
)

# Projection: the tags (`#word`s) of each record's current content, an index over the
# content and never in the ledger (store.kinds.record.tags). A record has a row once
# its content has held a tag; `records(tag:)` reads the GIN index.
record_tags = Table(
    "record_tags",
    metadata,
    Column("record_id", RECORD_ID, primary_key=True),
    Column("lane", Text, nullable=False),
    Column("tags", ARRAY(Text), nullable=False),
    Index("ix_record_tags_tags", "tags", postgresql_using="gin"),
    Index("ix_record_tags_lane", "lane"),
)

# Projection: the words of each interval in which a live record's content, lane and
# source type stayed the same (store.kinds.record.words), as a `tsvector` in the lane's
# text-search language, with the interval's transaction time. Search reads the current
# rows from the partial GIN index and the rows held at an earlier instant from the whole;
# past its count budget, a search reads each lane's rows newest first from the btree.
record_words = Table(
    "record_words",
    metadata,
    Column("record_id", RECORD_ID, primary_key=True),
    Column("from_version", Integer, primary_key=True),
    Column("lane", Text, nullable=False),
    Column("source_type", Text, nullable=False),
    Column("recorded_from", TZ, nullable=False),
    Column("recorded_to", TZ, nullable=True),
    Column("words", TSVECTOR, nullable=False),
    Index(
        "ix_record_words_current",
        "words",
        postgresql_using="gin",
        postgresql_where=text("recorded_to IS NULL"),
    ),
    Index("ix_record_words_words", "words", postgresql_using="gin"),
    Index("ix_record_words_newest", "lane", "recorded_from", "record_id"),
)

# Projection: the vector of each interval in which a live record's vector, lane and
# source type stayed the same (store.kinds.record.vectors), with its size. Each lane whose
# embedding a policy declares has a partial HNSW index over `embedding::vector(size)` for
# its rows, made at the gateway's start (edgeloom_vector_index), not here: the lanes and
# sizes are the policy's.
record_vectors = Table(
    "record_vectors",
    metadata,
    Column("record_id", RECORD_ID, primary_key=True),
    Column("from_version", Integer, primary_key=True),
    Column("lane", Text, nullable=False),
    Column("source_type", Text, nullable=False),
    Column("recorded_from", TZ, nullable=False),
    Column("recorded_to", TZ, nullable=True),
    Column("dims", SmallInteger, nullable=False),
    Column("embedding", Vector, nullable=False),
)

# The text-search configuration each lane's words are indexed in (no row: `simple`);
# moved by `edgeloom search-language`, which rebuilds the lane's words.
search_languages = Table(
    "search_languages",
    metadata,
    Column("lane", Text, primary_key=True),
    Column("config", Text, nullable=False),
)

# Projection: the search statistics of each lane's current words (store.kinds.record.
# word_counts): how many current records hold each lexeme, and under the lexeme '' (which
# no text yields) how many current records the lane's words hold and how many lexemes
# they hold together. Kept as the member counts are: deltas appended by every write,
# folded after commit.
word_counts = Table(
    "word_counts",
    metadata,
    Column("lane", Text, primary_key=True),
    Column("lexeme", Text(collation="C"), primary_key=True),
    Column("records", BigInteger, nullable=False),
    Column("lexemes", BigInteger, nullable=False),
)
word_deltas = Table(
    "word_deltas",
    metadata,
    Column("lane", Text, nullable=False),
    Column("lexeme", Text(collation="C"), nullable=False),
    Column("records", Integer, nullable=False),
    Column("lexemes", Integer, nullable=False),
    Index("ix_word_deltas_lexeme", "lane", "lexeme"),
)
