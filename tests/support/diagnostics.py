"""What every `aqven check` diagnostic must look like."""

from __future__ import annotations

import re

from aqven.project.diagnostics import Diagnostic

CODE_RE = re.compile(r"^[EW]_[A-Z_]+$")


def assert_well_formed(diagnostics: list[Diagnostic]) -> None:
    for d in diagnostics:
        assert CODE_RE.match(d.code), d
        assert d.code != "E_INTERNAL", d.render()
        assert d.severity in ("error", "warning")
        assert d.message.strip(), d
        assert d.hint.strip(), d
        assert d.line is None or d.line >= 1, d
