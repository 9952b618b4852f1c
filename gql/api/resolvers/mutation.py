"""Mutation resolvers: each turns its input into one command for the ledger."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Annotated, Any

import strawberry

from gql.api import descriptions as d
from gql.api.correction_types import Correction
from gql.api.inputs import IngestInput, expiry, ingest_command
from gql.api.intake_types import FileInput, IntakeReport
from gql.api.policy_types import PolicyVersion
from gql.api.resolvers.edges import EdgeMutation
from gql.api.types import (
    AdjustmentChain,
    Connection,
    Group,
    Info,
    PropertyChange,
    Record,
    load_one,
)
from policies.properties import Property, parse_property
from store.errors import NotFoundError
from store.ids import ADJUSTMENT, CONNECT, GROUP
from store.intake.run import DEFAULT_FOLDER, Intake
from store.intake.sources import IN_PARTS, Covered, SentSource
from store.kinds.correction.commands import Correct
from store.kinds.policy.commands import ApplyPolicy
from store.kinds.record import asserted, asserted_commands, commands, erase, retire
from store.kinds.record import embedding as vectors
from store.kinds.record.model import declared
from store.ledger.command import Command
from store.limits import MAX_BATCH


def _arg(text: str) -> Any:
    return strawberry.argument(description=text)


async def _end(info: Info, command: Command[Property], ident: str, label: str) -> Property:
    """Run a command ending (part of) a connection, group or chain; one that finds it
    ended already says so, where it would say that no such thing exists."""
    try:
        return await info.context.execute(command)
    except NotFoundError as exc:
        if exc.ident != ident:
            raise  # a record it names
        prop = asserted_commands.parse_asserted(ident, label)
        async with info.context.read() as (db, lanes):
            ended = await asserted.ended_already(db, prop, lanes, ident)
        if ended is None:
            raise
        raise ended from None


@strawberry.type(
    description="What can be written: each mutation is one command, decided by the guard and "
    "written in one ledger transaction with its audit events; a change that changes nothing "
    "writes nothing."
)
class Mutation(EdgeMutation):
    @strawberry.mutation(
        description="Write one record as version 1 (event sr_ingested). Refused when you "
        "cannot write its lane or its source type does not allow its labels or content; the "
        "message names what is allowed."
    )
    async def ingest(
        self, info: Info, input: Annotated[IngestInput, _arg("The record to write.")]
    ) -> Record:
        [record] = await info.context.execute(ingest_command([input]))
        return Record.written(record)

    @strawberry.mutation(
        description="Write many records in one transaction: all or nothing (the first refusal "
        "refuses the whole batch)."
    )
    async def ingest_many(
        self,
        info: Info,
        inputs: Annotated[list[IngestInput], _arg("The records to write. " + d.BATCH)],
    ) -> list[Record]:
        records = await info.context.execute(ingest_command(inputs))
        written = Counter(p for r in records for p in set(declared(r.state.properties)))
        return [Record.written(r, written) for r in records]

    @strawberry.mutation(
        description="A new version (event sr_updated) with new content and/or new values for "
        "the labels named: each label named has all its values replaced, labels not named "
        "stay. Checked against the lane's source type like ingest."
    )
    async def update(
        self,
        info: Info,
        id: Annotated[strawberry.ID, _arg(d.RECORD_ID)],
        content: Annotated[
            str | None, _arg("The new content; omit it to keep the content. " + d.CONTENT)
        ] = None,
        properties: Annotated[
            list[str] | None,
            _arg(
                "label:value strings; the labels they name get exactly these values. "
                + d.PROPERTY_RULES
            ),
        ] = None,
        expected_version: Annotated[
            int | None,
            _arg(
                "The version you last read: refused (CONFLICT) when the record has moved on "
                "since, so a concurrent change is never overwritten. Omit it to update "
                "whatever version is current."
            ),
        ] = None,
        embedding: Annotated[
            list[float] | None,
            _arg(
                d.EMBEDDING + " Omit it to keep the record's vector while its content stays; "
                "new content without one drops the old content's vector."
            ),
        ] = None,
        expires_at: Annotated[datetime | None, _arg(d.EXPIRES_AT)] = None,
        expire_now: Annotated[bool | None, _arg(d.EXPIRE_NOW)] = None,
    ) -> Record:
        command = commands.Update(
            record_id=id,
            content=content,
            properties=None if properties is None else tuple(properties),
            expected_version=expected_version,
            embedding=None if embedding is None else vectors.pack(embedding),
            expiry=expiry(expires_at, expire_now),
        )
        record = await info.context.execute(command)
        named = {parse_property(p).label for p in properties or ()}
        given = [p for p in declared(record.state.properties) if p.label in named]
        return Record.written(record, dict.fromkeys(given, 1))

    @strawberry.mutation(
        description="Add edge properties as a new version (one property_added event per "
        "value). Add-only: values already held come back under alreadyHeld, reserved (e_*) "
        "labels under rejected. On a closed lane the label must be one of its source types' "
        "labels (values are not checked here)."
    )
    async def add_properties(
        self,
        info: Info,
        id: Annotated[strawberry.ID, _arg(d.RECORD_ID)],
        properties: Annotated[list[str], _arg("label:value strings to add. " + d.PROPERTY_RULES)],
    ) -> PropertyChange:
        command = commands.AddProperties(record_id=id, properties=tuple(properties))
        return PropertyChange.from_domain(await info.context.execute(command))

    @strawberry.mutation(
        description="Remove whole labels and/or single label:value properties, as a new version "
        "(one property_removed event per value); what the record did not carry comes back "
        "under notHeld. Reserved labels are refused: disconnect, ungroup and unadjust remove "
        "them."
    )
    async def remove_properties(
        self,
        info: Info,
        id: Annotated[strawberry.ID, _arg(d.RECORD_ID)],
        labels: Annotated[list[str] | None, _arg("Labels to remove with all their values.")] = None,
        properties: Annotated[
            list[str] | None, _arg("Single label:value properties to remove.")
        ] = None,
    ) -> PropertyChange:
        command = commands.RemoveProperties(
            record_id=id, labels=tuple(labels or ()), properties=tuple(properties or ())
        )
        return PropertyChange.from_domain(await info.context.execute(command))

    @strawberry.mutation(
        description="Connect exactly two records: the engine mints e_connect:<hint>_<32 hex> "
        "and writes it on both, as a new version of each (event connected). Needs write "
        "access to both lanes. Use it for a relation between two records, rather than a "
        "label naming the other."
    )
    async def connect(
        self,
        info: Info,
        a: Annotated[strawberry.ID, _arg("One record. " + d.RECORD_ID)],
        b: Annotated[strawberry.ID, _arg("The other record, not a. " + d.RECORD_ID)],
        hint: Annotated[str, _arg(d.HINT_RULE)],
    ) -> Connection:
        prop = await info.context.execute(asserted_commands.Connect(a, b, hint))
        return await load_one(info, prop)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Remove a connection from both its records, as a new version of each "
        "(event disconnected); the connection is returned ended."
    )
    async def disconnect(
        self,
        info: Info,
        id: Annotated[str, _arg("The connection, e_connect:<hint>_<32 hex>, as connect gave.")],
    ) -> Connection:
        prop = await _end(info, asserted_commands.Disconnect(id), id, CONNECT)
        return await load_one(info, prop)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Group two or more records: the engine mints e_group:<hint>_<32 hex> "
        "and writes it on each, as a new version of each (event grouped). Needs write access "
        "to every member's lane."
    )
    async def group(
        self,
        info: Info,
        record_ids: Annotated[
            list[strawberry.ID], _arg("The members, two or more. " + d.RECORD_ID + " " + d.BATCH)
        ],
        hint: Annotated[str, _arg(d.HINT_RULE)],
    ) -> Group:
        command = asserted_commands.Group(tuple(record_ids), hint)
        return await load_one(info, await info.context.execute(command))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Remove the named members, or dissolve the group when none are named; "
        "a group left with fewer than two members is dissolved."
    )
    async def ungroup(
        self,
        info: Info,
        id: Annotated[str, _arg("The group, e_group:<hint>_<32 hex>, as group gave.")],
        record_ids: Annotated[
            list[strawberry.ID] | None,
            _arg("The members to remove; omit it to dissolve the group. " + d.RECORD_ID),
        ] = None,
    ) -> Group:
        command = asserted_commands.Ungroup(id, None if record_ids is None else tuple(record_ids))
        return await load_one(info, await _end(info, command, id, GROUP))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Take a record off an adjustment chain; a chain left with one record ends."
    )
    async def unadjust(
        self,
        info: Info,
        record_id: Annotated[strawberry.ID, _arg("The record to take off. " + d.RECORD_ID)],
        adjustment: Annotated[
            str, _arg("The chain, e_adjustment:<hint>_<32 hex>, as the record's adjustments show.")
        ],
    ) -> AdjustmentChain:
        command = asserted_commands.Unadjust(record_id, adjustment)
        ended = await _end(info, command, adjustment, ADJUSTMENT)
        return await load_one(info, ended)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Attach a correction to a record; the record and its versions stay as written."
    )
    async def correct(
        self,
        info: Info,
        record_id: Annotated[strawberry.ID, _arg("The record to correct. " + d.RECORD_ID)],
        content: Annotated[str, _arg("What is correct instead. " + d.CONTENT)],
        reason: Annotated[str | None, _arg("Why, for whoever reads it later.")] = None,
    ) -> Correction:
        made = await info.context.execute(Correct(record_id, content, reason))
        return Correction.from_domain(made)

    @strawberry.mutation(
        description="Forget a record: a tombstone version (never a delete), event "
        "sr_retired; its typed edges are retired with it in the same transaction. From then "
        "on every current read leaves it out (record(id) says it is retired, with when, by "
        "whom and why); every read asOf an earlier instant shows it as it was. Needs write "
        "access to its lane; retiring a retired record changes nothing and is refused with "
        "code CONFLICT saying so."
    )
    async def retire_record(
        self,
        info: Info,
        id: Annotated[strawberry.ID, _arg("The record to retire. " + d.RECORD_ID)],
        reason: Annotated[str | None, _arg("Why it is retired; kept on the tombstone.")] = None,
    ) -> Record:
        return Record.from_domain(await info.context.execute(retire.RetireRecord(id, reason)))

    @strawberry.mutation(
        description="Bring a retired record back as it was: a new version, event "
        "sr_restored; its edge properties hold again from now on, and its connections, "
        "groups and chains but those that ended meanwhile (named in the event's payload "
        "under ended); its typed edges stay retired. Needs write access to its lane; "
        "restoring a record that is not retired changes nothing and is refused with code "
        "CONFLICT saying so."
    )
    async def restore_record(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID,
            _arg(
                "The retired record to restore: its exact id, or a unique prefix among "
                "your readable records, retired ones included."
            ),
        ],
    ) -> Record:
        return Record.from_domain(await info.context.execute(retire.RestoreRecord(id)))

    @strawberry.mutation(
        description="Erase a record: its content leaves every version of it, and what was "
        "derived from it (its words and vectors in search, its tags, the evidence of typed "
        "edges to or from it, its corrections' content and reason, its events' payloads, "
        "exports taken afterwards); its edge "
        "properties too unless its lane's policy says they are not personal "
        "(properties_personal: false). What stays: its id, its versions' metadata (who, "
        "when, which event), and its erasure: a new version, event sr_erased, a tombstone "
        "naming who, when, why, under which policy version, and every entry it erased with "
        "its hash, so verify still checks every chain. Allowed only to an agent whose "
        "profile has erase: true (the refusal names them), with write access to the "
        "record's lane; a record you may not read answers as a missing one; erasing an "
        "erased record is refused with code CONFLICT naming the erasure; an erased record "
        "cannot be restored."
    )
    async def erase_record(
        self,
        info: Info,
        id: Annotated[
            strawberry.ID,
            _arg(
                "The record to erase: its exact id, or a unique prefix among your readable "
                "records, retired ones included."
            ),
        ],
        reason: Annotated[
            str, _arg("Why it is erased (required); kept on the erasure entry and its event.")
        ],
    ) -> Record:
        return Record.from_domain(await info.context.execute(erase.EraseRecord(id, reason)))

    @strawberry.mutation(
        description="Build or refresh memory from a folder's files, as `edgeloom intake` does: "
        "one record for the folder, one per file and per part, detected edges; a file the "
        "policy refuses is reported and the others are written. A file the call does not "
        "send is left as it is, unless the call says it is complete for its path (`complete`)."
    )
    async def intake_folder(
        self,
        info: Info,
        lane: Annotated[str, _arg("The lane to write in; you must read and write it.")],
        files: Annotated[
            list[FileInput], _arg("The folder's files (at most 1,000 a call), paths relative.")
        ],
        dry_run: Annotated[
            bool | None, _arg("Write nothing; report what a call would write.")
        ] = False,
        folder: Annotated[
            str | None,
            _arg(
                "The folder's name, which a later call finds it by "
                f"(default '{DEFAULT_FOLDER}'); the CLI uses the folder's own name."
            ),
        ] = None,
        complete: Annotated[
            bool | None,
            _arg(
                "True: the files sent are every file of the folder (of the range "
                "`pathsAfter`..`pathsThrough` when given), so the folder's files of that "
                "range not sent are retired, as the CLI's walk retires removed files. False "
                f"(the default): nothing not sent is retired. Over {MAX_BATCH:,} files: "
                f"{IN_PARTS}."
            ),
        ] = False,
        paths_after: Annotated[
            str | None,
            _arg(
                "With complete: the range starts after this path (code point order); the "
                "previous part's last path."
            ),
        ] = None,
        paths_through: Annotated[
            str | None,
            _arg(
                "With complete: the range ends at this path, included; this part's last "
                "path (none for the last part: to the end)."
            ),
        ] = None,
    ) -> IntakeReport:
        covered = Covered(bool(complete), paths_after, paths_through)
        source = SentSource([f.to_domain() for f in files], covered)
        ctx = info.context
        version = await ctx.policy()
        async with ctx.read() as (db, _):
            done = await Intake(
                source,
                lane,
                folder or DEFAULT_FOLDER,
                ctx.agent_name(),
                version,
                db,
                ctx.execute,
                dry_run=bool(dry_run),
            ).run()
        return IntakeReport.from_domain(done)

    @strawberry.mutation(
        description="Apply a new policy version (agents with apply_policy only; others are "
        "refused FORBIDDEN). A bad policy is refused naming the key and what is allowed."
    )
    async def apply_policy(
        self,
        info: Info,
        yaml: Annotated[
            str, _arg("The whole policy as YAML (lanes, source types, agents); see docs/policy.md.")
        ],
    ) -> PolicyVersion:
        ctx = info.context
        command = ApplyPolicy(yaml, "applyPolicy", ctx.agent_name(), ctx.services.policies)
        return PolicyVersion.from_domain(await ctx.execute(command))
