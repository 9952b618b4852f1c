"""The policy in force: lanes, their source types, and agent profiles.

All of it is immutable; a change of policy is a new `Policy`, never an edit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TypeVar

from policies.errors import LaneNotDeclaredError, UnknownAgentError

BUILTIN_SOURCE_TYPES: tuple[str, ...] = ("conversational", "documentary")
DEFAULT_SOURCE_TYPE = "conversational"
DEFAULT_AUTHORITY = "conversational"
DEFAULT_LANE = "default"
ALL_LANES = "*"
# PostgreSQL's built-in text-search configurations (15 and later): `simple` lower-cases
# words of every language and stems none; the others stem one language's words and drop
# its stop words. `stemmed_english` (edgeloom's, migration 0027) stems English and keeps
# every word: a question's "who" or "did" still counts, weighed by its frequency, and it
# found most evidence on the relevance bench (bench/README.md, "Relevance").
DEFAULT_TEXT_SEARCH = "stemmed_english"
TEXT_SEARCH_CONFIGS: tuple[str, ...] = (
    "simple",
    # English stemmed with its stop words kept (migration 0027).
    "stemmed_english",
    "arabic",
    "armenian",
    "basque",
    "catalan",
    "danish",
    "dutch",
    "english",
    "finnish",
    "french",
    "german",
    "greek",
    "hindi",
    "hungarian",
    "indonesian",
    "irish",
    "italian",
    "lithuanian",
    "nepali",
    "norwegian",
    "portuguese",
    "romanian",
    "russian",
    "serbian",
    "spanish",
    "swedish",
    "tamil",
    "turkish",
    "yiddish",
)

# pgvector's HNSW index takes vectors of at most 2,000 dimensions.
MAX_EMBEDDING_DIMENSIONS = 2000

_V = TypeVar("_V")


def _frozen_mapping(mapping: Mapping[str, _V]) -> Mapping[str, _V]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class LabelRule:
    """A label a source type allows; `values` closes it to those values, in declared order."""

    label: str
    values: tuple[str, ...] | None = None

    def allows_value(self, value: str) -> bool:
        """Whether `value` may be written under this label."""
        return self.values is None or value in self.values


@dataclass(frozen=True)
class SourceType:
    """A kind of record declared on a lane: its authority and the labels it may carry."""

    name: str
    authority: str = DEFAULT_AUTHORITY
    labels: tuple[LabelRule, ...] = ()
    content_format: str | None = None
    required_keys: tuple[str, ...] = ()
    enabled: bool = True

    def allowed_labels(self) -> list[str]:
        """The labels a record of this type may carry, sorted."""
        return sorted(rule.label for rule in self.labels)

    def rule(self, label: str) -> LabelRule | None:
        """The rule for `label`, or None when the type does not allow it."""
        for rule in self.labels:
            if rule.label == label:
                return rule
        return None


def builtin_source_type(name: str) -> SourceType:
    """A builtin type as an open lane offers it; its authority is its own name.

    On an open lane a builtin takes any label, so `labels` is empty and not consulted.
    """
    if name not in BUILTIN_SOURCE_TYPES:
        raise ValueError(f"{name!r} is not a builtin source type")
    return SourceType(name=name, authority=name)


# A lifetime (`lanes.<lane>.ttl`): a whole number of days, hours or minutes.
DURATION_FORMS = ("<n>d (days, e.g. 30d)", "<n>h (hours, e.g. 12h)", "<n>m (minutes, e.g. 15m)")
_DURATION = re.compile(r"([1-9][0-9]{0,6})([dhm])")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}
# The longest lifetime a lane may give: a hundred years.
MAX_TTL = timedelta(days=36_500)


def parse_duration(text: str) -> timedelta | None:
    """`30d`, `12h` or `15m` as a duration; None when `text` is none of those forms or
    longer than MAX_TTL."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        return None
    duration = timedelta(**{_UNITS[found[2]]: int(found[1])})
    return duration if duration <= MAX_TTL else None


@dataclass(frozen=True)
class Embedding:
    """The vectors a lane's records carry: their size and the model that made them (one
    model a lane, so two models' vectors never meet in one ranking)."""

    dimensions: int
    model: str


