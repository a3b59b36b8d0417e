"""Every diagnostic code the source can emit is explained in docs/reference/diagnostics.md."""

from __future__ import annotations

import re

from support.paths import REPO

ROOT = REPO


def test_every_diagnostic_code_is_documented() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src/aqven").rglob("*.py"))
    codes = set(re.findall(r"\"([EW]_[A-Z_]+)\"", source))
    assert len(codes) > 40
    documented = set(re.findall(r"`([EW]_[A-Z_]+)`", (ROOT / "docs/reference/diagnostics.md").read_text()))
    assert codes - documented == set()
