"""Regular expressions a project supplies (a `regex` check's pattern), run in linear time by RE2.

Python's `re` backtracks: a pattern such as ``(a+)+$`` on a long output takes exponential time and would hold the
server's event loop. RE2 (google-re2) guarantees time linear in the text, at the price of a few features it
refuses: backreferences (``\\1``) and lookarounds (``(?=…)``, ``(?<!…)``). A pattern that uses them is a clear
error naming what RE2 lacks, caught by `aqven check` before any series runs.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled pattern: a pathological pattern fails, it never swaps
UNSUPPORTED_HINT = (
    "patterns run on RE2 (linear time, safe on any output): use no backreferences (\\1) or lookarounds "
    "((?=...), (?!...), (?<=...), (?<!...)); the rest of Python's syntax works"
)


class RegexError(ValueError):
    """A pattern RE2 cannot compile; the message says why, in text."""


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str, *, ignore_case: bool = False) -> Any:
    """The compiled pattern (cached), or `RegexError`."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # the error comes back as an exception, not as a line on the server's stderr
    options.max_mem = MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise RegexError(text) from None


def search(pattern: str, text: str, *, ignore_case: bool = False) -> str | None:
    """The first match of `pattern` in `text` (its text), or None; `RegexError` for a pattern RE2 refuses."""
    m = compile_pattern(pattern, ignore_case=ignore_case).search(text)
    return None if m is None else str(m.group(0))
