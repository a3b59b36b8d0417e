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
from aqven.project import key_env
from aqven.project.dataset_files import read_jsonl
from aqven.project.diagnostics import Diagnostic, Diagnostics, sort_key
from aqven.project.paths import link_outside, listed_name, rel, within
from aqven.project.providers import PROVIDERS
from aqven.project.schema import AgentSpec, Dataset, FlowSpec, ProjectConfig, is_identifier, is_package_name
from aqven.project.split import Side, side_of
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
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    files: dict[tuple[str, str], str] = field(default_factory=dict)  # (agent|dataset|flow, id) -> relative file
    failed: set[tuple[str, str]] = field(default_factory=set)  # (kind, id) whose file exists but did not load
    # False when aqven.yaml names no valid package: the split is unknown, so no case may be shown as dev.
    package_known: bool = True
    # Each case's side, found once: a series' start asks it of every case several times (a sha256 each).
    _sides: dict[str, Side] = field(default_factory=dict, repr=False, compare=False)
    _sides_salt: tuple[str, bool] | None = field(default=None, repr=False, compare=False)

    def file_of(self, kind: str, item_id: str) -> str | None:
        return self.files.get((kind, item_id))

    @property
    def package(self) -> str:
        return self.config.package

    @property
    def split_package(self) -> str | None:
        """The salt of the dev/holdout split; None while aqven.yaml names no valid package."""
        return self.config.package if self.package_known else None

    def side(self, case_name: str) -> Side:
        """The case's side of the split; every case is held out while the package is unknown."""
        salt = (self.config.package, self.package_known)
        if salt != self._sides_salt:
            self._sides, self._sides_salt = {}, salt
        side = self._sides.get(case_name)
        if side is None:
            side = self._sides[case_name] = side_of(self.package, case_name) if self.package_known else "holdout"
        return side

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
        self.diagnostics.add(
            code, message, file=file, line=line, hint=hint, severity="error" if severity == "error" else "warning"
        )


def _clean_loc(data: Any, loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """Drop pydantic's union tags (the node kind) from an error location, keeping real keys."""
    out: list[str | int] = []
    current = data
    tag_skipped = False
    for part in loc:
        if isinstance(current, dict) and not tag_skipped and part in NODE_KINDS and current.get("kind") == part:
            tag_skipped = True  # the tag of a node union, not a key (a code node also has a `code` key)
            continue
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        ):
            out.append(part)
            current = current[part]
            tag_skipped = False
        elif isinstance(part, str) and (part.startswith("function-") or part == "[key]"):
            continue
        else:
            out.append(part)
            current = None
    return tuple(out)


_CODES = {
    "extra_forbidden": (
        "E_UNKNOWN_KEY",
        "remove the key or fix its spelling; docs/reference/project-files.md lists every key",
    ),
    "missing": ("E_MISSING_KEY", "add the key; docs/reference/project-files.md lists what each file needs"),
    "union_tag_invalid": ("E_UNKNOWN_NODE_KIND", "kind is one of llm, code, call, group, human"),
    "union_tag_not_found": ("E_MISSING_KEY", "every node needs a kind: llm, code, call, group or human"),
    "string_pattern_mismatch": ("E_INVALID_ID", "ids use letters, digits, _ and -, and start with a letter or _"),
    "reserved_id": ("E_INVALID_ID", "rename the node; input and context are reserved"),
    "model_format": ("E_MODEL_INVALID", "write the model as provider:model, e.g. openrouter:openai/gpt-4.1-mini"),
    "unknown_provider": (
        "E_UNKNOWN_PROVIDER",
        f"providers: {', '.join(PROVIDERS)}",
    ),
    "function_ref": ("E_FUNCTION_REF", "name a function as file.py:function, relative to the file that names it"),
    "literal_error": ("E_INVALID_VALUE", "use one of the values the message lists"),
}
_RANGE_TYPES = {
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "too_short",
    "too_long",
    "string_too_long",
    "string_too_short",
    "finite_number",
}


