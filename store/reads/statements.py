"""Statements with fixed text and named parameters, numbered `$n` for asyncpg.

asyncpg prepares a statement once per connection and text, so every read statement
is built once per shape (never with values in its text, never with `IN` lists that
grow with the input: lists go in as one array parameter, `= ANY($n)`). A statement
names its parameters; the caller passes them by name, in any order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Statement:
    """SQL text with `$n` placeholders and the name bound to each."""

    text: str
    names: tuple[str, ...]

    def args(self, values: Mapping[str, Any]) -> list[Any]:
        return [values[name] for name in self.names]


class Params:
    """Hands out `$n` placeholders by name; a name used twice gets the same number."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str, cast: str | None = None) -> str:
        if name not in self.names:
            self.names.append(name)
        placeholder = f"${self.names.index(name) + 1}"
        return f"{placeholder}::{cast}" if cast else placeholder

    def statement(self, text: str) -> Statement:
        return Statement(" ".join(text.split()), tuple(self.names))


@dataclass(frozen=True)
class PageSql:
    """One read's SQL, whichever path renders it: its page (at most `limit` rows, in
    the read's order) and what counts every row, both over the CTEs `ctes` defines."""

    page: str
    count: str
    ctes: str = ""


def page_rows(p: Params, read: PageSql, count: bool) -> Statement:
    """The statement of a read's rows: `total` (NULL unless `count`) beside each row of
    the page; counted, an empty page is one row of NULLs that holds the count."""
    ctes = f"WITH {read.ctes} " if read.ctes else ""
    if not count:
        return p.statement(f"{ctes}SELECT NULL::bigint AS total, q.* FROM ({read.page}) q")
    return p.statement(
        f"{ctes}SELECT ({read.count}) AS total, q.* FROM (SELECT 1) c "
        f"LEFT JOIN LATERAL ({read.page}) q ON true"
    )
