"""`aqven check` for the project files and flows: everything that can be known without running."""

from __future__ import annotations

from pathlib import Path

from aqven.engine.compile import FlowCompiler
from aqven.errors import ProjectError
from aqven.project.diagnostics import Diagnostic, sort_key
from aqven.project.loader import Project, load_project
from aqven.project.paths import inside


def check_flows(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    seen: set[tuple[str, str | None, int | None, str]] = set()
    for flow_id in project.flows:
        compiler = FlowCompiler(project)
        compiler.compile(flow_id)
        for d in compiler.diagnostics:
            key = (d.code, d.file, d.line, d.message)
            if key not in seen:  # a called flow's problems are found once per caller; report them once
                seen.add(key)
                out.append(d)
    return out


def check_agents(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for agent_id, agent in project.agents.items():
        file = f"agents/{agent_id}.yaml"
        if agent.simulator:
            path_part, sep, fn = agent.simulator.rpartition(":")
            line = project.doc_line(file, ("simulator",))
            if not sep or not path_part.endswith(".py") or not fn:
                out.append(
                    Diagnostic(
                        code="E_INVALID_VALUE",
                        severity="error",
                        file=file,
                        line=line,
                        message=f"simulator must be 'file.py:function', not {agent.simulator!r}",
                        hint="for example simulator: sim/agents.py:gpt",
                    )
                )
                continue
            try:
                path = inside(project.root, project.root, path_part, file=file, line=line)
            except ProjectError as exc:
                out.append(Diagnostic.from_error(exc))
                continue
            if not path.is_file():
                out.append(
                    Diagnostic(
                        code="E_FILE_MISSING",
                        severity="error",
                        file=file,
                        line=line,
                        message=f"simulator file {path_part!r} is missing",
                        hint="create it, or remove the simulator key",
                    )
                )
        else:
            out.append(
                Diagnostic(
                    code="W_NO_SIMULATOR",
                    severity="warning",
                    file=file,
                    line=1,
                    message=f"agent {agent_id!r} has no simulator; simulated runs of it fail",
                    hint="add simulator: <file.py:function> to run it offline",
                )
            )
        if agent.provider == "openai-compatible" and not agent.base_url:
            out.append(
                Diagnostic(
                    code="E_MISSING_KEY",
                    severity="error",
                    file=file,
                    line=project.doc_line(file, ("model",)),
                    message="an openai-compatible agent needs base_url",
                    hint="base_url: http://127.0.0.1:11434/v1 (for example)",
                )
            )
    return out


def check_datasets(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for dataset_id, dataset in project.datasets.items():
        file = f"datasets/{dataset_id}.yaml"
        first: dict[str, int] = {}
        for i, case in enumerate(dataset.cases):
            line = project.doc_line(file, ("cases", i, "name"))
            if case.name in first:
                out.append(
                    Diagnostic(
                        code="E_DUPLICATE_CASE",
                        severity="error",
                        file=file,
                        line=line,
                        message=f"case name {case.name!r} is used twice (first at item {first[case.name]})",
                        hint="case names are unique; never rename a case, add a new one",
                    )
                )
            else:
                first[case.name] = i + 1
        if not dataset.cases:
            out.append(
                Diagnostic(
                    code="W_EMPTY_DATASET",
                    severity="warning",
                    file=file,
                    line=1,
                    message=f"dataset {dataset_id!r} has no cases",
                    hint="add cases",
                )
            )
    return out


def check_project(root: Path) -> tuple[Project, list[Diagnostic]]:
    """Load and check a project; returns the project and every diagnostic, sorted, errors first."""
    project = load_project(root)
    diagnostics = list(project.diagnostics)
    if not any(d.code == "E_PROJECT_MISSING" for d in diagnostics):
        diagnostics += check_agents(project) + check_datasets(project) + check_flows(project)
    diagnostics.sort(key=sort_key)
    return project, diagnostics
