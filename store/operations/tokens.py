"""Bearer tokens: shown once at creation, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ARRAY, Text, any_, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from store import tables as t
from store.errors import NotFoundError

TOKEN_PREFIX = "elt_"

REVOKED_CHANNEL = "edgeloom_token_revoked"
"""Notified (with the token's id) in the transaction that revokes a token, so that every
gateway listening ends that token's open subscriptions at once."""


@dataclass(frozen=True)
class TokenInfo:
    id: str
    agent: str
    created_at: datetime
    revoked_at: datetime | None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


async def create(engine: AsyncEngine, agent: str) -> tuple[TokenInfo, str]:
    """Mint a token for `agent`; the secret is returned here and never again."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = "tok_" + uuid.uuid4().hex[:16]
    async with engine.begin() as conn:
        row = (
            await conn.execute(
                insert(t.tokens)
                .values(id=token_id, agent=agent, token_hash=_digest(secret), created_at=func.now())
                .returning(t.tokens.c.created_at)
            )
        ).one()
    return TokenInfo(token_id, agent, row[0], None), secret


async def list_all(engine: AsyncEngine) -> list[TokenInfo]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(
                t.tokens.c.id, t.tokens.c.agent, t.tokens.c.created_at, t.tokens.c.revoked_at
            ).order_by(t.tokens.c.created_at)
        )
        return [TokenInfo(*row) for row in rows]


async def revoke(engine: AsyncEngine, token_id: str) -> TokenInfo:
    async with engine.begin() as conn:
        row = (
            await conn.execute(
                update(t.tokens)
                .where(t.tokens.c.id == token_id)
                .values(revoked_at=func.coalesce(t.tokens.c.revoked_at, func.now()))
                .returning(
                    t.tokens.c.id, t.tokens.c.agent, t.tokens.c.created_at, t.tokens.c.revoked_at
                )
            )
        ).one_or_none()
        if row is not None:
            # Delivered on commit, to every listener of the database: each gateway's feed.
            await conn.execute(select(func.pg_notify(REVOKED_CHANNEL, token_id)))
    if row is None:
        raise NotFoundError("token", token_id)
    return TokenInfo(*row)


async def agent_for(engine: AsyncEngine, secret: str) -> str | None:
    """The agent a live token belongs to, or None for an unknown or revoked token."""
    async with engine.connect() as conn:
        return (
            await conn.execute(
                select(t.tokens.c.agent).where(
                    t.tokens.c.token_hash == _digest(secret), t.tokens.c.revoked_at.is_(None)
                )
            )
        ).scalar_one_or_none()


async def agents_for(engine: AsyncEngine, secrets: Collection[str]) -> dict[str, str | None]:
    """`agent_for` of each secret, in one statement (None: unknown or revoked)."""
    if not secrets:
        return {}
    digests = {_digest(secret): secret for secret in secrets}
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(t.tokens.c.token_hash, t.tokens.c.agent).where(
                # One array parameter, however many tokens are held.
                t.tokens.c.token_hash == any_(bindparam("digests", list(digests), ARRAY(Text))),
                t.tokens.c.revoked_at.is_(None),
            )
        )
        live = {digests[token_hash]: agent for token_hash, agent in rows}
    return {secret: live.get(secret) for secret in secrets}


async def active_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                select(func.count()).select_from(t.tokens).where(t.tokens.c.revoked_at.is_(None))
            )
        ).scalar_one()
