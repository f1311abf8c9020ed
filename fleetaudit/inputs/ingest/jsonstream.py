"""JSON documents read one value at a time, for exports too large to hold whole.

A kubectl List of a million pods, or a Prometheus ``query_range`` response of a million
series, is one JSON document. :class:`JsonStream` walks its outer structure itself and
hands each inner value (a pod, a series) to the standard library's C decoder on a
buffer that slides along the file: memory holds one value at a time, not the document.

It is the one JSON reader of every format that streams (``kubernetes``,
``prometheus``). Each format subclasses it to say, in its own words, what a failure
means (:meth:`JsonStream.explain`, :meth:`JsonStream.too_deep`,
:meth:`JsonStream.too_long`); every failure is one :class:`InputError` naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetaudit.core.errors import InputError

CHUNK_CHARS = 1 << 20
"""Characters read at a time; a value longer than the buffer doubles it."""

_NOT_WHITE = re.compile(r"[^ \t\n\r]")  # JSON's white space is these four


class JsonStream:
    """A JSON text read a chunk at a time, one value at a time.

    Args:
        path: the file, named by every error.
        read: ``read(n)``: up to ``n`` more characters of the text, ``""`` at its end
            (it raises :class:`InputError` itself where the file cannot be read).
        decoder: decodes each value (its ``parse_*`` hooks may refuse values with
            ``ValueError``, such as NaN, which becomes a syntax error).
        longest: the longest value, in characters, that the stream takes (None: no
            bound); a longer one is :meth:`too_long`.
    """

    def __init__(
        self,
        path: Path,
        read: Callable[[int], str],
        decoder: json.JSONDecoder,
        longest: int | None = None,
    ) -> None:
        self.path, self.read, self.decoder, self.longest = path, read, decoder, longest
        self.buf, self.pos, self.eof = "", 0, False
        self.lines = 1  # the line of the buffer's first character

    # -- what failures mean: each format's words --------------------------------------
    def explain(self, reason: str, line: int) -> str:
        """The error text of JSON that cannot be read (``reason``) at ``line``."""
        return f"not JSON (line {line}): {reason}"

    def too_deep(self, what: str) -> str:
        """The error text of a value nested deeper than Python's decoder goes."""
        return f"{what} is JSON nested too deeply to read"

    def too_long(self, what: str) -> str:
        """The error text of a value longer than ``longest`` characters."""
        return f"{what} is longer than {self.longest} characters"

    def syntax_error(self, reason: str, at: int | None = None) -> InputError:
        """An error for text that is no JSON of the expected shape, at ``at`` (default:
        the current position)."""
        return InputError(str(self.path), self.explain(reason, self.line(at)))

    def line(self, at: int | None = None) -> int:
        """The line of the buffer's position ``at`` (default: the current one), from 1."""
        return self.lines + self.buf.count("\n", 0, self.pos if at is None else at)

    # -- reading -------------------------------------------------------------------------
    def _more(self, what: str) -> bool:
        """Read on (at least as much as the buffer holds unread); False at the end."""
        if self.eof:
            return False
        unread = len(self.buf) - self.pos
        if self.longest is not None and unread > self.longest:
            raise InputError(str(self.path), self.too_long(what))
        text = self.read(max(unread, CHUNK_CHARS))
        if not text:
            self.eof = True
            return False
        self.lines += self.buf.count("\n", 0, self.pos)
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space (``""`` at the end), not taken."""
        while True:
            found = _NOT_WHITE.search(self.buf, self.pos)
            if found is not None:
                self.pos = found.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self._more("the text"):
                return ""

    def expect(self, chars: str, where: str = "") -> str:
        """Take the next character, which must be one of ``chars``; ``where`` says where
        (``"in the result"``) in the error."""
        found = self.peek()
        if not found or found not in chars:
            shown = repr(found) if found else "the end of the file"
            expected = " or ".join(repr(c) for c in chars)
            raise self.syntax_error(f"expected {expected}{' ' + where if where else ''}, "
                                    f"found {shown}")  # fmt: skip
        self.pos += 1
        return found

    def value(self, what: str = "a value") -> Any:
        """The next JSON value, decoded; the buffer grows until it holds the value whole.
        ``what`` names the value in errors (``"series 3"``)."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if _cut(exc, self.buf) and self._more(what):
                    continue
                raise self.syntax_error(f"{exc.msg} ({what})", exc.pos) from None
            except RecursionError:
                raise InputError(str(self.path), self.too_deep(what)) from None
            except ValueError as exc:  # refused by the decoder's hooks: NaN, Infinity
                raise self.syntax_error(f"{exc} ({what})") from None
            # a number or literal that ends where the buffer ends may go on in the next chunk
            if (
                end == len(self.buf)
                and not isinstance(value, (dict, list, str))
                and self._more(what)
            ):
                continue
            self.pos = end
            return value


def _cut(exc: json.JSONDecodeError, buf: str) -> bool:
    """Whether a decoding error may be the buffer's end cutting a value short (rather
    than text that is not JSON): a string left open, or a failure within the last
    characters (a number, literal or escape cut in two). Text that is not JSON fails at
    once, without reading the rest of the file into the buffer."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(buf) - 16
