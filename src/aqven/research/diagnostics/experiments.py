"""`aqven check` for one experiment: its variants, subject range, dataset, cases, checks and question."""

from __future__ import annotations

from aqven.engine.compile import FlowCompiler
from aqven.engine.compiled import CompiledFlow
from aqven.engine.variant import FlowPatch
from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import Project
from aqven.project.schema import walk_nodes
from aqven.research.checks.problems import check_spec_problems
from aqven.research.diagnostics.cases import check_cases
from aqven.research.experiments.loading import human_labels, selected_cases
from aqven.research.experiments.schema import ExperimentSource
from aqven.research.experiments.variants import FACTOR_KIND_HINT, VARIANT_KINDS, Assembly
from aqven.research.stats.questions import DECIDING_KINDS, QUESTION_KINDS


def check_experiment(
    project: Project, exp: ExperimentSource, experiments: dict[str, ExperimentSource]
) -> list[Diagnostic]:
    """Everything `aqven check` knows about one experiment without running it."""
    a = Assembly(project, exp)
    spec = exp.spec
    ids = spec.variant_ids
    for i, vid in enumerate(ids):
        if vid in ids[:i]:
            a.err(
                "E_DUPLICATE_VARIANT",
                f"variant id {vid!r} is used twice",
                ("variants", i, "id"),
                "variant ids are unique",
            )
    subject = exp.local_flows.get(spec.subject.flow) or project.flows.get(spec.subject.flow)
    if subject is None:
        a.err(
            "E_UNKNOWN_FLOW",
            f"subject flow {spec.subject.flow!r} does not exist",
            ("subject", "flow"),
            f"project flows: {', '.join(sorted(project.flows))}; "
            f"local flows: {', '.join(sorted(exp.local_flows)) or 'none'}",
        )
        return a.diagnostics
    top = [n.id for n in subject.spec.nodes]
    for key, node_id in (("from", spec.subject.from_), ("to", spec.subject.to)):
        if node_id is not None and node_id not in top:
            a.err(
                "E_RANGE_INVALID",
                f"subject.{key} {node_id!r} is not a top-level node of {spec.subject.flow!r}",
                ("subject", key),
                f"top-level nodes: {', '.join(top)}",
            )
    if (
        spec.subject.from_ in top
        and spec.subject.to in top
        and top.index(spec.subject.from_) > top.index(spec.subject.to)
    ):
        a.err(
            "E_RANGE_INVALID",
            "subject.from comes after subject.to",
            ("subject",),
            f"top-level nodes in order: {', '.join(top)}",
        )
    nodes = {n.id: n for n in walk_nodes(subject.spec.nodes)}
    if spec.varies:
        want = VARIANT_KINDS[spec.varies.what].node_kind
        for i, node_id in enumerate(spec.varies.nodes):
            node = nodes.get(node_id)
            if node is None:
                a.err(
                    "E_UNKNOWN_NODE",
                    f"varies.nodes names {node_id!r}, which flow {spec.subject.flow!r} lacks",
                    ("varies", "nodes", i),
                    f"nodes: {', '.join(nodes)}",
                )
            elif want and node.kind != want:
                a.err(
                    "E_FACTOR_KIND",
                    f"varies.what {spec.varies.what} needs {want} nodes, but {node_id!r} is a {node.kind} node",
                    ("varies", "nodes", i),
                    FACTOR_KIND_HINT,
                )
    first_compiled: CompiledFlow | None = None
    for i, variant in enumerate(spec.variants):
        before = len(a.diagnostics)
        patch = a.patch(i)
        if len(a.diagnostics) > before:
            continue
        compiler = FlowCompiler(project, patch)
        compiled = compiler.compile(spec.subject.flow)
        first_compiled = first_compiled or compiled
        for d in compiler.diagnostics:
            d = d.model_copy(update={"message": f"variant {variant.id!r}: {d.message}"})
            a.diagnostics.append(d)
        if compiled is not None and spec.varies and VARIANT_KINDS[spec.varies.what].same_types:
            _check_flow_swap(a, project, exp, patch, compiled, i)
    _check_dataset(a, project, exp)
    if first_compiled is not None:  # every variant takes the same input and range: one is enough for the cases
        a.diagnostics += check_cases(project, exp.id, spec, first_compiled)
    _check_checks(a, project, exp, experiments)
    _check_question(a, exp)
    return _dedupe(a.diagnostics)


def _check_flow_swap(
    a: Assembly, project: Project, exp: ExperimentSource, patch: FlowPatch, compiled: CompiledFlow, index: int
) -> None:
    """A flow plugged into a call slot takes the same input and returns the same output as the slot's flow."""
    base = FlowCompiler(project, FlowPatch(local_flows=dict(exp.local_flows))).compile(exp.spec.subject.flow)
    if base is None:
        return
    for node_id in patch.flows:
        old, new = base.node(node_id), compiled.node(node_id)
        if old is None or new is None or old.called is None or new.called is None:
            continue
        if old.called.input_schema != new.called.input_schema or old.called.output_schema != new.called.output_schema:
            a.err(
                "E_FLOW_SWAP_TYPES",
                f"variant {exp.spec.variants[index].id!r}: flow {new.called.id!r} does not take and return the "
                f"same types as {old.called.id!r} in slot {node_id!r}",
                ("variants", index, "nodes", node_id),
                "flows in one slot declare the same input and output types",
            )


