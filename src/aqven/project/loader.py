"""Load a project folder into typed objects, collecting diagnostics instead of raising.

`load_project` never raises for a broken project: every problem becomes a `Diagnostic`, and the
parts that did load stay usable, so `aqven check` can report everything in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from aqven.errors import ProjectError
from aqven.project.diagnostics import Diagnostic, sort_key
from aqven.project.paths import rel
from aqven.project.schema import AgentSpec, Dataset, FlowSpec, ProjectConfig
from aqven.project.yaml_source import PathKey, YamlDoc, read_yaml

M = TypeVar("M", bound=BaseModel)
NODE_KINDS = {"llm", "code", "call", "human", "group"}


@dataclass
class FlowSource:
    """A flow with the folder its prompt and code files are read from."""

    spec: FlowSpec
    folder: Path
    doc: YamlDoc
    local_to: str | None = None  # the experiment id for an experiment's local flow


@dataclass
class Project:
    root: Path
    config: ProjectConfig
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    datasets: dict[str, Dataset] = field(default_factory=dict)
    flows: dict[str, FlowSource] = field(default_factory=dict)
    docs: dict[str, YamlDoc] = field(default_factory=dict)  # relative file -> parsed doc
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def package(self) -> str:
        return self.config.package

    def doc_line(self, file: str, path: PathKey) -> int | None:
        doc = self.docs.get(file)
        return doc.line_of(path) if doc else None

    def error(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        hint: str = "",
        severity: str = "error",
    ) -> None:
        self.diagnostics.append(
            Diagnostic(
                code=code,
                severity="error" if severity == "error" else "warning",
                file=file,
                line=line,
                message=message,
                hint=hint,
            )
        )


def _clean_loc(data: Any, loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """Drop pydantic's union tags (the node kind) from an error location, keeping real keys."""
    out: list[str | int] = []
    current = data
    for part in loc:
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and part < len(current)
        ):
            out.append(part)
            current = current[part]
        elif isinstance(part, str) and (part in NODE_KINDS or part.startswith("function-")):
            continue
        else:
            out.append(part)
            current = None
    return tuple(out)


_CODES = {
    "extra_forbidden": ("E_UNKNOWN_KEY", "remove the key or fix its spelling; see docs/reference/"),
    "missing": ("E_MISSING_KEY", "add the key; see docs/reference/ for what each file needs"),
    "union_tag_invalid": ("E_UNKNOWN_NODE_KIND", "kind is one of llm, code, call, group, human"),
    "union_tag_not_found": ("E_MISSING_KEY", "every node needs a kind: llm, code, call, group or human"),
    "string_pattern_mismatch": ("E_INVALID_ID", "ids use letters, digits, _ and -, and start with a letter or _"),
}


def validation_diagnostics(err: ValidationError, doc: YamlDoc) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for e in err.errors():
        loc = _clean_loc(doc.data, tuple(e["loc"]))
        etype = e["type"]
        if etype in _CODES:
            code, hint = _CODES[etype]
        elif etype.endswith(("_type", "_parsing")) or etype in {
            "model_type",
            "dict_type",
            "list_type",
            "is_instance_of",
        }:
            code, hint = "E_WRONG_TYPE", "give a value of the expected type"
        elif etype in {
            "greater_than",
            "greater_than_equal",
            "less_than",
            "less_than_equal",
            "too_short",
            "too_long",
            "string_too_long",
            "string_too_short",
        }:
            code, hint = "E_VALUE_RANGE", "give a value inside the allowed range"
        else:
            code, hint = "E_INVALID_VALUE", "fix the value; see docs/reference/"
        where = ".".join(str(p) for p in loc) or "(file)"
        msg = e["msg"].removeprefix("Value error, ")
        if etype == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
        elif etype == "missing":
            msg = f"missing key {where!r}"
        else:
            msg = f"{where}: {msg}"
        line = doc.line_of(loc) if loc else doc.line_of(())
        out.append(Diagnostic(code=code, severity="error", file=doc.file, line=line, message=msg, hint=hint))
    return out


def load_model(project: Project, path: Path, model: type[M], extra: dict[str, Any] | None = None) -> M | None:
    """Read one YAML file into `model`, recording diagnostics; None when it does not load."""
    file = rel(project.root, path)
    try:
        doc = read_yaml(path, file)
    except ProjectError as exc:
        project.diagnostics.append(Diagnostic.from_error(exc))
        return None
    project.docs[file] = doc
    if not isinstance(doc.data, dict):
        project.error(
            "E_WRONG_TYPE",
            "the file must hold a YAML mapping",
            file=file,
            line=1,
            hint="start the file with its keys, e.g. `model: ...`",
        )
        return None
    data = dict(doc.data)
    if extra:
        for key in extra:
            if key in data:
                project.error(
                    "E_UNKNOWN_KEY",
                    f"unknown key {key!r}",
                    file=file,
                    line=doc.line_of((key,)),
                    hint=f"the {key} comes from the file name; remove this key",
                )
                data.pop(key)
        data.update(extra)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        project.diagnostics.extend(validation_diagnostics(err, doc))
        return None


def _yaml_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_flow_folder(project: Project, folder: Path, local_to: str | None = None) -> FlowSource | None:
    flow_file = folder / "flow.yaml"
    if not flow_file.is_file():
        flow_file = folder / "flow.yml"
    if not flow_file.is_file():
        project.error(
            "E_FILE_MISSING",
            f"flow folder {rel(project.root, folder)!r} has no flow.yaml",
            file=rel(project.root, folder),
            hint="add flow.yaml or remove the folder",
        )
        return None
    spec = load_model(project, flow_file, FlowSpec, {"id": folder.name})
    if spec is None:
        return None
    return FlowSource(spec=spec, folder=folder, doc=project.docs[rel(project.root, flow_file)], local_to=local_to)


def load_project(root: Path) -> Project:
    """Load every project file below `root`. Never raises for content problems."""
    root = root.resolve()
    cfg_path = root / "aqven.yaml"
    placeholder = ProjectConfig(package=_package_from_folder(root))
    project = Project(root=root, config=placeholder)
    if not cfg_path.is_file():
        project.error(
            "E_PROJECT_MISSING",
            f"no aqven.yaml in {root}",
            file="aqven.yaml",
            hint="run `aqven init DIR` to create a project, or cd into one",
        )
        return project
    config = load_model(project, cfg_path, ProjectConfig)
    if config is not None:
        project.config = config

    for path in _yaml_files(root / "agents"):
        agent = load_model(project, path, AgentSpec, {"id": path.stem})
        if agent is not None:
            project.agents[path.stem] = agent
    for path in _yaml_files(root / "datasets"):
        dataset = load_model(project, path, Dataset, {"id": path.stem})
        if dataset is not None:
            project.datasets[path.stem] = dataset
    flows_dir = root / "flows"
    if flows_dir.is_dir():
        for folder in sorted(p for p in flows_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            source = load_flow_folder(project, folder)
            if source is not None:
                project.flows[folder.name] = source
    project.diagnostics.sort(key=sort_key)
    return project


def _package_from_folder(root: Path) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in root.name) or "project"
    return name if not name[0].isdigit() else f"p_{name}"
