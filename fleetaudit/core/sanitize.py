"""Text from the data, made safe to show: on a terminal, on stderr, in a spreadsheet.

Node names, models, labels, file names and values come from exports anyone may have
written. Every terminal and stderr line fleetaudit prints passes :func:`shown`, and
every CSV it writes passes :func:`csv_safe` (docs/operations.md, "Hostile text"):

- control characters (C0, DEL, C1 and so ESC, which starts every terminal escape
  sequence), the bidirectional overrides and isolates, and the line and paragraph
  separators are written as visible escapes (``\\x1b``, ``\\u202e``): a value can neither
  set the terminal's title, clear its screen, move its cursor, forge a line of its own
  nor reorder what follows it;
- a value longer than the limit is cut, saying how long it was (the store and the
  ``--json`` documents keep it whole), so that one 4 MB label cannot make a table's
  layout take minutes;
- a CSV cell of text that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
  return gets a leading apostrophe, so a spreadsheet shows it as text instead of
  running it as a formula (OWASP's advice); ``--csv-raw`` writes cells as they are.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars loads with the first CSV, not with the command line
    import polars as pl

CELL_CHARS = 200
"""The longest value a table cell shows."""
LINE_CHARS = 2000
"""The longest line (a note, an error, a progress message) printed whole."""

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE_CHARS = (
    [chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7F, 0xA0)] + list(_BIDI)
    + ["\u2028", "\u2029"]
)  # fmt: skip
_UNSAFE = re.compile("[" + re.escape("".join(_UNSAFE_CHARS)) + "]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    """A visible spelling of one unsafe character: ``\\n``, ``\\x1b``, ``\\u202e``."""
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` as a terminal may show it: unsafe characters escaped, at most ``limit``
    characters. Linear in ``limit``, whatever the length of ``text``; what it returns
    it returns unchanged.

    >>> shown("\\x1b]0;pwned\\x07\\x1b[2J H20")
    '\\\\x1b]0;pwned\\\\x07\\\\x1b[2J H20'
    >>> shown("a\\nb\\u202ec"), shown("x" * 60 + " is not a number", limit=48)
    ('a\\\\nb\\\\u202ec', 'xxxxxxxxxxxxxxxxxx … (76 characters) …  a number')
    """
    if len(text) <= limit and _UNSAFE.search(text) is None:
        return text
    escaped = _escaped(text[:limit])
    if len(text) <= limit and len(escaped) <= limit:
        return escaped
    # the head and the tail (a reason ends with what is wrong), and the length between
    note = f" … ({len(text):,} characters) … "
    room = max(0, limit - len(note))
    tail = min(40, room // 3)
    return escaped[: room - tail] + note + (_escaped(text[-tail:])[-tail:] if tail else "")


def _escaped(text: str) -> str:
    return _UNSAFE.sub(lambda m: _escape(m.group()), text)


def cell(text: str) -> str:
    """A table cell's text: :func:`shown` at :data:`CELL_CHARS`."""
    return shown(text, CELL_CHARS)


# In CSV, line breaks and tabs inside a cell are data (the CSV quotes them); the rest is
# escaped as on the terminal, since CSV on stdout often lands on one.
_CSV_ESCAPES = {c: _escape(c) for c in _UNSAFE_CHARS if c not in "\n\t"}
_FORMULA = r"^[=+\-@\t\r]"


def csv_safe(frame: pl.DataFrame, raw: bool = False) -> pl.DataFrame:
    """The frame as fleetaudit writes it as CSV: each text cell that a spreadsheet would
    run as a formula (it begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
    return) gets a leading apostrophe, and control characters are escaped as on the
    terminal; numbers are left alone. ``raw`` (``--csv-raw``): the frame as it is.
    """
    import polars as pl

    if raw:
        return frame
    texts = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    if not texts:
        return frame
    patterns, escapes = list(_CSV_ESCAPES), list(_CSV_ESCAPES.values())
    return frame.with_columns(
        pl.when(pl.col(name).str.contains(_FORMULA))
        .then(pl.lit("'") + pl.col(name))
        .otherwise(pl.col(name))
        .str.replace_many(patterns, escapes)
        .alias(name)
        for name in texts
    )


def quoted(value: object, width: int = 60) -> str:
    """A value as an error message quotes it: its ``repr``, cut to ``width`` characters
    (a long text is cut before its ``repr`` is built).

    >>> quoted("16Gi"), quoted(None), quoted("x" * 100, width=12)
    ("'16Gi'", 'None', "'xxxxxxxx...")
    """
    text = repr(value[: width + 1] if isinstance(value, str) else value)
    return text if len(text) <= width else text[: width - 3] + "..."

