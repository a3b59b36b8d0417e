"""`aqven check` for the project files and flows: everything that can be known without running."""

from __future__ import annotations

import importlib.util
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from aqven.engine.compile import FlowCompiler
from aqven.errors import ProjectError
from aqven.project.diagnostics import Diagnostic, sort_key
from aqven.project.loader import Project, load_project, validation_diagnostics
from aqven.project.local import LocalSettings, read_local
from aqven.project.local_servers import LOCAL_SERVERS, working_modes
from aqven.project.paths import inside, is_file, state_dir
from aqven.project.providers import PROVIDERS
from aqven.project.pycode import load_function, parse_ref
from aqven.project.schema import AgentSpec, ProjectConfig
from aqven.project.yaml_source import read_yaml


def _diag(code: str, message: str, file: str | None, line: int | None, hint: str, warning: bool = False) -> Diagnostic:
    return Diagnostic.of(code, message, file=file, line=line, hint=hint, severity="warning" if warning else "error")


def check_flows(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for flow_id in project.flows:
        compiler = FlowCompiler(project)
        compiler.compile(flow_id)
        for d in compiler.diagnostics:
            if d not in out:  # a called flow's problems are found once per caller; report them once
                out.append(d)
    return out


def check_agents(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for agent_id, agent in project.agents.items():
        file = project.file_of("agent", agent_id) or f"agents/{agent_id}.yaml"
        if agent.simulator:
            out.extend(_check_simulator(project, agent.simulator, file))
        else:
            out.append(
                _diag(
                    "W_NO_SIMULATOR",
                    f"agent {agent_id!r} has no simulator; simulated runs of it fail",
                    file,
                    1,
                    "add simulator: <file.py:function> to run it offline",
                    warning=True,
                )
            )
        out.extend(_check_server(project, agent_id, agent, file))
        provider = PROVIDERS.get(agent.provider)
        if provider is not None and provider.sdk_module and not _importable(provider.sdk_module):
            out.append(
                _diag(
                    "W_PROVIDER_SDK_MISSING",
                    f"provider {agent.provider} needs its SDK ({provider.sdk_module}), which is not installed: "
                    "its live calls fail (simulated runs work)",
                    file,
                    project.doc_line(file, ("model",)),
                    f'pip install "pydantic-ai-slim[{provider.sdk_extra}]" into AQVEN\'s environment',
                    warning=True,
                )
            )
        if provider is not None and provider.needs_base_url and not agent.base_url and not agent.server:
            out.append(
                _diag(
                    "E_BASE_URL_MISSING",
                    f"an {agent.provider} agent needs base_url",
                    file,
                    project.doc_line(file, ("model",)),
                    "base_url: http://127.0.0.1:11434/v1 (for example)",
                )
            )
    return out


def _importable(module: str) -> bool:
    """True when `module`'s top package can be imported here (found without importing it)."""
    return importlib.util.find_spec(module.split(".")[0]) is not None


def _check_server(project: Project, agent_id: str, agent: AgentSpec, file: str) -> list[Diagnostic]:
    """A local server's known broken output modes, a `server:` on another provider, and a base_url without /v1."""
    out: list[Diagnostic] = []
    if agent.server is not None and agent.provider != "openai-compatible":
        line = project.doc_line(file, ("server",))
        out.append(
            _diag(
                "E_SERVER_PROVIDER",
                f"server: {agent.server} needs provider openai-compatible",
                file,
                line,
                "model: openai-compatible:<the model's name on the server>",
            )
        )
    server = LOCAL_SERVERS.get(agent.server or "")
    if server is not None and agent.output_mode in server.broken_modes:
        modes = ", ".join(working_modes(server.name))
        out.append(
            _diag(
                "W_OUTPUT_MODE_UNSUPPORTED",
                f"agent {agent_id!r}: output_mode {agent.output_mode} is known not to work on {server.name}: "
                f"{server.broken_modes[agent.output_mode]}",
                file,
                project.doc_line(file, ("output_mode",)),
                f"use output_mode: {working_modes(server.name)[0]} (works on {server.name}: {modes})",
                warning=True,
            )
        )
    if agent.provider == "openai-compatible" and agent.base_url and "/v1" not in agent.base_url:
        out.append(
            _diag(
                "W_BASE_URL_NO_V1",
                f"base_url {agent.base_url!r} has no /v1: OpenAI-compatible servers answer at "
                "<base>/v1/chat/completions",
                file,
                project.doc_line(file, ("base_url",)),
                f"base_url: {agent.base_url.rstrip('/')}/v1",
                warning=True,
            )
        )
    return out


def _check_simulator(project: Project, ref: str, file: str) -> list[Diagnostic]:
    line = project.doc_line(file, ("simulator",))
    try:
        path_part, fn = parse_ref(ref, module_form=True)
        path = inside(project.root, project.root, path_part, file=file, line=line)
    except ValueError as exc:  # the schema already refused a malformed reference; kept for callers that skip it
        return [_diag("E_FUNCTION_REF", str(exc), file, line, "for example simulator: sim/agents.py:gpt")]
    except ProjectError as exc:
        return [Diagnostic.from_error(exc)]
    if not is_file(path):
        return [
            _diag(
                "E_FILE_MISSING",
                f"simulator file {path_part!r} is missing",
                file,
                line,
                "create it (relative to the project folder), or remove the simulator key",
            )
        ]
    try:
        load_function(project.root, path, fn)
    except ProjectError as exc:
        if exc.code == "E_CODE_IMPORT":
            return [Diagnostic.from_error(exc)]
        return [_diag(exc.code, exc.message, file, line, exc.hint)]
    return []


def check_datasets(project: Project) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for (kind, dataset_id), file in project.files.items():
        doc = project.docs.get(file)
        if kind != "dataset" or doc is None or not isinstance(doc.data, dict):
            continue
        cases = doc.data.get("cases")
        first: dict[str, int] = {}
        for i, case in enumerate(cases if isinstance(cases, list) else []):
            name = case.get("name") if isinstance(case, dict) else None
            if not isinstance(name, str):
                continue  # a missing or mistyped name is reported by the loader
            line = doc.line_of(("cases", i, "name"))
            if name in first:
                out.append(
                    _diag(
                        "E_DUPLICATE_CASE",
                        f"case name {name!r} is used twice (first at line {first[name]})",
                        file,
                        line,
                        "case names are unique within a dataset; never rename a case, add a new one",
                    )
                )
            else:
                first[name] = line or i + 1
        dataset = project.datasets.get(dataset_id)
        if dataset is not None and not dataset.cases:
            out.append(
                _diag("W_EMPTY_DATASET", f"dataset {dataset_id!r} has no cases", file, 1, "add cases", warning=True)
            )
    return out


def check_local(project: Project) -> list[Diagnostic]:
    """`.aqven/local.yaml`: checked like the project's files, then read the way the commands read it."""
    path = state_dir(project.root) / "local.yaml"
    if not is_file(path):
        return []
    try:
        doc = read_yaml(path, ".aqven/local.yaml")
    except ProjectError as exc:
        return [Diagnostic.from_error(exc)]
    if doc.data is None:
        return []  # an empty local.yaml changes nothing
    if not isinstance(doc.data, dict):
        return [_diag("E_NOT_MAPPING", "the file must hold a YAML mapping of keys", doc.file, 1, "e.g. simulate: true")]
    try:
        LocalSettings.model_validate(doc.data)
    except ValidationError as err:
        return validation_diagnostics(err, doc)
    try:
        read_local(project.root)
    except ProjectError as exc:
        return [Diagnostic.from_error(exc)]
    return []


def _guarded(step: Callable[[Project], list[Diagnostic]], project: Project) -> list[Diagnostic]:
    """Run one part of the check; a crash in it becomes a diagnostic instead of ending the whole check."""
    try:
        return step(project)
    except Exception as exc:  # a bug in AQVEN, not in the project: say so, keep checking the rest
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [
            _diag(
                "E_INTERNAL",
                f"aqven check crashed in {step.__name__}: {type(exc).__name__}: {exc} "
                f"({Path(where.filename).name}:{where.lineno})",
                None,
                None,
                "this is a bug in AQVEN; please report it with the file that triggers it",
            )
        ]


def _raise(exc: Exception) -> list[Diagnostic]:
    raise exc


Step = Callable[[Project], list[Diagnostic]]


def check_loaded(project: Project, steps: Sequence[Step]) -> list[Diagnostic]:
    """What `steps` find in an already loaded project, in step order, unsorted (nothing without aqven.yaml)."""
    if any(d.code == "E_PROJECT_MISSING" for d in project.diagnostics):
        return []
    out: list[Diagnostic] = []
    for step in steps:
        out += _guarded(step, project)
    return out


def disk_steps() -> tuple[Step, ...]:
    """The steps that also read files a loaded project does not hold (.aqven/local.yaml, the simulators' code);
    check_project runs them first. Looked up when called: a test replaces one."""
    return (check_local, check_agents)


def loaded_steps() -> tuple[Step, ...]:
    """The steps that read only what a loaded project holds."""
    return (check_datasets, check_flows)


def check_project(root: Path) -> tuple[Project, list[Diagnostic]]:
    """Load and check a project; returns the project and every diagnostic, sorted, errors first."""
    try:
        project = load_project(root)
    except Exception as exc:  # a bug in AQVEN: report it like any other problem, never as a traceback
        crash = exc
        project = Project(root=root, config=ProjectConfig(package="project"))
        project.diagnostics += _guarded(lambda _p: _raise(crash), project)
        return project, project.diagnostics
    diagnostics = list(project.diagnostics) + check_loaded(project, (*disk_steps(), *loaded_steps()))
    diagnostics.sort(key=sort_key)
    return project, diagnostics
