"""The policy a gateway starts under: the one its settings name, or the development one."""

from __future__ import annotations

import logging
from typing import Any

from gql.server.settings import Settings
from policies.loader import DEV_POLICY_YAML, load_policy
from store.kinds.policy import in_force as policy_store
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.policy.in_force import PolicyCache, PolicyVersion
from store.kinds.record import vectors, words
from store.ledger.executor import Executor
from store.pool import Pool
from store.reads import lane_floor

log = logging.getLogger("edgeloom")

DEV_POLICY_ACTOR = "operator:development-default"
DEV_AGENT = "dev"


async def development_lineage(conn: Any) -> bool:
    """Whether a gateway started without a policy file serves the policy in force to the
    tokenless agent `dev`: the development policy is in force, or every version since the
    last development one was applied by `dev` (with `applyPolicy` in that development
    session, as the README's first session does). A version an operator applied
    (`serve --policy`) or another agent did ends it: from there every call needs a token.
    No policy yet counts too: a first start applies the development one. A policy in
    force that no longer declares `dev` ends it as well."""
    versions = await policy_store.appliers(conn)
    if versions and DEV_AGENT not in load_policy(versions[0][2], "the policy in force").agents:
        return False
    for _version, applied_by, yaml in versions:
        if yaml == DEV_POLICY_YAML:
            return True
        if applied_by != DEV_AGENT:
            return False
    return True


async def ensure_policy(executor: Executor, settings: Settings) -> PolicyVersion | None:
    """Apply the policy `settings` names (or the development one, if none is in force and
    the gateway is a development one); the policy in force after it."""
    cache = executor.policies
    assert isinstance(cache, PolicyCache)  # the gateway's executor reads policies from one
    if settings.policy_yaml is not None:
        before = await policy_store.current(executor.pool, cache)
        if before is not None and before.yaml != settings.policy_yaml:
            log.warning(
                "policy file %s replaces version %s (applied by %s at %s)",
                settings.policy_source,
                before.version,
                before.applied_by,
                before.applied_at.isoformat(),
            )
        actor = DEV_POLICY_ACTOR if settings.policy_yaml == DEV_POLICY_YAML else "operator"
        command = ApplyPolicy(settings.policy_yaml, settings.policy_source, None, cache)
        applied = await executor.execute(actor, command, lane_floor.CROSSING)
        log.info("policy version %s in force (%s)", applied.version, settings.policy_source)
        return applied
    current = await policy_store.current(executor.pool, cache)
    if current is None and settings.anonymous_agent is not None:
        command = ApplyPolicy(DEV_POLICY_YAML, "development policy", None, cache)
        current = await executor.execute(DEV_POLICY_ACTOR, command, lane_floor.CROSSING)
        log.info("development policy version %s in force", current.version)
    return current


async def note_search_languages(pool: Pool, version: PolicyVersion | None) -> None:
    """At start, index each lane without words yet in the language the policy declares,
    and say once which lanes' words are in another: rebuilding them is an operator's
    command (`edgeloom search-languages`), never a start's work."""
    if version is None:
        return
    async with pool.acquire() as conn, lane_floor.crossing(conn):
        for name, lane in sorted(version.policy.lanes.items()):
            indexed = await words.language(conn, name)
            if indexed == lane.text_search:
                continue
            if await words.adopt_if_empty(conn, name, lane.text_search):
                log.info("lane %s: words indexed in %s from now on", name, lane.text_search)
            else:
                log.warning(
                    "lane %s: the policy declares text_search %s but its words are indexed in "
                    "%s; searches of it use %s until `edgeloom search-languages` rebuilds them",
                    name,
                    lane.text_search,
                    indexed,
                    indexed,
                )


async def note_vector_search(pool: Pool, version: PolicyVersion | None) -> str | None:
    """At start: whether this memory can search by vector (None: it can; else why not,
    said once here), and each lane's vectors of the size the policy declares indexed."""
    async with pool.acquire() as conn:
        off = await vectors.availability(conn)
        if off is not None:
            log.warning("%s", off)
            return off
        declared = version.policy.lanes.items() if version is not None else ()
        for name, lane in sorted(declared):
            if lane.embedding is not None:
                await vectors.index_lane(conn, name, lane.embedding.dimensions)
    return None
