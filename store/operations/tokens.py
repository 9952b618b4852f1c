"""Bearer tokens: shown once at creation, stored only as a SHA-256 hash.

A token may expire (`create(expires_in=)`); `rotate` mints its successor and lets the
old secret work for a grace period, then refuses it. Each token's last use is recorded
at most once a minute (`check`), never a write on every request.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Text,
    and_,
    any_,
    bindparam,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as upsert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store import tables as t
from store.errors import NotFoundError, StoreError

TOKEN_PREFIX = "elt_"

REVOKED_CHANNEL = "edgeloom_token_revoked"
"""Notified (with the token's id) in the transaction that revokes a token, so that every
gateway listening ends that token's open subscriptions at once."""


# A token's use is recorded when the last record is older than this.
USE_RESOLUTION = timedelta(minutes=1)
DEFAULT_GRACE = timedelta(hours=1)


@dataclass(frozen=True)
class TokenInfo:
    id: str
    agent: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    rotated_to: str | None = None
    last_used_at: datetime | None = None


@dataclass(frozen=True)
class Checked:
    """What a secret names: its token and agent, or None; `expired_at` when it named a
    token that has expired (then `agent` is None)."""

    token_id: str | None
    agent: str | None
    expired_at: datetime | None = None


class TokenRotationError(StoreError):
    """A token that cannot be rotated: already rotated, revoked or expired."""

    code = "CONFLICT"


_INFO = (
    t.tokens.c.id,
    t.tokens.c.agent,
    t.tokens.c.created_at,
    t.tokens.c.revoked_at,
    t.tokens.c.expires_at,
    t.tokens.c.rotated_to,
)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _live() -> ColumnElement[bool]:
    """Neither revoked nor expired."""
    return and_(
        t.tokens.c.revoked_at.is_(None),
        or_(t.tokens.c.expires_at.is_(None), t.tokens.c.expires_at > func.now()),
    )


async def _insert(
    conn: AsyncConnection, agent: str, expires_in: timedelta | None
) -> tuple[TokenInfo, str]:
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token_id = "tok_" + uuid.uuid4().hex[:16]
    expires_at = None if expires_in is None else func.now() + expires_in
    row = (
        await conn.execute(
            insert(t.tokens)
            .values(
                id=token_id,
                agent=agent,
                token_hash=_digest(secret),
                created_at=func.now(),
                expires_at=expires_at,
            )
            .returning(*_INFO)
        )
    ).one()
    return TokenInfo(*row), secret


async def create(
    engine: AsyncEngine, agent: str, expires_in: timedelta | None = None
) -> tuple[TokenInfo, str]:
    """Mint a token for `agent`, refused once `expires_in` has passed (None: never);
    the secret is returned here and never again."""
    if expires_in is not None and expires_in <= timedelta(0):
        raise ValueError("a token's lifetime must be longer than zero")
    async with engine.begin() as conn:
        return await _insert(conn, agent, expires_in)


async def rotate(
    engine: AsyncEngine, token_id: str, grace: timedelta = DEFAULT_GRACE
) -> tuple[TokenInfo, TokenInfo, str]:
    """Mint the successor of a live token (same agent; as long a lifetime as the old one
    had, if it had one) and let the old secret work for `grace` more, then refuse it.
    Returns the old token (as it now is), the new one and its secret."""
    if grace < timedelta(0):
        raise ValueError("the grace period cannot be negative")
    async with engine.begin() as conn:
        row = (
            await conn.execute(
                select(*_INFO, _live().label("live"))
                .where(t.tokens.c.id == token_id)
                .with_for_update()
            )
        ).one_or_none()
        if row is None:
            raise NotFoundError("token", token_id)
        old = TokenInfo(*row[:-1])
        if old.rotated_to is not None:
            raise TokenRotationError(
                f"token {token_id} was already rotated to {old.rotated_to}; rotate that one"
            )
        if not row.live:
            raise TokenRotationError(
                f"token {token_id} is revoked or expired, so it has nothing to hand over; "
                "mint a new one with 'edgeloom token create --agent NAME'"
            )
        lifetime = None if old.expires_at is None else old.expires_at - old.created_at
        new, secret = await _insert(conn, old.agent, lifetime)
        ends = func.now() + grace
        if old.expires_at is not None:
            ends = func.least(t.tokens.c.expires_at, ends)
        updated = (
            await conn.execute(
                update(t.tokens)
                .where(t.tokens.c.id == token_id)
                .values(expires_at=ends, rotated_to=new.id)
                .returning(*_INFO)
            )
        ).one()
    return TokenInfo(*updated), new, secret


async def list_all(engine: AsyncEngine) -> list[TokenInfo]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(*_INFO, t.token_uses.c.last_used_at)
            .select_from(t.tokens.outerjoin(t.token_uses))
            .order_by(t.tokens.c.created_at)
        )
        return [TokenInfo(*row) for row in rows]


