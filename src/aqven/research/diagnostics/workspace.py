"""`aqven check`: the project's files and flows, then its experiments and their findings, in one sorted list."""

from __future__ import annotations

from pathlib import Path

from aqven.engine.check import check_project
from aqven.project.diagnostics import Diagnostic, sort_key
from aqven.research.diagnostics.experiments import check_experiment
from aqven.research.diagnostics.findings import check_findings
from aqven.research.experiments.workspace import Workspace


def check_workspace(root: Path) -> tuple[Workspace, list[Diagnostic]]:
    """`aqven check`: project files, flows, experiments (and their findings)."""
    project, diagnostics = check_project(root)
    ws = Workspace.of(project)  # the project check_project loaded: read the files once
    diagnostics = list(diagnostics) + ws.load_diagnostics
    for exp in ws.experiments.values():
        diagnostics += check_experiment(ws.project, exp, ws.experiments)
    diagnostics += check_findings(ws)
    diagnostics.sort(key=sort_key)
    return ws, diagnostics
