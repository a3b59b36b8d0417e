"""Experiments: load them from experiments/, and the cases, labels and metrics they select."""

from __future__ import annotations

from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import (
    Project,
    inside_project,
    load_flow_folder,
    load_model,
    subfolders,
)
from aqven.project.paths import rel
from aqven.project.schema import Case
from aqven.research.experiments.schema import Experiment, ExperimentSource


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
