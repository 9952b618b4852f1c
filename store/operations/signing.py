"""Signing checkpoints with a key kept outside the database.

A database owner can rewrite entries and recompute every hash, checkpoints included;
what the owner cannot do without the key file is sign the result. The key is an
Ed25519 private key in a PEM file (created with mode 0600 at first use); beside it,
`<key>.head` records, for each memory (database) the key signs for, the newest
checkpoint it signed there, so deleting or rolling back checkpoints is detected too.
A memory is named by where it lives (host, port, database), which the database owner
cannot change from inside the database.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

log = logging.getLogger("edgeloom.checkpoints")


def message(seq: int, covers: str, entries: int, prev_hash: str | None, digest: str) -> bytes:
    """The bytes the signature of a checkpoint of `signed_format` 1 covers (one taken
    before every field was signed; `store.operations.checkpoints` builds those of later formats)."""
    return lines("edgeloom-checkpoint/1", seq, covers, entries, prev_hash or "", digest)


def lines(*fields: object) -> bytes:
    """Fields, none holding a newline, as the lines of signed bytes."""
    return "".join(f"{field}\n" for field in fields).encode()


@dataclass(frozen=True)
class Signer:
    """A checkpoint key: signs new checkpoints, checks old ones, remembers the newest."""

    key: Ed25519PrivateKey
    path: Path
    memory: str

    @property
    def key_id(self) -> str:
        raw = self.key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return hashlib.sha256(raw).hexdigest()[:16]

    def sign(self, payload: bytes) -> str:
        return base64.b64encode(self.key.sign(payload)).decode()

    def valid(self, payload: bytes, signature: str) -> bool:
        try:
            self.key.public_key().verify(base64.b64decode(signature), payload)
        except (InvalidSignature, ValueError):
            return False
        return True

    @property
    def head_path(self) -> Path:
        return self.path.with_name(self.path.name + ".head")

    def remember(self, seq: int, digest: str) -> None:
        """Record the newest checkpoint signed here, unless a newer one is recorded."""
        heads = self._heads()
        known = heads.get(self.memory)
        if known is not None and known["seq"] >= seq:
            return
        heads[self.memory] = {"seq": seq, "hash": digest}
        tmp = self.head_path.with_name(self.head_path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(heads, indent=1, sort_keys=True))
        os.replace(tmp, self.head_path)

    def newest(self) -> tuple[int, str] | None:
        known = self._heads().get(self.memory)
        return None if known is None else (int(known["seq"]), str(known["hash"]))

    def _heads(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.head_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def memory_of(url: str) -> str:
    """Where a memory lives, as the key's head file names it (no user, no password)."""
    parts = urlsplit(url)
    host = parts.hostname or dict(parse_qsl(parts.query)).get("host", "local")
    return f"{host}:{parts.port or 5432}{parts.path}"


def load(path: Path, memory: str) -> Signer | None:
    """The key in `path`, signing for the memory named `memory` (see `memory_of`);
    None when there is no such file."""
    try:
        pem = path.read_bytes()
    except FileNotFoundError:
        return None
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} holds no Ed25519 private key")
    return Signer(key, path, memory)


def create(path: Path, memory: str) -> Signer:
    """A new key in `path` (readable by its owner only), which must not exist yet.

    Every creation is logged: checkpoints signed by an earlier key at the same path can no
    longer be checked against it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # Written whole under another name, then linked into place (refused when the file
    # exists): a process starting beside this one never reads half a key.
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(8)}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    made = Signer(key, path, memory)
    log.warning("created the checkpoint key %s (key id %s)", path, made.key_id)
    return made


def load_or_create(path: Path, memory: str) -> Signer:
    """The key in `path`, made (readable by its owner only) when the file does not exist,
    signing for the memory named `memory` (see `memory_of`)."""
    found = load(path, memory)
    if found is not None:
        return found
    try:
        return create(path, memory)
    except FileExistsError:
        # Another process (a worker started beside this one) made it first.
        found = load(path, memory)
        assert found is not None
        return found
