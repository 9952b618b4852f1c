"""Identifier formats: records, edge properties, audit events, tokens."""

from __future__ import annotations

import hashlib
import os
import re

EP_SCHEMA = "epg/1"
# The ledger kind of records (store.kinds.record.kind), for the reads that join the ledger.
RECORD_KIND = "record"
RECORD_ID = re.compile(r"^sr_[0-9a-f]{32}$")
EVENT_ID = re.compile(r"^ae_[0-9a-f]{32}$")
EDGE_ID = re.compile(r"^edge_[0-9a-f]{32}$")
RECORD_PREFIX = re.compile(r"^sr_[0-9a-f]{6,31}$")
MIN_PREFIX = 6


def random_hex() -> str:
    """128 random bits as 32 hex digits (uuid4's format without building a UUID, which a
    large ingestMany would build for every record)."""
    return os.urandom(16).hex()


def new_record_id() -> str:
    return "sr_" + random_hex()


def new_event_id() -> str:
    return "ae_" + random_hex()


def edge_property_id(record_id: str, label: str, value: str) -> str:
    """The deterministic id of one declared edge property on one record."""
    fact = "\x1f".join((record_id, EP_SCHEMA, label, value)).encode("utf-8")
    return "ep_" + hashlib.sha256(fact).hexdigest()[:32]


# The engine's reserved labels and the values it mints for them: <hint>_<32 hex>.
CONNECT = "e_connect"
GROUP = "e_group"
ADJUSTMENT = "e_adjustment"
ASSERTED_LABELS = (CONNECT, GROUP, ADJUSTMENT)
ADJUSTMENT_HINT = "adj"
HINT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ASSERTED_VALUE = re.compile(r"^([A-Za-z0-9_-]{1,64})_([0-9a-f]{32})$")


def new_asserted_value(hint: str) -> str:
    """A fresh value for a connection, group or chain; the hint must match HINT."""
    return f"{hint}_{random_hex()}"


def new_correction_id() -> str:
    return "co_" + random_hex()


def new_edge_id() -> str:
    return "edge_" + random_hex()
