"""The registry of reads: each query field a read answers, declared once.

A read is one module of its kind's package holding what the read is: its arguments,
read once from the field's GraphQL argument values (`arguments`, by their GraphQL
names); its binder (`bind`: checks them, puts the values its statement takes under the
site's prefix, and says its shape, a type of its own); its SQL (`sql`: the field's JSON
for the compiled path, built with `store.reads.compiled_sql`); and what it finds for a
resolver (`find`, on the request's snapshot, from the same GraphQL values: it reads its
arguments with the same `arguments`). Both paths run the registered read: the compiled
path binds and builds it, a resolver hands the field's values to `find` in one call and
renders what it returns.

Reads join here from the kinds' side (`store.kinds` registers them, as it registers the
kinds), so the generic compiler names none.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from store.reads.compiled_sql import Compiler, Sel
    from store.reads.snapshot import Reader

# The values a statement takes, by parameter name (and what its reads put there).
Values = dict[str, Any]
# Whether the field being read selects a field at a path of names ("items", "highlights").
Wants = Callable[..., bool]
# What a read looks up before its statement, on the request's snapshot: it puts what it
# found in the values under the site's prefix, or raises what its resolver raises.
Before = Callable[["Reader", str, Values], Awaitable[None]]


class Ordinary(ValueError):
    """This request is answered the ordinary way: its resolver words the answer (a
    refusal, or nothing to find)."""


class Read(Protocol):
    """The declaration of one read."""

    @property
    def field(self) -> str:
        """The query field it answers, as GraphQL names it."""
        ...

    @property
    def before(self) -> Before | None:
        """What the compiled path looks up before the statement, if anything."""
        ...

    def arguments(self, given: Mapping[str, Any]) -> Any:
        """Its arguments from the field's coerced GraphQL values (by GraphQL name)."""
        ...

    def bind(self, values: Values, prefix: str, args: Any, lanes: Sequence[str]) -> Hashable:
        """Check `args` as the resolver does (raising what it raises, or `Ordinary`), put
        the statement's values under `prefix`, and say the shape."""
        ...

    def sql(self, compiler: Compiler, sel: Sel, shape: Any) -> str:
        """SQL: the field's JSON, for the shape `bind` said."""
        ...

    async def find(
        self, db: Reader, given: Mapping[str, Any], lanes: Sequence[str], wants: Wants
    ) -> Any:
        """What the read finds for a resolver, in the lanes the caller may read, its
        arguments read from `given` (the field's GraphQL values, by name, and what the
        read takes from the request rather than from GraphQL, such as a search's vector
        scope)."""
        ...


_READS: dict[str, Read] = {}


def register(read: Read) -> None:
    """Declare a read; a field is answered by one read."""
    if read.field in _READS:
        raise ValueError(f"the field {read.field} is already answered by a read")
    _READS[read.field] = read


def unregister(field: str) -> None:
    """Withdraw a read (a read declared by a test)."""
    del _READS[field]


def read(field: str) -> Read:
    """The read answering `field`."""
    return _READS[field]


def reads() -> tuple[Read, ...]:
    return tuple(_READS.values())