@dataclass(frozen=True)
class Lane:
    """A lane; one declaring no source types is open, one declaring any is closed."""

    name: str
    source_types: Mapping[str, SourceType] = field(default_factory=dict)
    # The text-search configuration its records' words are indexed in (search).
    text_search: str = DEFAULT_TEXT_SEARCH
    # The embedding its records may carry (search by vector); None: they carry none.
    embedding: Embedding | None = None
    # How long its new records live when the writer names no expiry (None: forever).
    ttl: timedelta | None = None
    # Whether its records' edge properties are personal: an erasure removes them (the
    # default) or, when false, keeps them beside the record's ids.
    properties_personal: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "source_types", _frozen_mapping(self.source_types))

    @property
    def is_open(self) -> bool:
        """An open lane takes the builtin source types and any label."""
        return not self.source_types

    def enabled_source_type(self, name: str) -> SourceType | None:
        """The declared, enabled type called `name`; a disabled type counts as absent."""
        found = self.source_types.get(name)
        return found if found is not None and found.enabled else None

    def enabled_source_types(self) -> list[str]:
        """Names of the enabled declared types, sorted."""
        return sorted(name for name, st in self.source_types.items() if st.enabled)

    def offered_source_types(self) -> list[SourceType]:
        """What a writer may choose: the builtins on an open lane, else the enabled types."""
        if self.is_open:
            return [builtin_source_type(name) for name in BUILTIN_SOURCE_TYPES]
        return [self.source_types[name] for name in self.enabled_source_types()]

    def combined_labels(self) -> list[str]:
        """Every label some enabled type allows, sorted; what addProperties checks against."""
        labels = {
            rule.label for st in self.source_types.values() if st.enabled for rule in st.labels
        }
        return sorted(labels)


@dataclass(frozen=True)
class AgentProfile:
    """What one agent may read, write, whether it may apply a policy, and whether its
    token may scrape /metrics from a non-loopback address."""

    name: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    apply_policy: bool = False
    read_metrics: bool = False
    # May erase records (eraseRecord) in the lanes it may write.
    erase: bool = False

    def can_read(self, lane: str) -> bool:
        """Whether the profile names `lane` (or every lane) for reading."""
        return ALL_LANES in self.read or lane in self.read

    def can_write(self, lane: str) -> bool:
        """Whether the profile names `lane` (or every lane) for writing."""
        return ALL_LANES in self.write or lane in self.write

    def readable_lanes(self, policy: Policy) -> list[str]:
        """Declared lanes this agent may read, sorted."""
        return [lane for lane in policy.lane_names() if self.can_read(lane)]

    def writable_lanes(self, policy: Policy) -> list[str]:
        """Declared lanes this agent may write, sorted."""
        return [lane for lane in policy.lane_names() if self.can_write(lane)]


@dataclass(frozen=True)
class Policy:
    """A whole policy: the declared lanes and agent profiles."""

    lanes: Mapping[str, Lane]
    agents: Mapping[str, AgentProfile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lanes", _frozen_mapping(self.lanes))
        object.__setattr__(self, "agents", _frozen_mapping(self.agents))

    def lane_names(self) -> list[str]:
        """Names of the declared lanes, sorted."""
        return sorted(self.lanes)

    def lane(self, name: str) -> Lane:
        """The declared lane `name`; refuses a lane the policy does not declare."""
        found = self.lanes.get(name)
        if found is None:
            raise LaneNotDeclaredError(name, self.lane_names())
        return found

    def agent(self, name: str) -> AgentProfile:
        """The profile of agent `name`; refuses an agent the policy does not declare."""
        found = self.agents.get(name)
        if found is None:
            raise UnknownAgentError(name)
        return found

    def erasers(self) -> list[str]:
        """Agents allowed to erase records, sorted."""
        return sorted(name for name, profile in self.agents.items() if profile.erase)

    def policy_appliers(self) -> list[str]:
        """Agents allowed to apply a policy, sorted."""
        return sorted(name for name, profile in self.agents.items() if profile.apply_policy)
