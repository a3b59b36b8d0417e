"""Starting a series: validate, refuse what cannot run (NOT_RUNNABLE), fix the plan and queue the attempts."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from aqven.engine.compiled import CompiledFlow
from aqven.engine.runner import Engine
from aqven.errors import (
    CASE_NOT_FOUND,
    DATASET_NOT_FOUND,
    FLOW_NOT_FOUND,
    NOT_RUNNABLE,
    VALIDATION_ERROR,
    AqvenError,
    NotFoundError,
)
from aqven.project.local import simulate_enabled
from aqven.project.paths import rel
from aqven.project.schema import AgentSpec, Case
from aqven.research.diagnostics.cases import CASE_CODES
from aqven.research.diagnostics.workspace import loaded_diagnostics
from aqven.research.experiments.inputs import manifest_hash, plan_manifest
from aqven.research.experiments.loading import metric_check, selected_cases
from aqven.research.experiments.schema import MAX_REPEATS, CheckSpec, ExperimentSource
from aqven.research.experiments.workspace import Workspace
from aqven.research.findings.records import read_findings
from aqven.research.findings.verify import Verifier
from aqven.research.holdout import hide_problems
from aqven.research.launch.bounds import cost_bound, series_agents
from aqven.research.launch.caps import parse_cap
from aqven.research.launch.history import dev_estimates
from aqven.research.launch.plan import Side, launch_plan, project_cap, validate_counts
from aqven.research.series import order as run_order
from aqven.research.series.fill import FIRST_ROWS, attempt_rows, queued_cells
from aqven.research.series.order import draw_seed, seed_key
from aqven.research.stats.judge_correction import accuracy_of
from aqven.store.records import RunRequest
from aqven.store.series import SeriesStore
from aqven.store.series_records import LookSpec, SeriesPlan


class SeriesStartBody(BaseModel):
    """series_start: exactly one of experiment_id or look."""

    model_config = ConfigDict(extra="forbid")
    experiment_id: str | None = None
    look: LookSpec | None = None
    on: Side = "dev"
    cases: int | None = Field(None, ge=1)
    repeats: int | None = Field(None, ge=1, le=MAX_REPEATS)
    cap_usd: str | None = None
    client_op_id: str | None = Field(None, min_length=1, max_length=200)
    simulate: bool = False
    # The simulators' seed: drawn at the start unless given (to replay a series on purpose). Two series are two
    # independent reads, as two real ones would be; variants stay paired within a series.
    seed: int | None = Field(None, ge=0, le=2**63 - 1)


class NotRunnable(AqvenError):
    code = NOT_RUNNABLE
    http_status = 422


def request_for(plan: SeriesPlan, case: Case, variant: str, seed: int, experiment_id: str | None) -> RunRequest:
    return RunRequest(
        flow_id=plan.flow_id,
        input=case.input,
        context=case.context,
        node_outputs=case.node_outputs,
        case_name=case.name,
        dataset_id=plan.dataset_id,
        from_node=plan.from_node,
        to_node=plan.to_node,
        simulate=plan.simulate,
        seed=seed,
        experiment_id=experiment_id,
        variant_id=variant if experiment_id else None,
    )


def _project_problems(ws: Workspace) -> list[dict[str, Any]]:
    """The project's errors, but a case no experiment's subject can run (E_CASE_*): that blocks only a series
    on that case, which refuses it per case and variant (NOT_RUNNABLE) without naming a held-out one."""
    return [
        {"code": d.code, "file": d.file, "line": d.line, "message": d.message, "hint": d.hint}
        for d in loaded_diagnostics(ws)
        if d.severity == "error" and d.code not in CASE_CODES
    ]


def _without_simulator(flow: CompiledFlow, judges: list[AgentSpec]) -> str | None:
    """In simulated mode: the first agent of the flow (its called flows included) or of a judge check that has
    no simulator, as a message; None when every one has one."""
    for node in flow.walk():
        if node.agent is not None and not node.agent.simulator:
            return f"agent {node.agent.id!r} of node {node.id!r} has no simulator, and the series runs simulated"
        if node.called is not None:
            inner = _without_simulator(node.called, [])
            if inner:
                return inner
    for agent in judges:
        if not agent.simulator:
            return f"judge agent {agent.id!r} has no simulator, and the series runs simulated"
    return None


def _case_problems(
    engine: Engine,
    plan: SeriesPlan,
    cases: list[Case],
    experiment_id: str | None,
    judges: list[AgentSpec] | None = None,
) -> list[dict[str, Any]]:
    """One problem per case and variant that cannot run, found before any model call: the range, the
    node_outputs it needs, and (simulated) an agent without a simulator, which would fail only after the other
    variants had spent money."""
    problems: list[dict[str, Any]] = []
    no_sim: dict[str, str | None] = {}
    # One validated request per variant, copied per case with what differs (prepare reads only these fields).
    base = {v: request_for(plan, cases[0], v, 0, experiment_id) for v in plan.variants} if cases else {}
    for case in cases:
        for variant in plan.variants:
            request = base[variant].model_copy(update={"input": case.input, "node_outputs": case.node_outputs})
            try:
                flow = engine.prepare(request)
            except AqvenError as exc:
                problems.append(
                    {"case": case.name, "variant": variant, "code": exc.code, "message": exc.message, "hint": exc.hint}
                )
                continue
            if plan.simulate:
                if variant not in no_sim:
                    no_sim[variant] = _without_simulator(flow, judges or [])
                message = no_sim[variant]
                if message:
                    problems.append(
                        {
                            "case": case.name,
                            "variant": variant,
                            "code": "SIMULATOR_MISSING",
                            "message": message,
                            "hint": "add 'simulator: file.py:function' to the agent file, or run without --simulate",
                        }
                    )
    return problems


def _refuse(problems: list[dict[str, Any]], what: str, **details: Any) -> NotRunnable:
    first = problems[0]
    return NotRunnable(
        f"{what}: {len(problems)} problem(s); first: {first.get('code')}: {first.get('message')}",
        hint="fix them (see details.problems, or run `aqven check`); nothing ran and nothing was spent",
        details={"problems": problems, **details},
    )


def prepare_series(
    ws: Workspace, engine: Engine, body: SeriesStartBody, store: SeriesStore | None = None
) -> dict[str, Any]:
    """Everything a new series needs, validated; raises NOT_RUNNABLE before any model call. With `store`, the
    launch plan plans with the estimates of a dev series of the same experiment on the same inputs."""
    if (body.experiment_id is None) == (body.look is None):
        raise AqvenError(
            "give exactly one of experiment_id or look",
            code=VALIDATION_ERROR,
            hint='{"experiment_id": "..."} or {"look": {"flow_id", "dataset_id", "case_names"}}',
            http_status=422,
        )
    validate_counts(body.cases, body.repeats)
    cap = parse_cap(body.cap_usd)
    pcap, source = project_cap(ws)
    simulate = simulate_enabled(ws.project.root, body.simulate)
    exp: ExperimentSource | None = None
    if body.experiment_id is not None:
        exp = ws.experiment(body.experiment_id)
        problems = _project_problems(ws)
        if problems:
            raise _refuse(problems, "the project has errors")
        spec = exp.spec
        available = [c for c in selected_cases(ws.project, spec) if ws.project.side(c.name) == body.on]
        cases = available[: body.cases] if body.cases is not None else available
        if not cases:
            raise _refuse(
                [
                    {
                        "code": "NO_CASES",
                        "message": f"no {body.on} cases in {spec.dataset.id!r} with tags {spec.dataset.tags}",
                    }
                ],
                "nothing to run",
            )
        check_id = metric_check(spec, spec.question.metric)
        judge = next((c for c in spec.checks if c.id == check_id and c.judge is not None), None)
        judge_info = _judge_info(ws, judge)
        plan = SeriesPlan(
            flow_id=spec.subject.flow,
            from_node=spec.subject.from_,
            to_node=spec.subject.to,
            dataset_id=spec.dataset.id,
            cases=[c.name for c in cases],
            sides={c.name: ws.project.side(c.name) for c in cases},
            variants=spec.variant_ids,
            repeats=body.repeats or spec.repeats,
            question=spec.question.model_dump(),
            deciding_check=check_id,
            judge_unvalidated=judge_info is not None and judge_info["validated_by_finding"] is None,
            judge=judge_info,
            judge_correction=_judge_accuracy(ws, judge),
            launch_plan=launch_plan(
                ws,
                exp,
                on=body.on,
                cases=body.cases,
                repeats=body.repeats,
                cap_usd=body.cap_usd,
                estimates=dev_estimates(ws, store, exp, simulated=simulate) if store is not None else None,
                simulated=simulate,
            ),
            simulate=simulate,
            stop_early=spec.stop_early,
        )
    else:
        assert body.look is not None
        look = body.look
        if look.flow_id not in ws.project.flows:
            raise NotFoundError(
                f"no flow {look.flow_id!r}", code=FLOW_NOT_FOUND, hint=f"flows: {', '.join(sorted(ws.project.flows))}"
            )
        dataset = ws.project.datasets.get(look.dataset_id)
        if dataset is None:
            raise NotFoundError(
                f"no dataset {look.dataset_id!r}",
                code=DATASET_NOT_FOUND,
                hint=f"datasets: {', '.join(sorted(ws.project.datasets))}",
            )
        by_name = {c.name: c for c in dataset.cases}
        missing = [n for n in look.case_names if n not in by_name]
        if missing:
            raise NotFoundError(
                f"dataset {look.dataset_id!r} has no case {missing[0]!r}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                code=CASE_NOT_FOUND,
                hint="name cases of the dataset",
            )
        cases = [by_name[n] for n in dict.fromkeys(look.case_names)]
        plan = SeriesPlan(
            flow_id=look.flow_id,
            from_node=look.start_node,
            to_node=look.end_node,
            dataset_id=look.dataset_id,
            cases=[c.name for c in cases],
            sides={c.name: ws.project.side(c.name) for c in cases},
            variants=["as_written"],
            repeats=1,
            question={"kind": "look"},
            look=look,
            simulate=simulate,
            launch_plan={
                "on": "any",
                "cases": len(cases),
                "repeats": 1,
                "variants": 1,
                "attempts": len(cases),
                "needs_approval": cap is not None and cap > pcap,
                "project_cap_usd": str(pcap),
                "project_cap_source": source,
                "cap_usd": str(cap if cap is not None else pcap),
                "bounds": cost_bound(
                    series_agents(ws, flow_id=look.flow_id, variants=["as_written"], experiment_id=None),
                    simulated=simulate,
                ),
            },
        )
    judges = [
        ws.project.agents[c.judge.agent]
        for c in (exp.spec.checks if exp is not None else [])
        if c.judge is not None and c.judge.agent in ws.project.agents
    ]
    problems = _case_problems(engine, plan, cases, body.experiment_id, judges)
    if problems:
        # Working (dev) cases by name; held-out ones only by a label, and counted.
        shown, held_out = hide_problems(lambda case: plan.sides.get(str(case)) != "dev", problems)
        raise _refuse(shown, "some cases cannot run for some variants", held_out_cases=held_out)
    series_cap = cap if cap is not None else pcap
    above = series_cap > pcap
    manifest = plan_manifest(ws, plan, body.experiment_id, simulated=simulate)  # only what this series runs
    sim_seed = body.seed if body.seed is not None else draw_seed()
    order_seed = draw_seed()  # secret: never returned, so nobody derives which attempt runs when
    # The first rows go with the series; research/series/fill.py writes the rest (a function of the two seeds).
    attempts = attempt_rows(
        plan,
        order=run_order.case_order(plan.cases, order_seed),  # looked up now: tests may run in file order
        key=seed_key(body.experiment_id, plan.flow_id),
        sim_seed=sim_seed,
        start=0,
        stop=FIRST_ROWS,
    )
    return {
        "kind": "experiment" if exp else "look",
        "experiment_id": body.experiment_id,
        "on": body.on if exp else "any",
        "plan": plan,
        "cap_usd": str(series_cap),
        "project_cap_usd": str(pcap),
        "project_cap_source": source,
        "inputs_hash": manifest_hash(manifest),
        "inputs": manifest,
        "simulated": simulate,
        "client_op_id": body.client_op_id,
        "attempts": attempts,
        "cells": queued_cells(plan),
        "status": "awaiting_approval" if above else "running",
        "pause": {
            "reason": "cap_above_project",
            "spent_usd": "0",
            "cap_usd": str(series_cap),
            "project_cap_usd": str(pcap),
        }
        if above
        else None,
        "active_since": None if above else time.time(),
        "order_seed": order_seed,
        "sim_seed": sim_seed,
        "token_cap": (plan.launch_plan.get("bounds") or {}).get("token_cap"),
    }


def _judge_accuracy(ws: Workspace, judge: CheckSpec | None) -> dict[str, Any] | None:
    """The accuracy the newest validating finding measured for a pass/fail judge, fixed with the series: its
    verdict is then corrected for the judge's errors (`aqven.research.stats.judge_correction`)."""
    if judge is None or judge.judge is None or judge.judge.scale != "pass_fail" or not judge.validated_by:
        return None
    best: tuple[str, dict[str, Any]] | None = None
    with Verifier(ws.project.root) as verifier:
        verified = {
            p
            for p, d in read_findings(ws.project.root)
            if d and d.get("experiment_id") == judge.validated_by and verifier.verify(p, d).verifies
        }
    for path, data in read_findings(ws.project.root):
        if not (
            data
            and path in verified  # a finding that verifies: a forged agreement finding corrects nothing
            and data.get("experiment_id") == judge.validated_by
            and data.get("verdict", {}).get("verdict") == "confirmed"
            and accuracy_of(rel(ws.project.root, path), data) is not None
        ):
            continue
        ended = str((data.get("scope") or {}).get("ended_at") or "")
        if best is None or ended > str((best[1].get("scope") or {}).get("ended_at") or ""):
            best = (rel(ws.project.root, path), data)
    if best is None:
        return None
    accuracy = accuracy_of(*best)
    return accuracy.to_json() if accuracy else None


