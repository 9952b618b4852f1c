"""Token lifecycle: expiry, rotation with a grace period, and last use without a write
per request."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

import pytest

from gql.cli.tokens import duration
from store.operations import tokens
from tests.conftest import GatewayFactory
from tests.gql.test_tokens import BAD_TOKEN, run_cli
from tests.support import Gateway, sql

PROFILE = "{ profile { agent } }"


def listed(out: str) -> dict[str, list[str]]:
    """`token list` by id: agent, created, expires, last used, state."""
    rows = [line.split("\t") for line in out.strip().splitlines()]
    assert all(len(row) == 6 for row in rows), rows
    return {row[0]: row[1:] for row in rows}


def secret_of(out: str) -> str:
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("elt_"), out
    return secret


def token_id_of(out: str) -> str:
    return out.split()[1]


@pytest.fixture(scope="module")
async def crm(start_gateway: GatewayFactory, crm_yaml: str) -> Gateway:
    return await start_gateway(policy_yaml=crm_yaml)


async def agent(gateway: Gateway, secret: str) -> str | None:
    body = await gateway.post(PROFILE, token=secret)
    if body.get("errors"):
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", body
        return None
    name: str = body["data"]["profile"]["agent"]
    return name


async def expire_now(gateway: Gateway, token_id: str) -> None:
    """As if the token's time had passed."""
    async with sql(gateway.database_url) as conn:
        await conn.execute(
            "UPDATE tokens SET expires_at = now() - interval '1 second' WHERE id = $1", token_id
        )


def test_durations() -> None:
    assert duration("90s") == timedelta(seconds=90)
    assert duration("12h") == timedelta(hours=12)
    assert duration("1h30m") == timedelta(minutes=90)
    assert duration("2w") == timedelta(days=14)
    assert duration("0s") == timedelta(0)
    for bad in ("", "12", "h", "1.5h", "1y", "-1h", "1h 30m"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration(bad)


async def test_a_token_with_an_expiry_is_refused_once_it_has_passed(crm: Gateway) -> None:
    code, out, err = await run_cli(
        crm.database_url, "token", "create", "--agent", "sales", "--expires-in", "2h"
    )
    assert code == 0, err
    assert ", refused from " in out
    secret, token_id = secret_of(out), token_id_of(out)
    assert await agent(crm, secret) == "sales"
    code, out, err = await run_cli(crm.database_url, "token", "list")
    _, created, expires, _, state = listed(out)[token_id]
    lifetime = datetime.fromisoformat(expires) - datetime.fromisoformat(created)
    assert abs(lifetime - timedelta(hours=2)) < timedelta(seconds=2), (created, expires)
    assert state == "active"

    await expire_now(crm, token_id)
    error = await crm.error(PROFILE, token=secret)
    assert error["extensions"] == {"code": "UNAUTHENTICATED"}
    assert error["message"].startswith("the bearer token expired at "), error
    assert "'edgeloom token create --agent NAME'" in error["message"]
    code, out, err = await run_cli(crm.database_url, "token", "list")
    assert listed(out)[token_id][4] == "expired"
    # Nothing to hand over.
    code, out, err = await run_cli(crm.database_url, "token", "rotate", token_id)
    assert code == 2 and "is revoked or expired" in err, (out, err)


async def test_a_rotated_token_works_through_its_grace_then_is_refused(crm: Gateway) -> None:
    code, out, err = await run_cli(
        crm.database_url, "token", "create", "--agent", "planner", "--expires-in", "30d"
    )
    old_secret, old_id = secret_of(out), token_id_of(out)
    code, out, err = await run_cli(crm.database_url, "token", "rotate", old_id, "--grace", "2h")
    assert code == 0, err
    new_secret, new_id = secret_of(out), token_id_of(out)
    assert f"replaces {old_id}, whose secret works until " in out
    assert new_secret != old_secret and new_id != old_id
    # Both work during the grace period.
    assert await agent(crm, old_secret) == "planner"
    assert await agent(crm, new_secret) == "planner"
    code, out, err = await run_cli(crm.database_url, "token", "list")
    rows = listed(out)
    _, old_created, old_expires, _, old_state = rows[old_id]
    assert old_state == f"rotated to {new_id}, works until {old_expires}"
    grace = datetime.fromisoformat(old_expires) - datetime.now(UTC)
    assert timedelta(hours=1, minutes=59) < grace <= timedelta(hours=2), grace
    # The successor lives as long as the old one was meant to.
    _, created, expires, _, state = rows[new_id]
    lifetime = datetime.fromisoformat(expires) - datetime.fromisoformat(created)
    assert abs(lifetime - timedelta(days=30)) < timedelta(seconds=2)
    assert state == "active"

    # Rotated once, it is not rotated again.
    code, out, err = await run_cli(crm.database_url, "token", "rotate", old_id)
    assert code == 2 and f"already rotated to {new_id}; rotate that one" in err, (out, err)

    await expire_now(crm, old_id)  # the grace period is over
    assert await agent(crm, old_secret) is None
    assert await agent(crm, new_secret) == "planner"

    # With no grace the old secret is refused at once.
    code, out, err = await run_cli(crm.database_url, "token", "rotate", new_id, "--grace", "0s")
    assert code == 0, err
    assert await agent(crm, new_secret) is None
    assert await agent(crm, secret_of(out)) == "planner"


async def test_a_revoked_rotated_token_is_refused_as_before(crm: Gateway) -> None:
    code, out, err = await run_cli(crm.database_url, "token", "create", "--agent", "sales")
    old_secret, old_id = secret_of(out), token_id_of(out)
    code, out, err = await run_cli(crm.database_url, "token", "rotate", old_id)
    assert code == 0, err
    code, out, err = await run_cli(crm.database_url, "token", "revoke", old_id)
    assert code == 0, err
    error = await crm.error(PROFILE, token=old_secret)
    assert error["message"] == BAD_TOKEN


async def test_last_use_is_recorded_at_most_once_a_minute(crm: Gateway) -> None:
    code, out, err = await run_cli(crm.database_url, "token", "create", "--agent", "sales")
    secret, token_id = secret_of(out), token_id_of(out)
    code, out, err = await run_cli(crm.database_url, "token", "list")
    assert listed(out)[token_id][3] == "never"

    async with sql(crm.database_url) as conn:

        async def last_use() -> tuple[datetime | None, int]:
            row = await conn.fetchrow(
                "SELECT max(last_used_at) AS at, count(*) AS n FROM token_uses WHERE token_id = $1",
                token_id,
            )
            assert row is not None
            return row["at"], row["n"]

        assert await agent(crm, secret) == "sales"
        first, rows = await last_use()
        assert first is not None and rows == 1
        for _ in range(5):
            assert await agent(crm, secret) == "sales"
        assert await last_use() == (first, 1)  # no write for the calls within the minute
        code, out, err = await run_cli(crm.database_url, "token", "list")
        assert listed(out)[token_id][3] == first.astimezone(UTC).isoformat(timespec="seconds")

        # A minute later (and in a process that has not recorded it), it is recorded again.
        await conn.execute(
            "UPDATE token_uses SET last_used_at = last_used_at - interval '2 minutes' "
            "WHERE token_id = $1",
            token_id,
        )
        tokens._recorded.pop(token_id)
        assert await agent(crm, secret) == "sales"
        later, rows = await last_use()
        assert later is not None and later > first and rows == 1
