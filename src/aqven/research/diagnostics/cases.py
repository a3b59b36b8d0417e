"""`aqven check` for the cases an experiment runs: each against its subject's input type and its range.

A case whose input does not fit the flow's input type, or that lacks the node_outputs the experiment's range
reads, would pass the check and fail a series later (NOT_RUNNABLE). Here every selected case of every
experiment's dataset is tried the way a series' start tries it (`Engine.prepare`), and named with its line.
"""

from __future__ import annotations

from aqven.engine.compiled import CompiledFlow
from aqven.engine.runner import needed_above
from aqven.project.conform import violation
from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import Project
from aqven.research.experiments.loading import selected_cases
from aqven.research.experiments.schema import Experiment

CASE_CODES = ("E_CASE_INPUT", "E_CASE_NODE_OUTPUTS")
MAX_PER_EXPERIMENT = 20  # more bad cases of one experiment are counted in one last diagnostic


def check_cases(project: Project, experiment_id: str, spec: Experiment, flow: CompiledFlow) -> list[Diagnostic]:
    """E_CASE_INPUT / E_CASE_NODE_OUTPUTS for each selected case of the experiment that its subject cannot run."""
    dataset = project.datasets.get(spec.dataset.id)
    if dataset is None:
        return []
    top = flow.top_ids()
    if (spec.subject.from_ and spec.subject.from_ not in top) or (spec.subject.to and spec.subject.to not in top):
        return []  # E_RANGE_INVALID says so already
    start = top.index(spec.subject.from_) if spec.subject.from_ else 0
    end = top.index(spec.subject.to) if spec.subject.to else len(top) - 1
    if start > end:
        return []
    needed = needed_above(flow, start, end)
    file = project.file_of("dataset", spec.dataset.id)
    lines = {c.get("name"): i for i, c in enumerate(_raw_cases(project, file))}
    out: list[Diagnostic] = []
    bad = 0
    for case in selected_cases(project, spec):
        problem: tuple[str, str, str] | None = None
        missing = sorted(needed - set(case.node_outputs))
        if missing:
            problem = (
                "E_CASE_NODE_OUTPUTS",
                f"the range {top[start]}..{top[end]} of experiment {experiment_id!r} reads {', '.join(missing)}, "
                "which runs above the range, and the case has no node_outputs for it",
                f"add node_outputs: {{{missing[0]}: ...}} to the case, or start the range earlier",
            )
        elif start == 0:
            found = violation(case.input, flow.input_schema)
            if found:
                problem = (
                    "E_CASE_INPUT",
                    f"its input does not match the input type of flow {flow.id!r} (experiment {experiment_id!r}): "
                    f"{found}",
                    "give the case the input the flow declares (its flow.yaml `input:`)",
                )
        if problem is None:
            continue
        bad += 1
        if bad > MAX_PER_EXPERIMENT:
            continue
        code, message, hint = problem
        index = lines.get(case.name)
        line = project.doc_line(file, ("cases", index, "name")) if file and index is not None else None
        out.append(
            Diagnostic(
                code=code, severity="error", file=file, line=line, message=f"case {case.name!r}: {message}", hint=hint
            )
        )
    if bad > MAX_PER_EXPERIMENT:
        out.append(
            Diagnostic(
                code=out[-1].code,
                severity="error",
                file=file,
                line=None,
                message=f"... and {bad - MAX_PER_EXPERIMENT} more case(s) of {spec.dataset.id!r} that experiment "
                f"{experiment_id!r} cannot run",
                hint="fix them as the ones above",
            )
        )
    return out


def _raw_cases(project: Project, file: str | None) -> list[dict[str, object]]:
    """The dataset file's case mappings, in file order (for the line of each case)."""
    doc = project.docs.get(file) if file else None
    data = getattr(doc, "data", None)
    cases = data.get("cases") if isinstance(data, dict) else None
    return [c if isinstance(c, dict) else {} for c in cases] if isinstance(cases, list) else []