def _check_dataset(a: Assembly, project: Project, exp: ExperimentSource) -> None:
    spec = exp.spec
    dataset = project.datasets.get(spec.dataset.id)
    if dataset is None:
        a.err(
            "E_UNKNOWN_DATASET",
            f"dataset {spec.dataset.id!r} does not exist",
            ("dataset", "id"),
            f"datasets: {', '.join(sorted(project.datasets))}",
        )
        return
    cases = selected_cases(project, spec)
    if not cases:
        a.err(
            "E_DATASET_FILTER_EMPTY",
            f"no case of {spec.dataset.id!r} carries every tag of {spec.dataset.tags}",
            ("dataset", "tags"),
            "fix the tag filter or tag some cases",
        )


def _check_checks(
    a: Assembly, project: Project, exp: ExperimentSource, experiments: dict[str, ExperimentSource]
) -> None:
    spec = exp.spec
    seen: set[str] = set()
    for i, check in enumerate(spec.checks):
        if check.id in seen:
            a.err(
                "E_DUPLICATE_CHECK", f"check id {check.id!r} is used twice", ("checks", i, "id"), "check ids are unique"
            )
        seen.add(check.id)
        for code, message, hint in check_spec_problems(project, exp, check, experiments):
            if code.startswith("W_"):  # warnings: W_JUDGE_UNVALIDATED, W_CHECK_PARAM_UNUSED, ...
                a.diagnostics.append(
                    Diagnostic(
                        code=code,
                        severity="warning",
                        file=exp.file,
                        line=project.doc_line(exp.file, ("checks", i)),
                        message=message,
                        hint=hint,
                    )
                )
            else:
                a.err(code, message, ("checks", i), hint)
    for name, metric in spec.metrics.items():
        if metric.check not in seen:
            a.err(
                "E_UNKNOWN_CHECK",
                f"metric {name!r} reads check {metric.check!r}, which the experiment lacks",
                ("metrics", name, "check"),
                f"checks: {', '.join(sorted(seen)) or 'none'}",
            )


def _check_question(a: Assembly, exp: ExperimentSource) -> None:
    spec = exp.spec
    q = spec.question
    if q.metric and q.metric not in spec.metrics and q.metric not in {c.id for c in spec.checks}:
        a.err(
            "E_UNKNOWN_METRIC",
            f"question.metric {q.metric!r} is neither a metric nor a check of the experiment",
            ("question", "metric"),
            f"metrics: {', '.join(spec.metrics) or 'none'}",
        )
    for key in ("baseline", "variant"):
        value = getattr(q, key)
        if value is not None and value not in spec.variant_ids:
            a.err(
                "E_UNKNOWN_VARIANT",
                f"question.{key} {value!r} is not a variant",
                ("question", key),
                f"variants: {', '.join(spec.variant_ids)}",
            )
    if QUESTION_KINDS[q.kind].paired and len(spec.variants) < 2:
        a.err(
            "E_QUESTION_NEEDS_VARIANTS",
            f"a {q.kind} question needs at least two variants",
            ("question", "kind"),
            "add the variant to compare with the baseline",
        )
    _check_agreement(a, exp)
    _check_stop_early(a, exp)


def _check_stop_early(a: Assembly, exp: ExperimentSource) -> None:
    """stop_early decides on a confidence sequence of the deciding metric's own rate: a judge-decided metric
    would need the judge correction, which holds at one fixed size only; a look has nothing to stop."""
    spec = exp.spec
    if not spec.stop_early:
        return
    if not QUESTION_KINDS[spec.question.kind].decides:
        a.err(
            "E_STOP_EARLY_LOOK",
            "stop_early has nothing to decide on a look",
            ("stop_early",),
            f"remove stop_early, or ask a {', '.join(DECIDING_KINDS[:-1])} or {DECIDING_KINDS[-1]} question",
        )
        return
    metric = spec.metrics.get(spec.question.metric or "")
    check = next((c for c in spec.checks if metric is not None and c.id == metric.check), None)
    if check is not None and check.judge is not None:
        a.err(
            "E_STOP_EARLY_JUDGE",
            f"stop_early with metric {spec.question.metric!r}, decided by the judge {check.id!r}",
            ("stop_early",),
            "a judge's verdict is corrected for its measured errors at the series' final size only; decide on a "
            "function or built-in check, or remove stop_early",
        )


def _check_agreement(a: Assembly, exp: ExperimentSource) -> None:
    """A judge-agreement experiment: a threshold question, and cases labelled both ways."""
    spec = exp.spec
    agreement = spec.judge_agreement
    if agreement is None:
        return
    if not QUESTION_KINDS[spec.question.kind].agreement:
        a.err(
            "E_AGREEMENT_QUESTION",
            f"a judge-agreement experiment decides on a threshold of the agreement rate, not a {spec.question.kind}",
            ("judge_agreement",),
            "use question.kind threshold with the agreement check as its metric",
        )
    if spec.dataset.id not in a.project.datasets:
        return
    labels = human_labels(a.project, spec)
    passing = sum(labels.values())
    if passing == 0 or passing == len(labels):
        a.diagnostics.append(
            Diagnostic(
                code="W_AGREEMENT_LABELS",
                severity="warning",
                file=exp.file,
                line=a.project.doc_line(exp.file, ("judge_agreement",)),
                message=f"judge_agreement: {passing} selected case(s) labelled passing and {len(labels) - passing} "
                f"failing in expected_output.{agreement.label}; the finding needs both to measure the judge's "
                "sensitivity and specificity",
                hint=f"label cases both ways in expected_output.{agreement.label} (positive: {agreement.positive!r})",
            )
        )


def _dedupe(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[object, ...]] = set()
    out = []
    for d in diagnostics:
        key = (d.code, d.file, d.line, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
