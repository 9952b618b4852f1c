"""Erasure: hash format 3, and the one rewrite of history the database allows.

- `ledger.state_sha256`: the digest of an entry's state that hash format 3 covers (every
  entry written from now on; docs/ledger.md, "The canonical bytes of an entry"), so an
  entry whose content is erased still checks;
- `ledger.erased_by`: the erasure entry that erased an entry's content (`kind:id:version`);
- the ledger and the audit events stay append-only except for exactly an erasure's
  rewrite: an entry's `state` (and `erased_by`, once) may change only when an `sr_erased`
  entry written by the same transaction names that entry by kind, id, version and hash;
  an event's payload only to `{"erased": ...}` naming the erasure of its entry (with the
  `toLane` it named, by which the feed shows it only to a reader of both lanes). Every other
  column, row and operation is refused as before;
- `edgeloom_erase(erasure, record_id, rewrites)`: runs as the owner (the runtime role
  holds no UPDATE or DELETE on history), rewrites the entries an erasure names and their
  events' payloads, deletes the record's search rows, tags and memberships (the caller
  writes them again from the erased entries), and drops the search statistics and value
  counts the erased content left at zero.

Revision ID: 0031
Revises: 0028
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

# Whether the erasure `erasure` (kind:id:version), written by this transaction, names the
# entry (by position: a column of the same name would hide a parameter).
_NAMES = r"""
CREATE FUNCTION edgeloom_erasure_names(erasure text, kind text, object_id text, version int,
                                       hash text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, public AS $$
  SELECT EXISTS (
    SELECT 1 FROM ledger e
    WHERE e.txid = pg_current_xact_id() AND e.event = 'sr_erased'
      AND e.kind || ':' || e.object_id || ':' || e.version = $1
      AND e.state -> 'erased' -> 'entries' @> jsonb_build_array(jsonb_build_object(
            'kind', $2, 'id', $3, 'version', $4, 'hash', $5)))
$$;
"""

# An erased event's payload: the erasure, and the second lane the event concerns if it names
# one (`toLane` of a typed edge's events), by which the feed still shows it only to a reader
# of both lanes.
_ERASED_PAYLOAD = r"""
CREATE FUNCTION edgeloom_erased_payload(erasure text, payload jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('erased', $1)
    || CASE WHEN $2 ? 'toLane' THEN jsonb_build_object('toLane', $2 -> 'toLane')
            ELSE '{}'::jsonb END
$$;
"""

_HISTORY_TRIGGER = r"""
CREATE FUNCTION edgeloom_append_only_but_erasure() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, public AS $$
DECLARE
  erasure text;
BEGIN
  IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'ledger' THEN
    IF OLD.erased_by IS NULL AND NEW.erased_by IS NOT NULL
       AND to_jsonb(NEW) - 'state' - 'erased_by' = to_jsonb(OLD) - 'state' - 'erased_by'
       AND edgeloom_erasure_names(NEW.erased_by, OLD.kind, OLD.object_id, OLD.version, OLD.hash)
    THEN
      RETURN NEW;
    END IF;
  ELSIF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'audit_events' THEN
    SELECT l.erased_by INTO erasure FROM ledger l
    WHERE l.kind = OLD.object_kind AND l.object_id = OLD.object_id
      AND l.version = OLD.version_after;
    IF erasure IS NOT NULL AND NEW.payload = edgeloom_erased_payload(erasure, OLD.payload)
       AND to_jsonb(NEW) - 'payload' = to_jsonb(OLD) - 'payload'
       AND EXISTS (SELECT 1 FROM ledger l WHERE l.kind = OLD.object_kind
                   AND l.object_id = OLD.object_id AND l.version = OLD.version_after
                   AND edgeloom_erasure_names(erasure, l.kind, l.object_id, l.version, l.hash))
    THEN
      RETURN NEW;
    END IF;
  END IF;
  RAISE EXCEPTION 'table % is append-only: % is refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$;
"""

_ERASE = r"""
CREATE FUNCTION edgeloom_erase(erasure text, record_id text, rewrites jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
  r jsonb;
  n int;
  lanes text[];
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM ledger e
    WHERE e.txid = pg_current_xact_id() AND e.event = 'sr_erased' AND e.kind = 'record'
      AND e.object_id = record_id AND e.kind || ':' || e.object_id || ':' || e.version = erasure
  ) THEN
    RAISE EXCEPTION 'no erasure % of record % in this transaction', erasure, record_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  FOR r IN SELECT * FROM jsonb_array_elements(rewrites) LOOP
    UPDATE ledger SET state = r -> 'state', erased_by = erasure
    WHERE kind = r ->> 'kind' AND object_id = r ->> 'id' AND version = (r ->> 'version')::int;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> 1 THEN
      RAISE EXCEPTION 'erasure %: no entry % % v%', erasure, r ->> 'kind', r ->> 'id',
        r ->> 'version';
    END IF;
    UPDATE audit_events SET payload = edgeloom_erased_payload(erasure, payload)
    WHERE object_kind = r ->> 'kind' AND object_id = r ->> 'id'
      AND version_after = (r ->> 'version')::int;
  END LOOP;
  SELECT array_agg(DISTINCT lane) INTO lanes FROM (
    SELECT lane FROM record_words w WHERE w.record_id = edgeloom_erase.record_id
    UNION SELECT lane FROM edge_properties m WHERE m.record_id = edgeloom_erase.record_id
  ) l;
  DELETE FROM record_words w WHERE w.record_id = edgeloom_erase.record_id;
  DELETE FROM record_vectors v WHERE v.record_id = edgeloom_erase.record_id;
  DELETE FROM record_tags t WHERE t.record_id = edgeloom_erase.record_id;
  DELETE FROM edge_properties m WHERE m.record_id = edgeloom_erase.record_id;
  -- The counts the caller folded with its erasure: a word or value no current record
  -- holds any more is dropped, not kept at zero.
  DELETE FROM word_counts c WHERE c.lane = ANY(lanes) AND c.records = 0 AND c.lexemes = 0;
  DELETE FROM member_counts c WHERE c.lane = ANY(lanes) AND c.records = 0;
END $$;
"""


def upgrade() -> None:
    op.execute("ALTER TABLE ledger ADD COLUMN state_sha256 text")
    op.execute("ALTER TABLE ledger ADD COLUMN erased_by text")
    op.execute(_NAMES)
    op.execute(_ERASED_PAYLOAD)
    op.execute(_HISTORY_TRIGGER)
    for table in ("ledger", "audit_events"):
        op.execute(f"DROP TRIGGER {table}_append_only ON {table}")
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION edgeloom_append_only_but_erasure()"
        )
    op.execute(_ERASE)
    op.execute("REVOKE ALL ON FUNCTION edgeloom_erase(text, text, jsonb) FROM PUBLIC")


def downgrade() -> None:
    op.execute("DROP FUNCTION edgeloom_erase(text, text, jsonb)")
    for table in ("ledger", "audit_events"):
        op.execute(f"DROP TRIGGER {table}_append_only ON {table}")
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION edgeloom_append_only()"
        )
    op.execute("DROP FUNCTION edgeloom_append_only_but_erasure()")
    op.execute("DROP FUNCTION edgeloom_erased_payload(text, jsonb)")
    op.execute("DROP FUNCTION edgeloom_erasure_names(text, text, text, int, text)")
    op.execute("ALTER TABLE ledger DROP COLUMN erased_by")
    op.execute("ALTER TABLE ledger DROP COLUMN state_sha256")