def _validating_finding(ws: Workspace, validated_by: str | None) -> str | None:
    """The finding that validates a judge: a confirmed held-out finding of the experiment `validated_by` names,
    one that verifies (research/findings/verify.py); its file, or None."""
    if not validated_by:
        return None
    best: tuple[str, str] | None = None  # (ended_at, file) of the newest
    with Verifier(ws.project.root) as verifier:
        for path, data in read_findings(ws.project.root):
            if (
                data
                and data.get("experiment_id") == validated_by
                and data.get("verdict", {}).get("verdict") == "confirmed"
                and path.exists()
                and verifier.verify(path, data).verifies  # recomputed here: a sealed made-up one counts for nothing
            ):
                ended = str((data.get("scope") or {}).get("ended_at") or "")
                if best is None or ended > best[0]:
                    best = (ended, str(path.relative_to(ws.project.root)))
    return best[1] if best else None


def _judge_info(ws: Workspace, check: Any) -> dict[str, Any] | None:
    """What a finding decided by a judge names: the check, the judge's agent and model, what validates it."""
    if check is None or check.judge is None:
        return None
    agent = ws.project.agents.get(check.judge.agent)
    return {
        "check": check.id,
        "agent": check.judge.agent,
        "model": agent.model if agent else None,
        "validated_by": check.validated_by,
        "validated_by_finding": _validating_finding(ws, check.validated_by),
    }
