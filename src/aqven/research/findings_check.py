"""`aqven check` for findings: E_FINDING_TAMPERED and W_FINDINGS_STALE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aqven.project.diagnostics import Diagnostic
from aqven.project.paths import link_outside, rel, within
from aqven.research.findings import (
    FINDINGS_MD,
    is_intact,
    read_findings,
    read_findings_md,
    render_findings_md,
)

if TYPE_CHECKING:
    from aqven.research.workspace import Workspace


def check_findings(ws: Workspace) -> list[Diagnostic]:
    root = ws.project.root
    findings = read_findings(root)
    out: list[Diagnostic] = []
    for path, data in findings:
        if not within(root, path):
            out.append(Diagnostic.from_error(link_outside(root, path)))
        elif data is None or not is_intact(data):
            out.append(
                Diagnostic(
                    code="E_FINDING_TAMPERED",
                    severity="error",
                    file=rel(root, path),
                    line=1,
                    message="this finding was edited after the server wrote it (its integrity hash does not match)",
                    hint="restore it with git (`git checkout -- FILE`); to revise a finding, run a new series on "
                    "held-out cases",
                )
            )
    md = root / FINDINGS_MD
    if md.is_file() and not within(root, md):
        out.append(Diagnostic.from_error(link_outside(root, md)))
    elif findings or md.is_file():
        expected = render_findings_md(root, findings)
        current = read_findings_md(root)
        if current != expected:
            out.append(
                Diagnostic(
                    code="W_FINDINGS_STALE",
                    severity="warning",
                    file=FINDINGS_MD,
                    line=1,
                    message="FINDINGS.md does not match the finding files",
                    hint="it is generated: the project server rewrites it on start, or delete it and run `aqven serve`",
                )
            )
    return out
