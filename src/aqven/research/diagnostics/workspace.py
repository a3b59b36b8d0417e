"""`aqven check`: the project's files and flows, then its experiments and their findings, in one sorted list."""

from __future__ import annotations

from pathlib import Path

from aqven.engine.check import check_loaded, check_project, disk_steps, loaded_steps
from aqven.project.diagnostics import Diagnostic, sort_key
from aqven.research.diagnostics.approvals import check_approvals
from aqven.research.diagnostics.experiments import check_experiment
from aqven.research.diagnostics.findings import check_findings
from aqven.research.experiments.workspace import Workspace


def check_workspace(root: Path) -> tuple[Workspace, list[Diagnostic]]:
    """`aqven check`: project files, flows, experiments (and their findings)."""
    project, diagnostics = check_project(root)
    ws = Workspace.of(project)  # the project check_project loaded: read the files once
    diagnostics = (
        list(diagnostics) + ws.load_diagnostics + _experiments(ws) + check_findings(ws) + check_approvals(root)
    )
    diagnostics.sort(key=sort_key)
    return ws, diagnostics


def loaded_diagnostics(ws: Workspace) -> list[Diagnostic]:
    """What `check_workspace` finds in the files `ws` was loaded from, without reading them again (a series'
    start asks on every start). What depends only on those files is found once per loaded workspace (the server
    loads a new one when they change); .aqven/local.yaml, the simulators and the findings, which that reload
    does not watch, are read each time."""
    if ws.checked is None:
        ws.checked = (check_loaded(ws.project, loaded_steps()), _experiments(ws))
    files, experiments = ws.checked
    # In check_workspace's order before its (stable) sort: equal keys come out the same.
    diagnostics = [
        *ws.project.diagnostics,
        *check_loaded(ws.project, disk_steps()),
        *files,
        *ws.load_diagnostics,
        *experiments,
        *check_findings(ws),
    ]
    diagnostics.sort(key=sort_key)
    return diagnostics


def _experiments(ws: Workspace) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for exp in ws.experiments.values():
        out += check_experiment(ws.project, exp, ws.experiments)
    return out
