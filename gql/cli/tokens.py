"""`edgeloom token ...`: create (with an expiry), list, rotate and revoke bearer tokens."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from gql.cli.options import Commands
from policies.loader import is_valid_name
from store.kinds.policy import in_force as policy_store
from store.operations import tokens

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_PART = re.compile(r"(\d+)([smhdw])")


def duration(text: str) -> timedelta:
    """`90s`, `15m`, `12h`, `30d`, `2w`, or several in a row (`1h30m`)."""
    cleaned = text.strip().lower()
    parts = _PART.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; write a number and a unit (s, m, h, d, w), "
            "e.g. 90s, 12h, 30d or 1h30m"
        )
    return timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))


def add_parser(commands: Commands, data_dir: argparse.ArgumentParser) -> None:
    token = commands.add_parser("token", help="manage bearer tokens")
    actions = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        parents=[data_dir],
        help="mint a token for an agent; printed once, alone on the last line",
    )
    create.add_argument("--agent", required=True, help="agent name as declared in the policy")
    create.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="refuse the token once this long has passed (e.g. 12h, 30d, 1h30m; default never)",
    )
    actions.add_parser(
        "list",
        parents=[data_dir],
        help="list tokens: id, agent, created, expires, last used (to the minute), state; "
        "never the secrets",
    )
    rotate = actions.add_parser(
        "rotate",
        parents=[data_dir],
        help="mint a new secret for a token's agent; the old one keeps working for the grace "
        "period, then is refused",
    )
    rotate.add_argument("id", help="the token id, as 'token list' shows it")
    rotate.add_argument(
        "--grace",
        type=duration,
        default=tokens.DEFAULT_GRACE,
        metavar="DURATION",
        help="how long the old secret keeps working (default 1h; 0s refuses it at once)",
    )
    revoke = actions.add_parser(
        "revoke", parents=[data_dir], help="revoke a token by its id (tok_...)"
    )
    revoke.add_argument("id", help="the token id, as 'token list' shows it")


async def run(args: argparse.Namespace, engine: AsyncEngine) -> int:
    if args.token_command == "create":
        return await _create(args, engine)
    if args.token_command == "list":
        for info in await tokens.list_all(engine):
            print("\t".join(_row(info, datetime.now(UTC))))
        return 0
    if args.token_command == "rotate":
        old, new, secret = await tokens.rotate(engine, args.id, args.grace)
        assert old.expires_at is not None
        print(
            f"token {new.id} for agent {new.agent} replaces {old.id}, whose secret works "
            f"until {_at(old.expires_at)} (shown once; store it now):"
        )
        print(secret)
        return 0
    info = await tokens.revoke(engine, args.id)
    print(f"token {info.id} for agent {info.agent} revoked")
    return 0


async def _create(args: argparse.Namespace, engine: AsyncEngine) -> int:
    if not is_valid_name(args.agent):
        print(
            f"edgeloom: agent name {args.agent!r} is not valid; "
            "use lower-case letters, digits and _ (starting with a letter)",
            file=sys.stderr,
        )
        return 2
    in_force = await policy_store.in_force_at(engine.url.render_as_string(hide_password=False))
    if in_force is not None and args.agent not in in_force.policy.agents:
        print(
            f"edgeloom: agent {args.agent!r} is not declared by policy version "
            f"{in_force.version}, so its token would be refused; declared agents: "
            f"{sorted(in_force.policy.agents)}. Add it to the policy first (applyPolicy, "
            "or serve --policy FILE)",
            file=sys.stderr,
        )
        return 2
    info, secret = await tokens.create(engine, args.agent, args.expires_in)
    until = "" if info.expires_at is None else f", refused from {_at(info.expires_at)}"
    print(f"token {info.id} for agent {info.agent}{until} (shown once; store it now):")
    print(secret)
    return 0


def _at(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _row(info: tokens.TokenInfo, now: datetime) -> list[str]:
    """id, agent, created, expires, last used, state."""
    if info.revoked_at is not None:
        state = f"revoked {_at(info.revoked_at)}"
    elif info.expires_at is not None and info.expires_at <= now:
        state = "expired"
    elif info.rotated_to is not None:
        state = f"rotated to {info.rotated_to}, works until {_at(info.expires_at or now)}"
    else:
        state = "active"
    return [
        info.id,
        info.agent,
        _at(info.created_at),
        "never" if info.expires_at is None else _at(info.expires_at),
        "never" if info.last_used_at is None else _at(info.last_used_at),
        state,
    ]
