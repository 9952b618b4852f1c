"""Names from outside are printed one line each, with nothing a terminal would act on."""

from __future__ import annotations

import os
from pathlib import Path

from store.printable import printable


def test_what_a_terminal_acts_on_is_escaped_and_the_rest_kept() -> None:
    assert printable("notes/été 2026.md") == "notes/été 2026.md"
    assert printable("x\x1b]0;pwned\x07\x1b[2J.md") == "x\\x1b]0;pwned\\x07\\x1b[2J.md"
    assert printable("a\nb\r\tc\x7f\x9b") == "a\\nb\\r\\tc\\x7f\\x9b"
    # A right-to-left override and a line separator.
    assert printable("invoice\u202egpj.md\u2028") == "invoice\\u202egpj.md\\u2028"


def test_a_name_that_is_not_utf8_shows_its_bytes() -> None:
    name = os.fsdecode(b"caf\xe9\xff.md")
    assert printable(Path("/tmp") / name) == "/tmp/caf\\xe9\\xff.md"
