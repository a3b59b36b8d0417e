"""Experiments: load them, and assemble each variant into a patch of the subject flow."""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from aqven.engine.variant import AlternativeNode, FlowPatch
from aqven.errors import ProjectError
from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import (
    Project,
    inside_project,
    load_flow_folder,
    load_model,
    subfolders,
    validation_diagnostics,
)
from aqven.project.paths import inside, rel
from aqven.project.schema import Case, Node
from aqven.project.yaml_source import read_yaml
from aqven.research.experiments.schema import Experiment, ExperimentSource

NODE_ADAPTER: TypeAdapter[Node] = TypeAdapter(Node)


def load_experiments(project: Project) -> tuple[dict[str, ExperimentSource], list[Diagnostic]]:
    """Every experiment under experiments/, with the diagnostics of loading them."""
    before = len(project.diagnostics)
    out: dict[str, ExperimentSource] = {}
    for folder in subfolders(project, project.root / "experiments"):
        path = folder / "experiment.yaml"
        file = rel(project.root, path)
        if not path.is_file():
            project.error(
                "E_FILE_MISSING",
                f"experiment folder {rel(project.root, folder)!r} has no experiment.yaml",
                file=rel(project.root, folder),
                hint="add experiment.yaml or remove the folder",
            )
            continue
        if not inside_project(project, path):
            continue
        spec = load_model(project, path, Experiment, {"id": folder.name})
        if spec is None:
            continue
        source = ExperimentSource(spec=spec, folder=folder, file=file)
        for fdir in subfolders(project, folder / "flows"):
            flow = load_flow_folder(project, fdir, local_to=folder.name)
            if flow is None:
                continue
            if fdir.name in project.flows:
                project.error(
                    "E_LOCAL_FLOW_SHADOWS",
                    f"local flow {fdir.name!r} of experiment {folder.name!r} has the id of a project flow",
                    file=flow.doc.file,
                    line=1,
                    hint="give the local flow an id of its own",
                )
                continue
            source.local_flows[fdir.name] = flow
        out[folder.name] = source
    diagnostics = project.diagnostics[before:]
    del project.diagnostics[before:]
    return out, diagnostics


# ---- variant assembly -----------------------------------------------------------------------------


