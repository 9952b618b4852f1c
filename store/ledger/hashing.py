"""The ledger's hash chain: each entry's hash covers its content and the previous hash.

Format 2 (docs/ledger.md, "The canonical bytes of an entry"): a JSON object with exactly the keys
actor, at, event, id, kind, policy_version, prev_hash, state and version, keys sorted
by code point at every level, no whitespace, non-ASCII characters as themselves, `at`
in UTC as YYYY-MM-DDTHH:MM:SS.ffffffZ; SHA-256 over its UTF-8 bytes, as lower-case hex.
Format 1 is how entries were hashed before kinds existed; verify still checks them.

Format 3 (every entry written now): the same object with `state_sha256`, the SHA-256 of the
state's canonical JSON as lower-case hex, in place of `state`. The ledger keeps that digest
beside the state (column `state_sha256`), so an entry whose content was erased
(`store.kinds.record.erase`) still checks: its hash from the digest, and the digest, no
longer the state's, from the erasure entry that names the entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from store.ledger.entry import Entry

FORMAT = 3


# The entries of one transaction share its time.
@lru_cache(maxsize=64)
def canonical_time(at: datetime) -> str:
    """A timestamp as the canonical bytes hold it: UTC, always six fractional digits."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical_bytes(
    *,
    kind: str,
    object_id: str,
    version: int,
    event: str,
    actor: str,
    at: datetime,
    policy_version: int,
    prev_hash: str | None,
    state: Mapping[str, Any] | None = None,
    state_digest: str | None = None,
) -> bytes:
    """The canonical bytes of an entry: format 2 holds its `state`, format 3 the state's
    digest (`state_digest`, under the key `state_sha256`) in its place."""
    body = {
        "kind": kind,
        "id": object_id,
        "version": version,
        "event": event,
        "actor": actor,
        "at": canonical_time(at),
        "policy_version": policy_version,
        "prev_hash": prev_hash,
    }
    if state_digest is None:
        body["state"] = state
    else:
        body["state_sha256"] = state_digest
    return canonical_json(body)


def canonical_json(body: Mapping[str, Any]) -> bytes:
    """The canonical JSON text (docs/ledger.md) of a body of strings, integers, null, booleans,
    lists and objects, as UTF-8.

    orjson writes exactly that with sorted keys (a test holds it to the reference,
    `json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, over
    every code point), at a fifth of the cost. What orjson refuses (a lone surrogate, an
    integer past 64 bits) goes the reference's way, which fails or writes it as before.
    """
    try:
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(**fields: Any) -> str:
    """The format-2 hash of an entry (keyword arguments as `canonical_bytes` takes)."""
    return hashlib.sha256(canonical_bytes(**fields)).hexdigest()


def state_sha256(state: Mapping[str, Any]) -> str:
    """The digest of a state that format 3 hashes: SHA-256 of its canonical JSON, as hex."""
    return hashlib.sha256(canonical_json(state)).hexdigest()


def written_hash(**fields: Any) -> str:
    """The format-3 hash of an entry holding `state` (keyword arguments as
    `canonical_bytes` takes): what the write path gives every new entry."""
    state = fields.pop("state")
    return digest_hash(**fields, state_digest=state_sha256(state))


def digest_hash(**fields: Any) -> str:
    """The format-3 hash of an entry (keyword arguments as `canonical_bytes` takes, with
    `state_digest`, the state's digest, where format 2 has `state`)."""
    return hashlib.sha256(canonical_bytes(**fields)).hexdigest()


def legacy_entry_hash(
    *,
    object_id: str,
    version: int,
    event: str,
    actor: str,
    at: datetime,
    policy_version: int,
    state: Mapping[str, Any],
    prev_hash: str | None,
) -> str:
    """Format 1: record entries written before ledger kinds (times as isoformat())."""
    body = {
        "record_id": object_id,
        "version": version,
        "event": event,
        "actor": actor,
        "at": at.isoformat(),
        "policy_version": policy_version,
        "state": state,
        "prev_hash": prev_hash,
    }
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def stored_hash(entry: Entry, hash_format: int) -> str:
    """The hash `entry` must carry, by the format it was written in (format 3: over the
    digest it keeps, `Entry.state_sha256`, which `state_matches` compares with its state)."""
    if hash_format == 3:
        return digest_hash(
            kind=entry.kind,
            object_id=entry.object_id,
            version=entry.version,
            event=entry.event,
            actor=entry.actor,
            at=entry.at,
            policy_version=entry.policy_version,
            state_digest=entry.state_sha256 or "",
            prev_hash=entry.prev_hash,
        )
    fields: dict[str, Any] = {
        "object_id": entry.object_id,
        "version": entry.version,
        "event": entry.event,
        "actor": entry.actor,
        "at": entry.at,
        "policy_version": entry.policy_version,
        "state": entry.state,
        "prev_hash": entry.prev_hash,
    }
    if hash_format == 1:
        return legacy_entry_hash(**fields)
    return entry_hash(kind=entry.kind, **fields)


def state_matches(entry: Entry, hash_format: int) -> bool:
    """Whether the state is the one the entry's hash covers: for format 3, that it has the
    digest the entry keeps (formats 1 and 2 hash the state itself)."""
    return hash_format != 3 or state_sha256(entry.state) == entry.state_sha256
