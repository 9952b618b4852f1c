"""Text from outside (file names, paths) made safe to print on a terminal."""

from __future__ import annotations

import os
import unicodedata

# Categories a terminal may act on rather than show: control characters (escape
# sequences, newlines), format characters (bidirectional overrides), line and paragraph
# separators, and the lone surrogates a file name that is not UTF-8 decodes to.
_UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str | os.PathLike[str]) -> str:
    """`text` (or a path) with every character a terminal would act on written as an
    escape, as Python writes it (`\\x1b`, `\\n`, `\\u202e`); a byte that was not UTF-8 as
    `\\xNN`."""
    text = os.fspath(text)
    if text.isprintable():
        return text
    return "".join(_escaped(c) if unicodedata.category(c) in _UNSHOWN else c for c in text)


def _escaped(c: str) -> str:
    code = ord(c)
    if c in _NAMED:
        return _NAMED[c]
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for one undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
