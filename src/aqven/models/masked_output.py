"""The process's own output with keys masked: what a project's code prints reaches the server's log
(`.aqven/server.log`) through it, so a code node that prints a key variable's value writes `***` there."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from aqven.models.outcomes import redact


class MaskedStream:
    """A text stream that masks every key value (`outcomes.redact`) of what is written through it. A key split
    over several writes is not seen: a print writes its text in one."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(redact(text) if text else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, buffer ...: the stream's own
        return getattr(self._inner, name)


def mask_output() -> None:
    """Mask sys.stdout and sys.stderr of this process (once; before logging takes a reference to them)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, MaskedStream):
            setattr(sys, name, MaskedStream(stream))
