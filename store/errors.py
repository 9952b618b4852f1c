"""Errors the store raises; the GraphQL layer maps each to an error code."""

from __future__ import annotations

import re
from datetime import datetime


class StoreError(Exception):
    """Base of every error the store raises on purpose."""

    code = "BAD_USER_INPUT"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def extensions(self) -> dict[str, object]:
        return {}


class NotFoundError(StoreError):
    """No record (or event, or token) the caller may see has that id."""

    code = "NOT_FOUND"

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"no {kind} with id '{ident}' exists or is readable by you")
        self.kind = kind
        self.ident = ident

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident}


def _retirement(at: datetime, actor: str, reason: str | None) -> dict[str, object]:
    return {"at": at.isoformat(), "actor": actor, "reason": reason}


def _said(at: datetime, actor: str, reason: str | None) -> str:
    why = f"reason: {reason}" if reason else "no reason given"
    return f"at {at.isoformat()} by {actor} ({why})"


class RetiredRecordError(NotFoundError):
    """The record was retired: absent from every current read, as if it did not exist,
    but its readers are told when, by whom and why."""

    def __init__(self, ident: str, at: datetime, actor: str, reason: str | None) -> None:
        StoreError.__init__(
            self,
            f"record '{ident}' was retired {_said(at, actor, reason)}; every current read "
            f"leaves it out: read it as it was with asOf before {at.isoformat()}, or bring "
            "it back with restoreRecord",
        )
        self.kind = "record"
        self.ident = ident
        self.retired = _retirement(at, actor, reason)

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident, "retired": self.retired}


class AlreadyRetiredError(StoreError):
    """retireRecord on a record that is retired already: nothing changed."""

    code = "CONFLICT"

    def __init__(self, ident: str, at: datetime, actor: str, reason: str | None) -> None:
        super().__init__(
            f"record '{ident}' is retired already, {_said(at, actor, reason)}; nothing "
            "changed (restoreRecord brings it back)"
        )
        self.ident = ident
        self.retired = _retirement(at, actor, reason)

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident, "retired": self.retired}


class AlreadyErasedError(StoreError):
    """eraseRecord on a record that is erased already: nothing changed."""

    code = "CONFLICT"

    def __init__(self, ident: str, at: datetime, actor: str | None, reason: str) -> None:
        super().__init__(
            f"record '{ident}' was erased already, {_said(at, actor or '', reason)}; "
            "nothing changed (an erasure is final: its entry names what it erased)"
        )
        self.ident = ident
        self.erased = _retirement(at, actor or "", reason)

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident, "erased": self.erased}


class NotRestorableError(StoreError):
    """restoreRecord on an erased record: its content is gone."""

    code = "CONFLICT"

    def __init__(self, ident: str) -> None:
        super().__init__(
            f"record '{ident}' was erased; its content is gone from every version and it "
            "cannot be restored (ingest a new record instead)"
        )
        self.ident = ident

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident}


class EndedAlreadyError(StoreError):
    """Ending a connection, group or adjustment chain that has ended already: nothing
    changed."""

    code = "CONFLICT"

    def __init__(self, kind: str, ident: str, at: datetime, actor: str) -> None:
        super().__init__(
            f"{kind} '{ident}' has ended already, at {at.isoformat()} by {actor}; nothing "
            "changed (it is still read as it was when it ended)"
        )
        self.ident = ident
        self.ended = {"at": at.isoformat(), "actor": actor}

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident, "ended": self.ended}


class NotRetiredError(StoreError):
    """restoreRecord on a record that is not retired: nothing changed."""

    code = "CONFLICT"

    def __init__(self, ident: str) -> None:
        super().__init__(
            f"record '{ident}' is not retired; nothing changed (retireRecord retires it)"
        )
        self.ident = ident

    def extensions(self) -> dict[str, object]:
        return {"id": self.ident, "retired": None}


class InvalidIdError(StoreError):
    """An id that is not of the form the operation takes."""

    def __init__(self, ident: str, expected: str) -> None:
        super().__init__(f"'{ident}' is not a valid id; expected {expected}")
        self.ident = ident


class AmbiguousIdError(StoreError):
    """A record id prefix that matches more than one readable record."""

    code = "AMBIGUOUS_ID"

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates)
        super().__init__(
            f"id prefix '{prefix}' matches more than one record ({shown}); "
            "give more characters or the full id"
        )
        self.prefix = prefix
        self.candidates = candidates

    def extensions(self) -> dict[str, object]:
        return {"candidates": self.candidates}


class VersionConflictError(StoreError):
    """An update whose expectedVersion is not the record's current version."""

    code = "CONFLICT"

    def __init__(self, record_id: str, expected: int, current: int) -> None:
        super().__init__(
            f"record '{record_id}' is at version {current}, not {expected}; "
            "read it again and retry with expectedVersion: " + str(current)
        )
        self.expected = expected
        self.current = current

    def extensions(self) -> dict[str, object]:
        return {"currentVersion": self.current, "expectedVersion": self.expected}


class IdempotencyConflictError(StoreError):
    """An idempotency key reused for a different write."""

    code = "CONFLICT"

    def __init__(self, key: str, record_id: str) -> None:
        super().__init__(
            f"idempotencyKey '{key}' was already used for a different write (record "
            f"'{record_id}'); retry with exactly the same input, or use a new key"
        )
        self.key = key
        self.record_id = record_id

    def extensions(self) -> dict[str, object]:
        return {"idempotencyKey": self.key, "recordId": self.record_id}