async def revoke(engine: AsyncEngine, token_id: str) -> TokenInfo:
    async with engine.begin() as conn:
        row = (
            await conn.execute(
                update(t.tokens)
                .where(t.tokens.c.id == token_id)
                .values(revoked_at=func.coalesce(t.tokens.c.revoked_at, func.now()))
                .returning(*_INFO)
            )
        ).one_or_none()
        if row is not None:
            # Delivered on commit, to every listener of the database: each gateway's feed.
            await conn.execute(select(func.pg_notify(REVOKED_CHANNEL, token_id)))
    if row is None:
        raise NotFoundError("token", token_id)
    return TokenInfo(*row)


# When this process last recorded each token's use (monotonic seconds): concurrent
# requests with one token make one write, not one each.
_recorded: dict[str, float] = {}


async def check(engine: AsyncEngine, secret: str) -> Checked:
    """The token and agent of a live secret, and its use recorded if the last record is
    over a minute old; for an expired one, when it expired; else nothing."""
    recent = t.token_uses.c.last_used_at > func.now() - USE_RESOLUTION
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(
                    t.tokens.c.id,
                    t.tokens.c.agent,
                    t.tokens.c.expires_at,
                    (t.tokens.c.expires_at <= func.now()).label("expired"),
                    recent.label("recent"),
                )
                .select_from(t.tokens.outerjoin(t.token_uses))
                .where(t.tokens.c.token_hash == _digest(secret), t.tokens.c.revoked_at.is_(None))
            )
        ).one_or_none()
        if row is None:
            return Checked(None, None)
        if row.expired:
            return Checked(row.id, None, row.expires_at)
        if not row.recent and _due(row.id):
            await _record_use(conn, row.id)
    return Checked(row.id, row.agent)


def _due(token_id: str) -> bool:
    now = time.monotonic()
    last = _recorded.get(token_id)
    if last is not None and now - last < USE_RESOLUTION.total_seconds():
        return False
    if len(_recorded) > 10_000:
        _recorded.clear()
    _recorded[token_id] = now
    return True


async def _record_use(conn: AsyncConnection, token_id: str) -> None:
    statement = upsert(t.token_uses).values(token_id=token_id, last_used_at=func.now())
    await conn.execute(
        statement.on_conflict_do_update(
            index_elements=[t.token_uses.c.token_id],
            set_={"last_used_at": func.now()},
            # Another process may have recorded it since this one read it.
            where=t.token_uses.c.last_used_at <= func.now() - USE_RESOLUTION,
        )
    )
    await conn.commit()


async def agent_for(engine: AsyncEngine, secret: str) -> str | None:
    """The agent a live token belongs to, or None for an unknown, revoked or expired token."""
    return (await check(engine, secret)).agent


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
                _live(),
            )
        )
        live = {digests[token_hash]: agent for token_hash, agent in rows}
    return {secret: live.get(secret) for secret in secrets}


async def active_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return (
            await conn.execute(select(func.count()).select_from(t.tokens).where(_live()))
        ).scalar_one()