def validation_diagnostics(err: ValidationError, doc: YamlDoc) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for e in err.errors():
        loc = _clean_loc(doc.data, tuple(e["loc"]))
        etype = e["type"]
        if etype in _CODES:
            code, hint = _CODES[etype]
        elif etype.endswith(("_type", "_parsing")) or etype in ("is_instance_of", "int_from_float"):
            code, hint = "E_WRONG_TYPE", "give a value of the expected type"
        elif etype in _RANGE_TYPES:
            code, hint = "E_VALUE_RANGE", "give a value inside the allowed range"
        else:
            code, hint = "E_INVALID_VALUE", "fix the value; see docs/reference/project-files.md"
        where = ".".join(str(p) for p in loc) or "(file)"
        msg = e["msg"].removeprefix("Value error, ")
        if etype == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}" + (f" in {'.'.join(str(p) for p in loc[:-1])}" if len(loc) > 1 else "")
        elif etype == "missing":
            msg = f"missing key {where!r}"
        elif etype == "union_tag_not_found":
            msg = f"missing key {where + '.kind'!r}"
        elif etype == "string_pattern_mismatch":
            shown = repr(e.get("input"))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            msg = f"{where}: {shown} is not a valid " + ("package name" if loc == ("package",) else "id")
            if loc == ("package",):
                hint = "package is a Python-style name: letters, digits and _, starting with a letter or _"
        elif etype == "union_tag_invalid":
            msg = f"{where}: unknown node kind {e.get('ctx', {}).get('tag', '?')!r}"
        else:
            msg = f"{where}: {msg}"
        line = doc.line_of(loc) if loc else doc.line_of(())
        out.append(Diagnostic(code=code, severity="error", file=doc.file, line=line, message=msg, hint=hint))
    return out


