"""Refusals raised by the policy loader and guard.

Every refusal is a full sentence naming what is allowed, so an agent can correct
its call from the message alone; the same facts travel as data in `extensions()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import ClassVar, Literal

Access = Literal["read", "write"]

_ECHO_LIMIT = 160


class PolicyError(Exception):
    """Base of every refusal the guard or loader raises."""

    code: ClassVar[str] = "BAD_USER_INPUT"

    def __init__(self, message: str, allowed: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.allowed: list[str] | None = None if allowed is None else list(allowed)

    def __str__(self) -> str:
        return self.message

    def context(self) -> dict[str, object]:
        """Facts about the refusal besides `allowed`, with camelCase keys."""
        return {}

    def extensions(self) -> dict[str, object]:
        """Structured details for GraphQL `extensions`; never includes `code`."""
        details: dict[str, object] = {}
        if self.allowed is not None:
            details["allowed"] = list(self.allowed)
        details.update(self.context())
        return details


class PolicyLoadError(PolicyError):
    """A policy document was refused at load; names the source, key and what is allowed."""

    def __init__(
        self, source: str, key: str, problem: str, allowed: Sequence[str] | None = None
    ) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"policy {source!r}: key {key!r}" if key else f"policy {source!r}"
        super().__init__(f"{where}: {problem}", allowed)

    def context(self) -> dict[str, object]:
        return {"source": self.source, "key": self.key}


class PropertyFormatError(PolicyError):
    """An edge-property string cannot be read as label:value."""

    def __init__(self, text: str, problem: str) -> None:
        self.text = text
        self.problem = problem
        super().__init__(problem)

    def context(self) -> dict[str, object]:
        # an over-long property is refused for its length; echoing it whole would not help
        return {"property": self.text[:_ECHO_LIMIT]}


class ReservedLabelError(PolicyError):
    """The caller passed labels that only the engine may write."""

    def __init__(
        self,
        labels: Sequence[str],
        prefix: str = "e_",
        operation: str = "written by ingest or update",
    ) -> None:
        self.labels = list(labels)
        self.prefix = prefix
        super().__init__(
            f"label(s) {self.labels} are reserved for the engine; labels beginning with "
            f"{prefix!r} cannot be {operation}"
        )

    def context(self) -> dict[str, object]:
        return {"labels": list(self.labels), "reservedPrefix": self.prefix}


class LaneNotDeclaredError(PolicyError):
    """No lane of that name is declared by the policy in force."""

    def __init__(self, lane: str, declared: Sequence[str]) -> None:
        self.lane = lane
        self.declared = list(declared)
        super().__init__(
            f"lane {lane!r} is not declared by the policy in force; "
            f"declared lanes: {self.declared}",
            self.declared,
        )

    def context(self) -> dict[str, object]:
        return {"lane": self.lane}


class SourceTypeNotAllowedError(PolicyError):
    """The lane does not accept that source type."""

    def __init__(
        self, lane: str, source_type: str, allowed: Sequence[str], lane_open: bool
    ) -> None:
        self.lane = lane
        self.source_type = source_type
        self.lane_open = lane_open
        names = list(allowed)
        if lane_open:
            message = (
                f"lane {lane!r} is open — source_type must be a builtin {names} "
                f"(got {source_type!r})."
            )
        else:
            message = (
                f"lane {lane!r} is closed — source_type must be one of {names} "
                f"(got {source_type!r}); builtins are excluded in a closed lane."
            )
        super().__init__(message, names)

    def context(self) -> dict[str, object]:
        return {"lane": self.lane, "got": self.source_type, "laneOpen": self.lane_open}


class LabelNotAllowedError(PolicyError):
    """Labels outside the vocabulary of the source type, or of the lane for addProperties."""

    def __init__(
        self, lane: str, source_type: str | None, labels: Sequence[str], allowed: Sequence[str]
    ) -> None:
        self.lane = lane
        self.source_type = source_type
        self.labels = list(labels)
        names = list(allowed)
        scope = f"in lane {lane!r}"
        if source_type is not None:
            scope = f"for source_type {source_type!r} {scope}"
        super().__init__(f"label(s) {self.labels} not allowed {scope}; allowed: {names}", names)

    def context(self) -> dict[str, object]:
        details: dict[str, object] = {"lane": self.lane, "got": list(self.labels)}
        if self.source_type is not None:
            details["sourceType"] = self.source_type
        return details


class ValueNotAllowedError(PolicyError):
    """A label closed to a set of values was given another value."""

    def __init__(
        self, lane: str, source_type: str, label: str, value: str, allowed: Sequence[str]
    ) -> None:
        self.lane = lane
        self.source_type = source_type
        self.label = label
        self.value = value
        names = list(allowed)
        super().__init__(
            f"value {value!r} not allowed for label {label!r} on source_type {source_type!r} "
            f"in lane {lane!r}; allowed values (in order): {names}",
            names,
        )

    def context(self) -> dict[str, object]:
        return {
            "lane": self.lane,
            "sourceType": self.source_type,
            "label": self.label,
            "got": self.value,
        }


class ContentFormatError(PolicyError):
    """The content is not in the format the source type requires."""

    def __init__(
        self, lane: str, source_type: str, detail: str, content_format: str = "json"
    ) -> None:
        self.lane = lane
        self.source_type = source_type
        self.detail = detail
        self.content_format = content_format
        super().__init__(
            f"content must be JSON for source_type {source_type!r} in lane {lane!r}; "
            f"got invalid JSON ({detail})"
        )

    def context(self) -> dict[str, object]:
        return {
            "lane": self.lane,
            "sourceType": self.source_type,
            "contentFormat": self.content_format,
        }


class RequiredKeysError(PolicyError):
    """JSON content is not an object, or lacks keys the source type requires."""

    def __init__(
        self,
        lane: str,
        source_type: str,
        required: Sequence[str],
        missing: Sequence[str] = (),
        got_kind: str | None = None,
    ) -> None:
        self.lane = lane
        self.source_type = source_type
        self.required = list(required)
        self.missing = list(missing)
        self.got_kind = got_kind
        subject = f"content for source_type {source_type!r} in lane {lane!r}"
        if got_kind is not None:
            message = (
                f"{subject} must be a JSON object with keys {self.required}; got a JSON {got_kind}"
            )
        else:
            message = (
                f"{subject} is missing required key(s) {self.missing}; required: {self.required}"
            )
        super().__init__(message)

    def context(self) -> dict[str, object]:
        details: dict[str, object] = {
            "lane": self.lane,
            "sourceType": self.source_type,
            "required": list(self.required),
        }
        if self.got_kind is not None:
            details["got"] = self.got_kind
        else:
            details["missing"] = list(self.missing)
        return details


class LaneForbiddenError(PolicyError):
    """The agent profile does not grant that access to the lane."""

    code: ClassVar[str] = "FORBIDDEN"

    def __init__(self, agent: str, lane: str, access: Access, permitted: Sequence[str]) -> None:
        self.agent = agent
        self.lane = lane
        self.access = access
        names = list(permitted)
        if access == "write":
            message = f"agent {agent!r} may not write to lane {lane!r}; writable lanes: {names}"
        else:
            message = f"agent {agent!r} may not read lane {lane!r}; readable lanes: {names}"
        super().__init__(message, names)

    def context(self) -> dict[str, object]:
        return {"agent": self.agent, "lane": self.lane, "access": self.access}


class PolicyApplyForbiddenError(PolicyError):
    """The agent profile does not allow applying a policy."""

    code: ClassVar[str] = "FORBIDDEN"

    def __init__(self, agent: str, permitted: Sequence[str]) -> None:
        self.agent = agent
        names = list(permitted)
        super().__init__(
            f"agent {agent!r} may not apply a policy; agents with apply_policy: {names}", names
        )

    def context(self) -> dict[str, object]:
        return {"agent": self.agent}


class EraseForbiddenError(PolicyError):
    """The agent profile does not allow erasing records."""

    code: ClassVar[str] = "FORBIDDEN"

    def __init__(self, agent: str, permitted: Sequence[str]) -> None:
        self.agent = agent
        names = list(permitted)
        super().__init__(
            f"agent {agent!r} may not erase records; the profiles the policy names for "
            f"erasure (erase: true): {names}",
            names,
        )

    def context(self) -> dict[str, object]:
        return {"agent": self.agent}


class HiddenMemberError(PolicyError):
    """A change to a connection, group or chain that joins records the caller cannot read."""

    code: ClassVar[str] = "FORBIDDEN"

    def __init__(self, what: str, ident: str, changeable: Sequence[str]) -> None:
        self.ident = ident
        names = list(changeable)
        super().__init__(
            f"{what} '{ident}' also joins records in lanes you may not read; only an agent "
            "that may read and write every record it joins can change it (you may change "
            f"those whose records are all in the lanes {names})",
            names,
        )

    def context(self) -> dict[str, object]:
        return {"id": self.ident}


class UnknownAgentError(PolicyError):
    """The caller's agent is not declared by the policy in force."""

    code: ClassVar[str] = "UNAUTHENTICATED"

    def __init__(self, agent: str) -> None:
        self.agent = agent
        super().__init__(
            f"agent {agent!r} is not declared by the policy in force; "
            "an operator must add it to the policy's agents before its token works again"
        )

    def context(self) -> dict[str, object]:
        return {"agent": self.agent}


