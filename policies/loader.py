"""Read a policy document (YAML text) into a `Policy`, refusing anything not understood.

Every refusal is a `PolicyLoadError` naming the source, the dotted key and what is
allowed. Lane, source-type, agent, label and authority names reach SQL, logs and
messages, so they are held to one narrow pattern before anything else uses them. The
YAML itself is read by `policies.strict_yaml`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from typing import NoReturn, TypedDict, cast

from policies.errors import PolicyLoadError
from policies.model import (
    ALL_LANES,
    DEFAULT_AUTHORITY,
    DEFAULT_TEXT_SEARCH,
    DURATION_FORMS,
    MAX_EMBEDDING_DIMENSIONS,
    MAX_TTL,
    TEXT_SEARCH_CONFIGS,
    AgentProfile,
    Embedding,
    LabelRule,
    Lane,
    Policy,
    SourceType,
    parse_duration,
)
from policies.properties import MAX_VALUE_LENGTH, RESERVED_PREFIX, is_reserved_label
from policies.strict_yaml import parse_yaml, show

NAME_PATTERN = r"[a-z][a-z0-9_]{0,62}"
_NAME = re.compile(NAME_PATTERN)
_NAME_RULE = (
    f"names must match ^{NAME_PATTERN}$ "
    "(a lowercase letter, then up to 62 lowercase letters, digits or underscores)"
)
CONTENT_FORMATS: tuple[str, ...] = ("json", "text")


class RawLabelRule(TypedDict, total=False):
    """A label closed to a set of values: `{label: stage, values: [lead, won]}`."""

    label: str
    values: list[str]


class RawSourceType(TypedDict, total=False):
    """One entry under `lanes.<lane>.source_types`."""

    authority: str
    allowed_labels: list[str | RawLabelRule]
    content_format: str | None
    required_keys: list[str]
    enabled: bool


class RawEmbedding(TypedDict, total=False):
    """`lanes.<lane>.embedding`: the vectors its records carry."""

    dimensions: int
    model: str


class RawLane(TypedDict, total=False):
    """One entry under `lanes`; null or `{}` declares an open lane."""

    source_types: dict[str, RawSourceType | None] | None
    text_search: str
    embedding: RawEmbedding
    ttl: str
    properties_personal: bool


class RawAgent(TypedDict, total=False):
    """One entry under `agents`."""

    read: list[str]
    write: list[str]
    apply_policy: bool
    read_metrics: bool
    erase: bool


class RawPolicy(TypedDict, total=False):
    """The whole document."""

    lanes: dict[str, RawLane | None]
    agents: dict[str, RawAgent | None] | None


def is_valid_name(name: object) -> bool:
    """Whether `name` may be used as a lane, source type, agent, label or authority name."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str, allowed: Iterable[str] | None = None) -> NoReturn:
        raise PolicyLoadError(self.source, key, problem, None if allowed is None else list(allowed))

    def fields(self, value: object, key: str, allowed: Iterable[str]) -> dict[str, object]:
        """A mapping whose keys must all be among `allowed`."""
        names = sorted(allowed)
        if not isinstance(value, dict):
            self.fail(key, f"must be a mapping with keys {names}; got {_kind(value)}", names)
        for field in value:
            if field not in names:
                self.fail(key, f"unknown key {show(field)}; allowed keys: {names}", names)
        return cast(dict[str, object], value)

    def entries(self, value: object, key: str, what: str) -> dict[str, object]:
        """A mapping from names (of lanes, source types or agents) to their declarations."""
        if not isinstance(value, dict):
            self.fail(key, f"must be a mapping of {what} names; got {_kind(value)}")
        for name in value:
            self.name(name, key, what)
        return cast(dict[str, object], value)

    def name(self, value: object, key: str, what: str) -> str:
        if not isinstance(value, str):
            self.fail(
                key,
                f"{what} name {show(value)} is {_kind(value)}, not a string; {_NAME_RULE} "
                "(YAML reads unquoted yes, no, on, off and numbers as other types; quote them)",
            )
        if _NAME.fullmatch(value) is None:
            self.fail(key, f"{what} name {show(value)} is not allowed; {_NAME_RULE}")
        return value

    def flag(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false; got {_kind(value)} {show(value)}")
        return value

    def strings(self, value: object, key: str) -> list[str]:
        """A list of distinct non-empty strings, in the order written."""
        if not isinstance(value, list):
            self.fail(key, f"must be a list of strings; got {_kind(value)}")
        seen: list[str] = []
        for index, item in enumerate(value):
            item_key = f"{key}[{index}]"
            if not isinstance(item, str) or not item:
                self.fail(item_key, f"must be a non-empty string; got {_kind(item)} {show(item)}")
            if item in seen:
                self.fail(item_key, f"{show(item)} is listed twice; list each once")
            seen.append(item)
        return seen

    def policy(self, raw: object) -> Policy:
        if raw is None:
            self.fail("", "the document is empty; a policy needs 'lanes' (and usually 'agents')")
        document = cast(RawPolicy, self.fields(raw, "", RawPolicy.__optional_keys__))
        if "lanes" not in document:
            self.fail(
                "lanes", "is required; declare at least one lane, for example lanes: {notes: {}}"
            )
        raw_lanes = self.entries(document["lanes"], "lanes", "lane")
        if not raw_lanes:
            self.fail("lanes", "declares no lane; declare at least one, for example notes: {}")
        lanes = {name: self.lane(name, raw, f"lanes.{name}") for name, raw in raw_lanes.items()}
        raw_agents = document.get("agents")
        agents: dict[str, AgentProfile] = {}
        if raw_agents is not None:
            entries = self.entries(raw_agents, "agents", "agent")
            declared = sorted(lanes)
            agents = {
                name: self.agent(name, raw, f"agents.{name}", declared)
                for name, raw in entries.items()
            }
        return Policy(lanes=lanes, agents=agents)

    def lane(self, name: str, raw: object, key: str) -> Lane:
        if raw is None:
            return Lane(name)
        fields = cast(RawLane, self.fields(raw, key, RawLane.__optional_keys__))
        language = self.text_search(fields.get("text_search", DEFAULT_TEXT_SEARCH), key)
        embedding = None
        if fields.get("embedding") is not None:
            embedding = self.embedding(fields["embedding"], f"{key}.embedding")
        ttl = None if fields.get("ttl") is None else self.ttl(fields["ttl"], f"{key}.ttl")
        personal = self.flag(fields.get("properties_personal", True), f"{key}.properties_personal")
        raw_types = fields.get("source_types")
        types: dict[str, SourceType] = {}
        if raw_types is not None:
            key = f"{key}.source_types"
            entries = self.entries(raw_types, key, "source type")
            types = {
                type_name: self.source_type(type_name, raw_type, f"{key}.{type_name}")
                for type_name, raw_type in entries.items()
            }
        return Lane(
            name,
            types,
            text_search=language,
            embedding=embedding,
            ttl=ttl,
            properties_personal=personal,
        )

    def ttl(self, value: object, key: str) -> timedelta:
        duration = parse_duration(value) if isinstance(value, str) else None
        if duration is None:
            self.fail(
                key,
                f"{show(value)} is not a lifetime; allowed: {', '.join(DURATION_FORMS)}, "
                f"a whole number up to {MAX_TTL.days}d",
                DURATION_FORMS,
            )
        return duration

    def embedding(self, value: object, key: str) -> Embedding:
        fields = cast(RawEmbedding, self.fields(value, key, ("dimensions", "model")))
        dimensions = fields.get("dimensions")
        if (
            not isinstance(dimensions, int)
            or isinstance(dimensions, bool)
            or not 1 <= dimensions <= MAX_EMBEDDING_DIMENSIONS
        ):
            self.fail(
                f"{key}.dimensions",
                f"must be a whole number from 1 to {MAX_EMBEDDING_DIMENSIONS} (the size of the "
                f"model's vectors, e.g. 384); got {_kind(dimensions)} {show(dimensions)}",
            )
        model = fields.get("model")
        if not isinstance(model, str) or not model.strip():
            self.fail(
                f"{key}.model",
                "must name the model that makes the vectors, e.g. all-MiniLM-L6-v2; got "
                f"{_kind(model)} {show(model)}",
            )
        return Embedding(dimensions, model.strip())

    def text_search(self, value: object, key: str) -> str:
        if not isinstance(value, str) or value not in TEXT_SEARCH_CONFIGS:
            self.fail(
                f"{key}.text_search",
                f"{show(value)} is not a text-search language; allowed: "
                + ", ".join(TEXT_SEARCH_CONFIGS),
                TEXT_SEARCH_CONFIGS,
            )
        return value

    def source_type(self, name: str, raw: object, key: str) -> SourceType:
        if raw is None:
            return SourceType(name)
        fields = cast(RawSourceType, self.fields(raw, key, RawSourceType.__optional_keys__))
        authority = DEFAULT_AUTHORITY
        if "authority" in fields:
            authority = self.name(fields["authority"], f"{key}.authority", "authority")
        labels = self.labels(fields.get("allowed_labels", []), f"{key}.allowed_labels")
        content_format = self.content_format(fields.get("content_format"), f"{key}.content_format")
        required_keys: list[str] = []
        if "required_keys" in fields:
            required_key = f"{key}.required_keys"
            required_keys = self.strings(fields["required_keys"], required_key)
            if required_keys and content_format != "json":
                self.fail(required_key, "required_keys needs content_format: json", ["json"])
        return SourceType(
            name=name,
            authority=authority,
            labels=labels,
            content_format=content_format,
            required_keys=tuple(required_keys),
            enabled=self.flag(fields.get("enabled", True), f"{key}.enabled"),
        )

    def content_format(self, value: object, key: str) -> str | None:
        if value is None or value == "text":
            return None
        if value != "json":
            allowed = list(CONTENT_FORMATS)
            self.fail(
                key, f"content_format {show(value)} is not known; allowed: {allowed}", allowed
            )
        return "json"

    def labels(self, value: object, key: str) -> tuple[LabelRule, ...]:
        if not isinstance(value, list):
            self.fail(
                key, f"must be a list of label names or {{label, values}} maps; got {_kind(value)}"
            )
        rules: dict[str, LabelRule] = {}
        for index, item in enumerate(value):
            item_key = f"{key}[{index}]"
            rule = self.label_rule(item, item_key)
            if rule.label in rules:
                self.fail(item_key, f"label {rule.label!r} is listed twice; list each label once")
            rules[rule.label] = rule
        return tuple(rules.values())

    def label_rule(self, item: object, key: str) -> LabelRule:
        if isinstance(item, str):
            return LabelRule(self.label_name(item, key))
        if not isinstance(item, dict):
            self.fail(
                key,
                f"each allowed label is a name or a map {{label, values}}; got {_kind(item)}",
                sorted(RawLabelRule.__optional_keys__),
            )
        fields = cast(RawLabelRule, self.fields(item, key, RawLabelRule.__optional_keys__))
        if "label" not in fields:
            self.fail(
                key, "a label map needs 'label', for example {label: stage, values: [lead, won]}"
            )
        label = self.label_name(fields["label"], f"{key}.label")
        if "values" not in fields:
            return LabelRule(label)
        values_key = f"{key}.values"
        values = self.strings(fields["values"], values_key)
        if not values:
            self.fail(values_key, "must list at least one value; leave 'values' out to allow any")
        for index, text in enumerate(values):
            if text != text.strip() or len(text) > MAX_VALUE_LENGTH:
                self.fail(
                    f"{values_key}[{index}]",
                    f"value {show(text)} can never be written; values are trimmed and "
                    f"at most {MAX_VALUE_LENGTH} characters",
                )
        return LabelRule(label, tuple(values))

    def label_name(self, value: object, key: str) -> str:
        label = self.name(value, key, "label")
        if is_reserved_label(label):
            self.fail(
                key,
                f"label {label!r} is reserved for the engine; labels beginning with "
                f"{RESERVED_PREFIX!r} cannot be declared",
            )
        return label

    def agent(self, name: str, raw: object, key: str, declared: list[str]) -> AgentProfile:
        if raw is None:
            return AgentProfile(name)
        fields = cast(RawAgent, self.fields(raw, key, RawAgent.__optional_keys__))
        return AgentProfile(
            name=name,
            read=self.lane_refs(fields.get("read", []), f"{key}.read", declared),
            write=self.lane_refs(fields.get("write", []), f"{key}.write", declared),
            apply_policy=self.flag(fields.get("apply_policy", False), f"{key}.apply_policy"),
            read_metrics=self.flag(fields.get("read_metrics", False), f"{key}.read_metrics"),
            erase=self.flag(fields.get("erase", False), f"{key}.erase"),
        )

    def lane_refs(self, value: object, key: str, declared: list[str]) -> tuple[str, ...]:
        allowed = [ALL_LANES, *declared]
        if not isinstance(value, list):
            self.fail(
                key, f"must be a list of lanes; allowed: {allowed}; got {_kind(value)}", allowed
            )
        refs: list[str] = []
        for index, item in enumerate(value):
            if item not in allowed:
                self.fail(
                    f"{key}[{index}]",
                    f"{show(item)} is not a declared lane; allowed: {allowed}",
                    allowed,
                )
            if item not in refs:
                refs.append(cast(str, item))
        return tuple(refs)


def load_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse and validate a policy document; `source` names it in every refusal."""
    return _Reader(source).policy(parse_yaml(text, source))


DEV_POLICY_YAML = """\
# Development policy: one open lane, one agent that may do everything.
lanes:
  default: {}
agents:
  dev: { read: ["*"], write: ["*"], apply_policy: true, erase: true }
"""


def dev_policy() -> Policy:
    """The policy a gateway runs when no policy file is given."""
    return load_policy(DEV_POLICY_YAML, "<dev policy>")