def load_model(project: Project, path: Path, model: type[M], extra: dict[str, Any] | None = None) -> M | None:
    """Read one YAML file into `model`, recording diagnostics; None when it does not load."""
    file = rel(project.root, path)
    try:
        doc = read_jsonl(path, file) if path.suffix == ".jsonl" else read_yaml(path, file)
    except ProjectError as exc:
        project.diagnostics.append(Diagnostic.from_error(exc))
        return None
    project.docs[file] = doc
    if doc.data is None:
        project.error(
            "E_FILE_EMPTY",
            "the file is empty",
            file=file,
            line=1,
            hint="write its keys; see docs/reference/project-files.md",
        )
        return None
    if not isinstance(doc.data, dict):
        project.error(
            "E_NOT_MAPPING",
            f"the file must hold a YAML mapping of keys, not {_yaml_kind(doc.data)}",
            file=file,
            line=1,
            hint="write one `key: value` per line; see docs/reference/project-files.md",
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


def _yaml_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "text"
    return "a single value"


def inside_project(project: Project, path: Path) -> bool:
    """True when `path` (a file or folder found by listing) resolves inside the project, symlinks followed;
    otherwise an E_PATH_OUTSIDE_PROJECT diagnostic, and the caller does not read it."""
    if within(project.root, path):
        return True
    project.diagnostics.append(Diagnostic.from_error(link_outside(project.root, path)))
    return False


def _yaml_files(project: Project, folder: Path, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> list[Path]:
    """The YAML files (or `suffixes`) directly in `folder`; none when the folder itself leaves the project."""
    if not folder.is_dir() or not inside_project(project, folder):
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in suffixes and p.is_file())


def subfolders(project: Project, folder: Path) -> list[Path]:
    """The item folders in `folder` (flows/<id>/, experiments/<id>/), without hidden ones and ones that leave
    the project (reported)."""
    if not folder.is_dir() or not inside_project(project, folder):
        return []
    found = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return [p for p in found if inside_project(project, p)]


def _claim(project: Project, kind: str, item_id: str, file: str) -> bool:
    """Register `file` as the source of `kind` `item_id`; False (with a diagnostic) when it cannot be."""
    if not is_identifier(item_id):
        project.error(
            "E_INVALID_ID",
            f"{kind} id {item_id!r} (from the name of {file!r}) is not a valid id",
            file=file,
            hint="rename it: ids use letters, digits, _ and -, start with a letter or _, at most 80 characters",
        )
        return False
    other = project.files.get((kind, item_id))
    if other is not None:
        project.error(
            "E_DUPLICATE_ID",
            f"{kind} {item_id!r} is defined twice: {other} and {file}",
            file=file,
            hint="keep one of the two files",
        )
        return False
    project.files[(kind, item_id)] = file
    return True


def _load_items(
    project: Project, kind: str, folder: Path, model: type[M], suffixes: tuple[str, ...] = (".yaml", ".yml")
) -> dict[str, M]:
    out: dict[str, M] = {}
    for path in _yaml_files(project, folder, suffixes):
        if not within(project.root, path):  # a link that leaves the project: named as not loaded where used
            if _claim(project, kind, path.stem, listed_name(project.root, path)):
                project.failed.add((kind, path.stem))
            inside_project(project, path)
            continue
        file = rel(project.root, path)
        if not _claim(project, kind, path.stem, file):
            continue
        item = load_model(project, path, model, {"id": path.stem})
        if item is None:
            project.failed.add((kind, path.stem))
        else:
            out[path.stem] = item
    return out


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
    kind = "flow" if local_to is None else f"flow of {local_to}"
    if not within(project.root, flow_file):  # a flow.yaml that links outside: named as not loaded where used
        if _claim(project, kind, folder.name, listed_name(project.root, flow_file)):
            project.failed.add(("flow", folder.name))
        inside_project(project, flow_file)
        return None
    if not _claim(project, kind, folder.name, rel(project.root, flow_file)):
        return None
    spec = load_model(project, flow_file, FlowSpec, {"id": folder.name})
    if spec is None:
        project.failed.add(("flow", folder.name))
        return None
    return FlowSource(spec=spec, folder=folder, doc=project.docs[rel(project.root, flow_file)], local_to=local_to)


def load_project(root: Path) -> Project:
    """Load every project file below `root`. Never raises for content problems."""
    root = root.resolve()
    cfg_path = root / "aqven.yaml"
    placeholder = ProjectConfig(package=_package_from_folder(root))
    project = Project(root=root, config=placeholder)
    if cfg_path.is_file() and not inside_project(project, cfg_path):
        return project
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
    else:
        # The package salts the dev/holdout split: another key's mistake must not move cases between the sides.
        package = _written_package(project)
        if package is not None:
            project.config = ProjectConfig(package=package)
        else:
            project.package_known = False

    project.agents = _load_items(project, "agent", root / "agents", AgentSpec)
    key_env.remember(_named_key_envs(project))
    # A dataset is datasets/<id>.yaml, or datasets/<id>.jsonl (one case a line: the format for large datasets).
    project.datasets = _load_items(project, "dataset", root / "datasets", Dataset, (".yaml", ".yml", ".jsonl"))
    for folder in subfolders(project, root / "flows"):
        source = load_flow_folder(project, folder)
        if source is not None:
            project.flows[folder.name] = source
    project.diagnostics.sort(key=sort_key)
    return project


def _named_key_envs(project: Project) -> list[Any]:
    """The `api_key_env` of every agent file, loaded or not (a broken agent's variable may still be printed)."""
    names: list[Any] = [a.api_key_env for a in project.agents.values()]
    for file, doc in project.docs.items():
        if file.startswith("agents/") and isinstance(doc.data, dict):
            names.append(doc.data.get("api_key_env"))
    return names


def _written_package(project: Project) -> str | None:
    """The `package:` of an aqven.yaml that did not load as a whole, when that key itself is valid."""
    doc = project.docs.get("aqven.yaml")
    data = doc.data if doc is not None else None
    package = data.get("package") if isinstance(data, dict) else None
    if isinstance(package, str) and is_package_name(package):
        return package
    return None


def _package_from_folder(root: Path) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in root.name) or "project"
    return name if not name[0].isdigit() else f"p_{name}"