class NotReadableError(PolicyError):
    """An object the caller may not read: refused exactly as one that does not exist."""

    code: ClassVar[str] = "NOT_FOUND"

    def __init__(self, kind: str, ident: str) -> None:
        self.ident = ident
        super().__init__(f"no {kind} with id '{ident}' exists or is readable by you")

    def context(self) -> dict[str, object]:
        return {"id": self.ident}


class EmbeddingError(PolicyError):
    """A vector that does not fit the embedding a lane declares (or the lane declares none)."""

    def __init__(self, lane: str, size: int, dimensions: int | None, model: str | None) -> None:
        self.lane = lane
        self.size = size
        if dimensions is None:
            message = (
                f"lane {lane!r} declares no embedding, so its records carry no vector; omit "
                "it, or declare the lane's embedding (dimensions, model) in the policy"
            )
        else:
            message = (
                f"a vector of {size} numbers does not fit lane {lane!r}: its policy declares "
                f"embeddings of {dimensions} dimensions made by model {model!r}"
            )
        super().__init__(message)

    def context(self) -> dict[str, object]:
        return {"lane": self.lane, "size": self.size}


class VectorSizeError(PolicyError):
    """A search's vector fits none of the lanes searched (by size, or by one model)."""

    def __init__(self, size: int, declared: Mapping[str, tuple[int, str]]) -> None:
        self.size = size
        fits = sorted(lane for lane, (dims, _) in declared.items() if dims == size)
        if not declared:
            message = (
                "none of the lanes searched declares an embedding, so none holds vectors; "
                "search by text, or name lanes whose policy declares one"
            )
        elif not fits:
            sizes = "; ".join(
                f"{lane}: {dims} dimensions, model {model!r}"
                for lane, (dims, model) in sorted(declared.items())
            )
            message = (
                f"a vector of {size} numbers fits none of the lanes searched, whose "
                f"embeddings are: {sizes}"
            )
        else:
            models = "; ".join(f"{lane}: model {declared[lane][1]!r}" for lane in fits)
            message = (
                f"the lanes searched with vectors of {size} numbers use different models "
                f"({models}), whose vectors do not compare; name the lanes of one model "
                "with lanes"
            )
        super().__init__(message, sorted(declared))

    def context(self) -> dict[str, object]:
        return {"size": self.size}


class ExpiryError(PolicyError):
    """An `expiresAt` not after the write's instant, or one after it with `expireNow`."""

    def __init__(self, asked: datetime, now: datetime, expire_now: bool) -> None:
        self.asked = asked
        self.now = now
        if expire_now:
            message = (
                f"expireNow expires the record at once, but expiresAt {asked.isoformat()} is "
                f"later; give expiresAt alone (an instant after {now.isoformat()}) or "
                "expireNow: true alone"
            )
        else:
            message = (
                f"expiresAt {asked.isoformat()} is not after now ({now.isoformat()}); give a "
                "later instant, or expireNow: true to expire the record at once"
            )
        super().__init__(message, ["an instant after now", "expireNow: true"])

    def context(self) -> dict[str, object]:
        return {"expiresAt": self.asked.isoformat(), "now": self.now.isoformat()}
