"""Experiments, launch plans and findings."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python

from aqven.project.local import simulate_enabled
from aqven.research.findings.records import is_intact, read_findings_md
from aqven.research.findings.verify import verified_findings
from aqven.research.launch.history import dev_estimates
from aqven.research.launch.plan import Side, launch_plan
from aqven.research.series.reads import planned_cases, rereads
from aqven.server.operations.models import ExperimentOut, FindingItem, FindingsOut, LaunchPlan, SeriesItem
from aqven.server.service import ProjectService


def experiment(svc: ProjectService, exp_id: str) -> ExperimentOut:
    """An experiment as its file states it: question, factor, variants, dataset, checks (no series)."""
    exp = svc.workspace().experiment(exp_id)
    spec = exp.spec
    varies = spec.varies
    caption = f"Varies: {varies.what} of {', '.join(varies.nodes)}" if varies else "Varies: nothing (one variant)"
    return ExperimentOut.model_validate(
        {
            "id": exp_id,
            "failure_mode": spec.failure_mode,
            "description": spec.description.strip(),
            "subject": {"flow": spec.subject.flow, "from": spec.subject.from_, "to": spec.subject.to},
            "varies": varies.model_dump() if varies else None,
            "caption": caption,
            "variants": [
                {
                    "id": v.id,
                    "nodes": v.nodes,
                    "value": ", ".join(f"{k}: {val}" for k, val in v.nodes.items()) or "as written",
                    "description": v.description,
                }
                for v in spec.variants
            ],
            "dataset": spec.dataset.model_dump(),
            "checks": [c.model_dump(exclude_none=True, by_alias=True) for c in spec.checks],
            "metrics": {k: m.model_dump() for k, m in spec.metrics.items()},
            "question": spec.question.model_dump(),
            "repeats": spec.repeats,
            "file": exp.file,
            "local_flows": sorted(exp.local_flows),
        }
    )


def experiments(svc: ProjectService) -> list[ExperimentOut]:
    return [experiment(svc, e) for e in sorted(svc.workspace().experiments)]


def experiment_with_series(svc: ProjectService, exp_id: str) -> ExperimentOut:
    """One experiment with the series that ran it, newest first."""
    out = experiment(svc, exp_id)
    out.series = series_items(svc, experiment_id=exp_id)
    return out


def series_items(svc: ProjectService, experiment_id: str | None = None, limit: int = 50) -> list[SeriesItem]:
    """The series of the project (or of one experiment), newest first, with status and verdict."""
    return [SeriesItem.model_validate(s) for s in svc.series.list_series(experiment_id=experiment_id, limit=limit)]


def plan_launch(
    svc: ProjectService,
    experiment_id: str,
    *,
    on: Side,
    cases: int | None,
    repeats: int | None,
    cap_usd: str | None,
    simulate: bool,
) -> LaunchPlan:
    """What a series of the experiment would run and under which cap (nothing starts)."""
    ws = svc.workspace()
    exp = ws.experiment(experiment_id)
    # Plan with a dev series run in the mode this series would run in (simulated or live).
    simulated = simulate_enabled(ws.project.root, simulate)
    plan: dict[str, Any] = launch_plan(
        ws,
        exp,
        on=on,
        cases=cases,
        repeats=repeats,
        cap_usd=cap_usd,
        estimates=dev_estimates(ws, svc.series.store, exp, simulated=simulated),
        simulated=simulated,
    )
    if on == "holdout":  # re-reads are visible: how many of these cases earlier held-out series read
        plan["earlier_reads"] = rereads(svc.series.store, experiment_id, planned_cases(ws, experiment_id, on, cases))
    return LaunchPlan.model_validate(to_jsonable_python(plan))


def findings(svc: ProjectService) -> FindingsOut:
    """Every finding file with its verdict, whether it is intact and verifies, and FINDINGS.md."""
    root = svc.root
    items = []
    for path, data, result in verified_findings(root, svc.db):
        verdict = (data or {}).get("verdict") or {}
        items.append(
            FindingItem(
                file=str(path.relative_to(root)),
                intact=bool(data and is_intact(data)),
                verifies=result.verifies,
                problem=result.problem,
                code=None if result.ok else result.code,
                unchecked=result.unchecked,
                experiment_id=(data or {}).get("experiment_id"),
                series_id=(data or {}).get("series_id"),
                verdict=verdict.get("verdict"),
                text=verdict.get("text"),
            )
        )
    return FindingsOut(findings=items, findings_md=read_findings_md(root) or "")
