"""`aqven check` for findings: E_FINDING_TAMPERED, E_FINDING_SERIES_MISSING, W_FINDING_UNVERIFIED, E_SPLIT_CHANGED
and W_FINDINGS_STALE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aqven.project.diagnostics import Diagnostic
from aqven.project.paths import link_outside, rel, within
from aqven.research.findings.records import FINDINGS_MD, read_findings, read_findings_md, split_hash
from aqven.research.findings.verify import SERIES_MISSING, Standing, Verifier
from aqven.research.findings.writing import render_findings_md

if TYPE_CHECKING:
    from pathlib import Path

    from aqven.research.experiments.workspace import Workspace


def _package_line(root: Path) -> int:
    try:
        lines = (root / "aqven.yaml").read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    return next((i for i, line in enumerate(lines, start=1) if line.startswith("package:")), 1)


def _key_line(path: Path, key: str) -> int:
    """The line of a top-level key of a finding file (1 when it cannot be read)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    return next((i for i, line in enumerate(lines, start=1) if line.startswith(f"{key}:")), 1)


HINTS = {
    SERIES_MISSING: "a finding is written by a held-out series that ran on this machine: delete this file if it was "
    "made up; if it was written on another machine, run `aqven check` there",
}


def check_findings(ws: Workspace) -> list[Diagnostic]:
    root = ws.project.root
    findings = read_findings(root)
    out: list[Diagnostic] = []
    standing: dict[Path, Standing] = {}
    split_changed: list[str] = []
    current_split = split_hash(ws.project.split_package)
    with Verifier(root) as verifier:
        for path, data in findings:
            if not within(root, path):
                out.append(Diagnostic.from_error(link_outside(root, path)))
                continue
            result = verifier.verify(path, data)
            standing[path] = result.standing
            if not result.ok:
                out.append(
                    Diagnostic(
                        code=result.code,
                        severity="error",
                        file=rel(root, path),
                        line=_key_line(path, "series_id") if result.code == SERIES_MISSING else 1,
                        message=f"this finding does not verify: {result.problem}",
                        hint=HINTS.get(
                            result.code,
                            "restore it with git (`git checkout -- FILE`); to revise a finding, run a new series on "
                            "held-out cases",
                        ),
                    )
                )
                continue
            if result.unchecked:
                out.append(
                    Diagnostic(
                        code="W_FINDING_UNVERIFIED",
                        severity="warning",
                        file=rel(root, path),
                        line=1,
                        message=f"only its content hash was checked: {result.unchecked}",
                        hint="the machine that ran the series holds its attempts and the seal's key (.aqven/): "
                        "run `aqven check` there to check its seal and recompute its verdict",
                    )
                )
            found = (data or {}).get("split")
            if isinstance(found, str) and found != current_split:
                split_changed.append(rel(root, path))
    if split_changed:
        out.append(
            Diagnostic(
                code="E_SPLIT_CHANGED",
                severity="error",
                file="aqven.yaml",
                line=_package_line(root),
                message=f"`package:` is not the one the split of {len(split_changed)} finding(s) was drawn with "
                f"(first: {split_changed[0]}): it salts the split, so changing it redraws the halves and puts "
                "held-out cases that were read on the working side",
                hint="put `package:` back as it was when the findings were written; a new split needs new "
                "held-out cases, not a new salt",
            )
        )
    md = root / FINDINGS_MD
    if md.is_file() and not within(root, md):
        out.append(Diagnostic.from_error(link_outside(root, md)))
    elif findings or md.is_file():
        expected = render_findings_md(root, findings, verified=lambda p, _d: standing.get(p, "refused"))
        current = read_findings_md(root)
        if current != expected:
            out.append(
                Diagnostic(
                    code="W_FINDINGS_STALE",
                    severity="warning",
                    file=FINDINGS_MD,
                    line=1,
                    message="FINDINGS.md does not match the finding files that verify",
                    hint="it is generated: the project server rewrites it on start, or delete it and run `aqven serve`",
                )
            )
    return out
