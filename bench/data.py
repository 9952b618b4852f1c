"""Synthetic memory: records with five Zipf-distributed edge properties (or the CRM shape's
three), and gather pairs."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

# label -> vocabulary size; value ranks follow Zipf's law with exponent ZIPF_S.
LABELS: tuple[tuple[str, int], ...] = (
    ("org", 2_000),
    ("topic", 5_000),
    ("person", 10_000),
    ("region", 1_000),
    ("stage", 1_000),
)
ZIPF_S = 1.1

_WORDS = [
    *("met", "discussed", "renewal", "budget", "pilot", "roadmap", "risk", "follow-up"),
    *("contract", "outage", "migration", "quote", "onboarding", "review", "escalation"),
    *("forecast", "churn", "launch", "audit", "hiring"),
]


# Content words: the list above first, then made-up words from syllables, to VOCABULARY
# words in all; a word's frequency follows Zipf's law by its rank, so common words are
# common and most words are rare.
VOCABULARY = 20_000
_SYLLABLES = ("ka", "lo", "ren", "tu", "mi", "sa", "vor", "pe", "dax", "qui", "zen", "bo")


def word(rank: int) -> str:
    """The content word of `rank` (1: the most common)."""
    if rank <= len(_WORDS):
        return _WORDS[rank - 1]
    n, parts = rank, []
    while n:
        n, k = divmod(n, len(_SYLLABLES))
        parts.append(_SYLLABLES[k])
    return "".join(parts)


class Zipf:
    """Values `label:v00001`..`label:vNNNNN` drawn with P(rank k) proportional to 1/k^s."""

    def __init__(self, label: str, vocab: int, s: float = ZIPF_S) -> None:
        self.label = label
        self.values = [f"{label}:v{rank:05d}" for rank in range(1, vocab + 1)]
        self.cum_weights = list(itertools.accumulate(1.0 / k**s for k in range(1, vocab + 1)))

    def sample(self, rng: random.Random) -> str:
        return rng.choices(self.values, cum_weights=self.cum_weights)[0]


@dataclass
class Generator:
    """Deterministic for a seed, so a 100k and a 1M run draw from the same distribution."""

    seed: int = 1
    rng: random.Random = field(init=False)
    zipfs: list[Zipf] = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.zipfs = [Zipf(label, vocab) for label, vocab in LABELS]
        self.words = [word(rank) for rank in range(1, VOCABULARY + 1)]
        self.word_weights = list(
            itertools.accumulate(1.0 / k**ZIPF_S for k in range(1, VOCABULARY + 1))
        )

    def record(self) -> dict[str, object]:
        """One IngestInput: about 120 characters of content and five properties."""
        self.count += 1
        words = " ".join(self.rng.choices(self.words, cum_weights=self.word_weights, k=12))
        properties = [z.sample(self.rng) for z in self.zipfs]
        return {"content": f"bench note {self.count}: {words}", "properties": properties}

    def records(self, n: int) -> list[dict[str, object]]:
        return [self.record() for _ in range(n)]


@dataclass
class CrmGenerator:
    """A CRM-like memory: each record an `org` of 300 with Zipf weights, a `topic` of 60
    and a `person` of 5,000, both uniform (the shape agents' notes on accounts take)."""

    seed: int = 1
    rng: random.Random = field(init=False)
    org: Zipf = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.org = Zipf("org", 300)

    def record(self) -> dict[str, object]:
        self.count += 1
        words = " ".join(self.rng.choices(_WORDS, k=12))
        properties = [
            self.org.sample(self.rng),
            f"topic:t{self.rng.randrange(60):02d}",
            f"person:p{self.rng.randrange(5_000):04d}",
        ]
        return {"content": f"crm note {self.count}: {words}", "properties": properties}

    def records(self, n: int) -> list[dict[str, object]]:
        return [self.record() for _ in range(n)]


# Member-count bands of the `sized` gather workload: a rarer and a commoner property.
RARE_BAND = (100, 400)
COMMON_BAND = (1_000, 4_000)


def sized_pairs(
    samples: list[list[str]], members: dict[str, int], count: int, seed: int = 11
) -> list[tuple[str, str]]:
    """Pairs held by one record whose properties have member counts in fixed bands.

    Under Zipf a value's member count grows with N, so `gather_pairs` does ten times
    the work at 1M that it does at 100k. These pairs do the same work at any N
    (probing a few hundred members against a few thousand), so their latency shows
    whether gather is index-driven: flat as the table grows, not proportional to it.
    """
    rng = random.Random(seed)
    found: list[tuple[str, str]] = []
    for props in rng.sample(samples, len(samples)):
        rare = [p for p in props if RARE_BAND[0] <= members.get(p, 0) <= RARE_BAND[1]]
        common = [p for p in props if COMMON_BAND[0] <= members.get(p, 0) <= COMMON_BAND[1]]
        if rare and common:
            found.append((rng.choice(rare), rng.choice(common)))
            if len(found) == count:
                break
    return found


def gather_pairs(samples: list[list[str]], count: int, seed: int = 7) -> list[tuple[str, str]]:
    """Pairs of properties held together by at least one record (so never empty).

    Each pair is two properties of a randomly chosen loaded record, so value ranks
    follow the data's own Zipf law: popular values meet popular ones (thousands of
    shared members) as often as the data says, and rare ones give small intersections.
    """
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    for _ in range(count):
        props = rng.choice(samples)
        a, b = rng.sample(props, 2)
        pairs.append((a, b))
    return pairs