class InvalidInputError(StoreError):
    """Input that is well-typed but out of the accepted range."""

    def __init__(self, message: str, allowed: object = None) -> None:
        super().__init__(message)
        self.allowed = allowed

    def extensions(self) -> dict[str, object]:
        return {} if self.allowed is None else {"allowed": self.allowed}


class ResponseTooLargeError(StoreError):
    """A read whose response would hold more than the bytes one response may hold."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this response would hold more than {limit:,} bytes, the most one response may "
            "hold; ask for less per request and page through the rest: a smaller first:, "
            "fewer aliases, or fewer fields (content and versions are the large ones)"
        )
        self.limit = limit

    def extensions(self) -> dict[str, object]:
        return {"limit": self.limit}


class NoPolicyError(StoreError):
    """No policy has been applied yet, so no lane takes a write."""

    code = "FORBIDDEN"

    def __init__(self) -> None:
        super().__init__(
            "no policy is in force, so no lane takes a write; "
            "start the gateway with --policy FILE or apply one with applyPolicy"
        )


class OutcomeUnknownError(StoreError):
    """A write being committed when its caller stopped, whose outcome did not come in time."""

    code = "OUTCOME_UNKNOWN"

    def __init__(self, waited: float) -> None:
        waiting = f" (waited {waited:g} more seconds)" if waited else ""
        super().__init__(
            "the call was stopped while its write was being committed, and whether it was "
            f"committed is not known{waiting}: it may have been written. Read before "
            "sending it again: a retry with the same idempotencyKey answers the first write if "
            'there was one, and audit(kinds: ["sr_ingested", "sr_updated"]) lists what you wrote'
        )
        self.waited = waited

    def extensions(self) -> dict[str, object]:
        return {"waitedSeconds": self.waited}


class StoppedError(StoreError):
    """A write asked for by a call that was already being stopped: not begun."""

    code = "STOPPED"

    def __init__(self) -> None:
        super().__init__(
            "the call was stopped (its time ran out, or its client left) before this write "
            "began: it was not written"
        )


class BatchItemError(StoreError):
    """One input of a batch was refused, so none of the batch was written."""

    def __init__(self, index: int, cause: Exception) -> None:
        text = getattr(cause, "message", str(cause))
        super().__init__(f"inputs[{index}] refused, so nothing was written: {text}")
        self.index = index
        self.cause = cause
        self.code = getattr(cause, "code", StoreError.code)

    def extensions(self) -> dict[str, object]:
        details: dict[str, object] = getattr(self.cause, "extensions", dict)()
        return {**details, "index": self.index}


class UnstorableTextError(InvalidInputError):
    """Text PostgreSQL cannot hold: the NUL character or an unpaired surrogate."""

    def __init__(self) -> None:
        super().__init__(
            "text may not contain the NUL character (U+0000) or unpaired surrogates "
            "(U+D800 to U+DFFF); PostgreSQL cannot store them, so remove them and retry"
        )


class TimedOutError(StoreError):
    """A statement PostgreSQL stopped at the time limit of the request running it."""

    code = "TIMEOUT"

    def __init__(self) -> None:
        super().__init__(
            "a statement of this call ran into the time limit one request has (PostgreSQL's "
            "statement_timeout, set to it) and was stopped; nothing it was writing was "
            "written: ask for less (a smaller first:, fewer nested lists) or split the work"
        )


class TooManyWordsError(InvalidInputError):
    """Content whose words (each distinct word with its positions) pass what PostgreSQL's
    text index holds for one record, though its characters are within the content limit."""

    LIMIT = 1_048_575  # bytes of a tsvector (MAXSTRPOS in PostgreSQL's tsvector code)

    def __init__(self, size: int | None) -> None:
        took = "" if size is None else f" (its words and their positions take {size:,} bytes)"
        super().__init__(
            "a record's content has more distinct words than the text index holds for one "
            f"record{took}: at most {self.LIMIT:,} bytes of words and positions, which content "
            "of mostly different words passes at a few hundred thousand characters; split it "
            "into several records",
            allowed=self.LIMIT,
        )


# SQLSTATEs PostgreSQL raises for text it cannot hold: a NUL in text (22021),
# a \u0000 escape in JSON (22P05).
_UNSTORABLE_TEXT = frozenset({"22021", "22P05"})
# program_limit_exceeded, raised by to_tsvector as "string is too long for tsvector
# (N bytes, max 1048575 bytes)"; the SQLSTATE also stands for other limits, told apart
# by the message.
_PROGRAM_LIMIT = "54000"
_TSVECTOR_TOO_LONG = re.compile(r"too long for tsvector \((\d+) bytes")
# query_canceled: by statement_timeout, or by a cancel request (a stopped call, whose
# own cancellation is what reaches it), told apart by the message.
_CANCELED = "57014"


def refusal_for(exc: BaseException) -> StoreError | None:
    """The refusal a failure caused by the caller's own text stands for, else None."""
    seen: BaseException | None = exc
    for _ in range(6):  # the failure, the driver's error inside it, and their causes
        if seen is None:
            break
        # A lone surrogate (JSON allows \ud800) cannot be encoded as UTF-8 for the database.
        if isinstance(seen, UnicodeEncodeError):
            return UnstorableTextError()
        state = getattr(seen, "sqlstate", None)
        if state in _UNSTORABLE_TEXT:
            return UnstorableTextError()
        if state == _CANCELED and "statement timeout" in str(seen):
            return TimedOutError()
        if state == _PROGRAM_LIMIT and "tsvector" in str(seen):
            found = _TSVECTOR_TOO_LONG.search(str(seen))
            return TooManyWordsError(None if found is None else int(found[1]))
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None
