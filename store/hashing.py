"""The ledger's hash chain: each entry's hash covers its content and the previous hash."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any


def entry_hash(
    *,
    record_id: str,
    version: int,
    event: str,
    actor: str,
    at: datetime,
    policy_version: int,
    state: dict[str, Any],
    prev_hash: str | None,
) -> str:
    body = {
        "record_id": record_id,
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
