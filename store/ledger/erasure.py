"""How verify and import check erased entries against the erasures that name them.

An erasure entry (event `sr_erased`) names, under `state.erased.entries`, every entry
it erased as {kind, id, version, hash}; each of those entries carries `erased_by`, the
erasure entry as `kind:id:version`, and holds its erased state. An entry of hash format
3 still checks (its hash covers its state's digest, `state_sha256`, which it keeps); its
state no longer has that digest, and is vouched for by the erasure naming it. An entry
of an earlier format cannot be recomputed: it is attested, that is, its hash is the one
the erasure entry recorded (and the next entry's `prev_hash`, as ever). Either way it is
reported as erased, never as tampered. An entry whose state differs from what its hash
covers without an erasure naming it (content removed by hand) is tampered, as is an
`erased_by` that no erasure entry backs, or an erasure naming an entry that was not
erased.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from store.ledger import registry
from store.ledger.entry import Entry
from store.ledger.hashing import state_matches, stored_hash

ERASURE_EVENT = "sr_erased"

_Key = tuple[str, str, int]


def erasure_ref(entry: Entry) -> str:
    """How erased entries and their events name the erasure entry `entry`."""
    return f"{entry.kind}:{entry.object_id}:{entry.version}"


def _name(key: _Key) -> str:
    return f"{registry.describe(key[0], key[1])} v{key[2]}"


@dataclass
class Erasures:
    """What one reading of the ledger (verify, import) learns of erasures."""

    # Erased entries as they say: (kind, id, version) -> (erased_by, hash, recomputed).
    claims: dict[_Key, tuple[str, str, bool]] = field(default_factory=dict)
    # What erasure entries name: (kind, id, version) -> (the erasure, the hash recorded).
    named: dict[_Key, tuple[str, str]] = field(default_factory=dict)

    def check(self, entry: Entry, hash_format: int, erased_by: str | None) -> str | None:
        """Check one entry's hash; the problem, or None (an erased one is settled by
        `problems` once every entry was read)."""
        key = (entry.kind, entry.object_id, entry.version)
        if entry.event == ERASURE_EVENT:
            for named in _named(entry.state):
                self.named[(named["kind"], named["id"], named["version"])] = (
                    erasure_ref(entry),
                    named["hash"],
                )
        if erased_by is not None:
            recomputed = hash_format == 3
            self.claims[key] = (erased_by, entry.hash, recomputed)
            if recomputed and stored_hash(entry, hash_format) != entry.hash:
                return f"{_name(key)}: hash does not match its state's digest"
            return None
        # Format 3: the state must have the digest its hash covers, unless an erasure
        # names it; content changed or removed by hand is tampering all the same.
        if stored_hash(entry, hash_format) != entry.hash or not state_matches(entry, hash_format):
            return f"{_name(key)}: hash does not match content"
        return None

    def problems(self) -> list[str]:
        """Every erased entry is named by the erasure it says, with the hash it carries,
        and every entry an erasure names was erased by it."""
        found = []
        for key, (by, hash, _) in sorted(self.claims.items()):
            named = self.named.get(key)
            if named is None or named[0] != by:
                found.append(
                    f"{_name(key)}: says it was erased by {by}, but no such erasure entry "
                    "names it: its content was removed without an erasure"
                )
            elif named[1] != hash:
                found.append(f"{_name(key)}: its hash is not the one erasure {by} recorded")
        for key, (by, _) in sorted(self.named.items()):
            if key not in self.claims:
                found.append(f"erasure {by} names {_name(key)}, which was not erased by it")
        return found

    def erased(self) -> list[str]:
        """The erased entries, as verify reports them."""
        return [
            f"{_name(key)}: erased by {by} ({'hash recomputed' if re else 'hash attested'})"
            for key, (by, _, re) in sorted(self.claims.items())
        ]


def _named(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    erased = state.get("erased")
    if not isinstance(erased, Mapping):
        return []
    return list(erased.get("entries", ()))