class Assembly:
    """Variant assembly of one experiment, collecting what is wrong as diagnostics (`aqven check` reads them)."""

    def __init__(self, project: Project, exp: ExperimentSource) -> None:
        self.project, self.exp = project, exp
        self.diagnostics: list[Diagnostic] = []

    def err(self, code: str, message: str, path: tuple[str | int, ...], hint: str) -> None:
        self.diagnostics.append(
            Diagnostic(
                code=code,
                severity="error",
                file=self.exp.file,
                line=self.project.doc_line(self.exp.file, path),
                message=message,
                hint=hint,
            )
        )

    def patch(self, variant_index: int) -> FlowPatch:
        spec = self.exp.spec
        variant = spec.variants[variant_index]
        patch = FlowPatch(local_flows=dict(self.exp.local_flows))
        varies = spec.varies
        for node_id, value in variant.nodes.items():
            where = ("variants", variant_index, "nodes", node_id)
            if varies is None:
                self.err(
                    "E_VARIANT_WITHOUT_FACTOR",
                    f"variant {variant.id!r} sets values but the experiment has no varies",
                    where,
                    "add varies: {what: ..., nodes: [...]} naming the factor",
                )
                continue
            if node_id not in varies.nodes:
                self.err(
                    "E_VARIANT_NODE",
                    f"variant {variant.id!r} sets node {node_id!r}, which varies.nodes does not list",
                    where,
                    f"a variant only sets the varied nodes: {', '.join(varies.nodes)}",
                )
                continue
            if varies.what == "agent":
                if value not in self.project.agents:
                    self.err(
                        "E_UNKNOWN_AGENT",
                        f"variant {variant.id!r} gives {node_id!r} agent {value!r}, which does not exist",
                        where,
                        f"agents: {', '.join(sorted(self.project.agents))}",
                    )
                    continue
                patch.agents[node_id] = value
            elif varies.what == "prompt":
                path = self._file(f"prompts/{value}.md", where, "prompt")
                if path is not None:
                    patch.prompts[node_id] = path
            elif varies.what == "use":
                alt = self._alternative(value, where)
                if alt is not None:
                    patch.nodes[node_id] = alt
            else:
                if value not in self.exp.local_flows and value not in self.project.flows:
                    self.err(
                        "E_UNKNOWN_FLOW",
                        f"variant {variant.id!r} plugs flow {value!r} into {node_id!r}; no such flow",
                        where,
                        "a local flow in the experiment's flows/, or a project flow",
                    )
                    continue
                patch.flows[node_id] = value
        return patch

    def _file(self, relative: str, where: tuple[str | int, ...], what: str) -> Path | None:
        line = self.project.doc_line(self.exp.file, where)
        try:
            path = inside(self.project.root, self.exp.folder, relative, file=self.exp.file, line=line)
        except ProjectError as exc:
            self.err(exc.code, exc.message, where, exc.hint)
            return None
        if not path.is_file():
            self.err(
                "E_FILE_MISSING",
                f"{what} file {rel(self.project.root, path)!r} is missing",
                where,
                f"create {rel(self.project.root, path)}",
            )
            return None
        return path

    def _alternative(self, name: str, where: tuple[str | int, ...]) -> AlternativeNode | None:
        path = self._file(f"nodes/{name}/{name}.node.yaml", where, "alternative node")
        if path is None:
            return None
        file = rel(self.project.root, path)
        try:
            doc = read_yaml(path, file)
        except ProjectError as exc:
            self.diagnostics.append(Diagnostic.from_error(exc))
            return None
        self.project.docs[file] = doc
        data = dict(doc.data) if isinstance(doc.data, dict) else None
        if data is None:
            self.diagnostics.append(
                Diagnostic(
                    code="E_NOT_MAPPING",
                    severity="error",
                    file=file,
                    line=1,
                    message="an alternative node file holds one node as a mapping",
                    hint="write kind:, and the keys of that node kind",
                )
            )
            return None
        data.setdefault("id", name)
        try:
            spec = NODE_ADAPTER.validate_python(data)
        except ValidationError as err:
            self.diagnostics.extend(validation_diagnostics(err, doc))
            return None
        return AlternativeNode(spec=spec, folder=path.parent, file=file)


def variant_patch(project: Project, exp: ExperimentSource, variant_id: str) -> FlowPatch:
    """The patch that turns the subject flow into `variant_id`; raises when it cannot be assembled."""
    index = exp.spec.variant_ids.index(variant_id)
    assembly = Assembly(project, exp)
    patch = assembly.patch(index)
    if assembly.diagnostics:
        first = assembly.diagnostics[0]
        raise ProjectError(first.message, code=first.code, file=first.file, line=first.line, hint=first.hint)
    return patch


def selected_cases(project: Project, exp: Experiment) -> list[Case]:
    """The dataset's cases that carry every tag of the filter, in file order."""
    dataset = project.datasets.get(exp.dataset.id)
    if dataset is None:
        return []
    wanted = set(exp.dataset.tags)
    return [c for c in dataset.cases if wanted <= set(c.tags)]


def human_labels(project: Project, exp: Experiment) -> dict[str, bool]:
    """A judge-agreement experiment's selected cases with a human label: True when the person passed it."""
    agreement = exp.judge_agreement
    if agreement is None:
        return {}
    out: dict[str, bool] = {}
    for case in selected_cases(project, exp):
        expected = case.expected_output
        if isinstance(expected, dict) and expected.get(agreement.label) is not None:
            value = expected[agreement.label]
            out[case.name] = value == agreement.positive and type(value) is type(agreement.positive)
    return out


def metric_check(exp: Experiment, metric: str | None) -> str | None:
    """The check a metric (or the question's metric) reads."""
    if metric is None:
        return None
    if metric in exp.metrics:
        return exp.metrics[metric].check
    return metric if metric in {c.id for c in exp.checks} else None
