"""The launch plan: what a series will run, how precise it can be, and under which cap. No dollars."""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from typing import Any, Literal, assert_never

import scipy.stats

from aqven.errors import VALIDATION_ERROR, AqvenError
from aqven.research.experiments.loading import selected_cases
from aqven.research.experiments.schema import MAX_REPEATS, ExperimentSource, Question
from aqven.research.experiments.workspace import Workspace
from aqven.research.launch.bounds import cost_bound, series_agents
from aqven.research.launch.caps import ProjectCap, confirmed_project_cap, parse_cap
from aqven.research.launch.early import expected_attempts
from aqven.research.launch.history import DevEstimates
from aqven.research.stats import plan_sim
from aqven.research.stats import planning as launch_math
from aqven.research.stats.questions import QUESTION_KINDS, decision_line, upward
from aqven.research.stats.verdict import ALPHA

Side = Literal["dev", "holdout"]
POWER = 0.8
"""The power the plan's ``power.cases`` are computed for."""


def project_cap_state(ws: Workspace) -> ProjectCap:
    """The project cap a person last confirmed, and what the project's files ask for (research/launch/caps.py)."""
    research = ws.project.config.research
    return confirmed_project_cap(ws.project.root, research.spend_cap_usd if research else None)


def project_cap(ws: Workspace) -> tuple[Decimal, str]:
    """The project cap new series get (the confirmed one) and where the asked-for value came from."""
    state = project_cap_state(ws)
    return state.cap, state.source


def available_cases(ws: Workspace, exp: ExperimentSource, on: Side) -> list[str]:
    """Names of the experiment's cases on `on`, in file order."""
    return [c.name for c in selected_cases(ws.project, exp.spec) if ws.project.side(c.name) == on]


def validate_counts(cases: int | None, repeats: int | None) -> None:
    if cases is not None and cases < 1:
        raise AqvenError(
            "cases must be at least 1", code=VALIDATION_ERROR, hint="ask for 1 or more cases", http_status=422
        )
    if repeats is not None and not 1 <= repeats <= MAX_REPEATS:
        raise AqvenError(
            f"repeats must be between 1 and {MAX_REPEATS}",
            code=VALIDATION_ERROR,
            hint="more repeats of the same cases help less than more cases",
            http_status=422,
        )


def launch_plan(
    ws: Workspace,
    exp: ExperimentSource,
    *,
    on: Side = "dev",
    cases: int | None = None,
    repeats: int | None = None,
    cap_usd: Any = None,
    estimates: DevEstimates | None = None,
    simulated: bool = False,
) -> dict[str, Any]:
    """The plan of a series of `exp` (see docs/how-to/run-a-series.md, "The launch plan").

    ``bounds`` says whether the spend cap can stop the series (agents nothing prices) and its token cap.

    ``estimates`` are a dev series' (`aqven.research.launch.history.dev_estimates`); without them the
    plan uses the defaults of `aqven.research.stats.planning` and says ``planning: "defaults"``.
    """
    validate_counts(cases, repeats)
    spec = exp.spec
    available = available_cases(ws, exp, on)
    n = min(cases, len(available)) if cases is not None else len(available)
    r = repeats if repeats is not None else spec.repeats
    q = spec.question
    k = len(spec.variants)
    state = project_cap_state(ws)
    pcap = state.cap
    cap = parse_cap(cap_usd)
    plan: dict[str, Any] = {
        "on": on,
        "cases": n,
        "repeats": r,
        "variants": k,
        "attempts": n * r * k,
        "available": len(available),
    }
    if not QUESTION_KINDS[q.kind].decides or n == 0:
        plan.update({"half_width": None, "margin": q.margin, "recommended": None, "below_recommended": False})
    else:
        plan.update(_precision(spec.question, spec.variant_ids, n, r, len(available), estimates, spec.stop_early))
        if spec.stop_early:
            plan["stop_early"] = _early(q, plan, n, r, k)
    plan.update(
        {
            "needs_approval": cap is not None and cap > pcap,
            **state.fields(),
            "cap_usd": str(cap if cap is not None else pcap),
        }
    )
    agents = series_agents(ws, flow_id=spec.subject.flow, variants=spec.variant_ids, experiment_id=exp.id)
    plan["bounds"] = cost_bound(agents, simulated=simulated)
    return plan


def _early(q: Question, plan: dict[str, Any], n: int, r: int, k: int) -> dict[str, Any]:
    """The expected attempts of a stop_early series at the planning numbers (`aqven.research.launch.early`)."""
    diffs = plan.get("planning_differences") or [0.0]
    out = expected_attempts(
        kind=q.kind,
        line=decision_line(q),
        at_least=upward(q),
        rate=plan["planning_rate"],
        rho=plan["planning_rho"],
        cases=n,
        repeats=r,
        variants=k,
        difference=min(diffs),
        rho_between=plan.get("planning_rho_between", launch_math.RHO_BETWEEN),
        level=plan["level"],
    )
    out["text"] = (
        f"stop_early: about {out['expected_attempts']} of {out['attempts']} attempts expected at the planning "
        f"rate (a median saving of {out['median_saving']:.0%}; {out['stops_early_share']:.0%} of series stop before "
        "the end); its decision is valid at every look, and needs more cases than a fixed-size one"
    )
    return out


def comparisons_of(question: Question, variants: list[str]) -> int:
    """How many intervals the verdict decides on (the Bonferroni k): 1 for a threshold or a named variant."""
    if not QUESTION_KINDS[question.kind].paired or question.variant:
        return 1
    return max(len(variants) - 1, 1)


def _precision(
    q: Question,
    variants: list[str],
    n: int,
    r: int,
    available: int,
    est: DevEstimates | None,
    stop_early: bool = False,
) -> dict[str, Any]:
    """half_width, recommended, below_recommended and the keys that say how they were planned.

    A stop_early experiment's power (and so its recommended cases) is that of the sequence it decides on,
    read at its looks (`plan_sim.sequential_cases_to_decide`; with one attempt per case of one rate, the exact
    design's own chance): more cases than a fixed-size series needs, of which it expects to run fewer."""
    paired = QUESTION_KINDS[q.kind].paired
    k = comparisons_of(q, variants)
    bound = q.bound if QUESTION_KINDS[q.kind].needs_bound else None
    rate = est.rate if est else launch_math.planning_rate(bound)
    rho = est.rho if est and est.rho is not None else launch_math.RHO
    between = est.rho_between if est and est.rho_between is not None else launch_math.RHO_BETWEEN
    out: dict[str, Any] = {}
    level = 1 - ALPHA / k
    differences = list(est.differences) if est and paired else [0.0] * k
    line = decision_line(q)
    truth = min(differences, key=lambda t: abs(t - line)) if paired else rate
    pop = _population(paired, rate, rho, between, truth)
    out["half_width"] = plan_sim.simulate(pop, n, r, level, line, upward(q)).half_width
    out["margin"] = q.margin
    out["level"] = level
    out["comparisons"] = k
    out["planning"] = f"from series {est.series_id}" if est else "defaults"
    out["planning_rate"] = rate
    out["planning_rho"] = rho
    if paired:
        out["planning_rho_between"] = between
        out["planning_differences"] = differences
    out["planning_series"] = (
        {
            "series_id": est.series_id,
            "cases": est.cases,
            "attempts": est.attempts,
            "rho": "series" if est.rho is not None else "default",
            **({"rho_between": "series" if est.rho_between is not None else "default"} if paired else {}),
        }
        if est
        else None
    )
    out["power"] = _power(q, pop, r, level, truth, paired, available, stop_early)
    out["zero_failure_floor"] = _zero_failure_floor(q, k)
    need, by, text = None, None, ""
    if out["power"]["cases"] is not None:
        need, by = out["power"]["cases"], "power"
        text = out["power"]["text"].rsplit("; ", 1)[0] + "; "
    elif q.margin > 0:
        found = plan_sim.cases_for_half_width(pop, r, level, q.margin, line, upward(q))
        if found is not None:
            need, by = found.cases, "half_width"
            text = f"about {need} cases would bring the half-width the series reports within the {q.margin:g} margin; "
    if need is not None:
        short = need > available
        text += f"only {available} are available" if short else f"{available} are available"
        out["recommended"] = {
            "cases": need,
            "repeats": r,
            "reason": "short_of_cases" if short else "enough_cases",
            "text": text,
            "by": by,
        }
        out["below_recommended"] = n < need
    else:
        out["recommended"] = None
        out["below_recommended"] = False
    out["why_so_many"] = (
        _why_so_many(q, pop, r, level, truth, need, by, out["zero_failure_floor"], stop_early)
        if need is not None and by is not None
        else None
    )
    return out


def oracle_cases(pop: plan_sim.Population, r: int, level: float, distance: float, power: float | None) -> int:
    """The cases a normal (Wald) interval needs if it knew the true spread between cases of ``pop``: the sd of a
    case's mean (or difference) is σ with σ² = Var(q) + E[q(1 − q)]/r over the cases (for a pair, of q_B − q_A
    and both variants' attempt variances). ``power`` None: its half-width z·σ/√n within ``distance`` (the
    margin); else a share ``power`` of its series decide when the truth is ``distance`` from the line
    ((z + z_power)·σ/√n ≤ distance). Nothing valid for every population can need fewer on every population."""
    w = pop.weights
    within = pop.a * (1 - pop.a)
    d = pop.a if pop.b is None else pop.b - pop.a
    if pop.b is not None:
        within = within + pop.b * (1 - pop.b)
    var = float(w @ (d - w @ d) ** 2 + (w @ within) / r)
    z = float(scipy.stats.norm.ppf(1 - (1 - level) / 2)) + (float(scipy.stats.norm.ppf(power)) if power else 0.0)
    return max(1, math.ceil((z * math.sqrt(var) / distance) ** 2))


def _why_so_many(
    q: Question,
    pop: plan_sim.Population,
    r: int,
    level: float,
    truth: float,
    need: int,
    by: str,
    floor: dict[str, Any] | None,
    stop_early: bool,
) -> dict[str, Any] | None:
    """Why the plan recommends more cases than the normal oracle (`oracle_cases`) needs, in one sentence; None
    when it does not. When the zero-failure floor binds (even cases that all passed could not clear the line
    at the oracle's size, since a bound valid for every population stays under tail^(1/n)), that is the reason."""
    line = decision_line(q)
    distance = abs(truth - line) if by == "power" else q.margin
    if distance <= 0:
        return None
    oracle = oracle_cases(pop, r, level, distance, POWER if by == "power" else None)
    if need <= oracle:
        return None
    out: dict[str, Any] = {"cases": need, "oracle_cases": oracle, "floor_binds": False}
    what = "a normal interval that knew the spread between cases"
    goal = f"decide {POWER:.0%} of the time" if by == "power" else f"reach ±{q.margin:g}"
    if floor and floor.get("cases") and floor["cases"] > oracle:
        best = ((1 - level) / 2) ** (1 / oracle)  # the tail is 0.025 / comparisons, as the floor's
        valid = "no method valid for every population could put the"
        if floor["all"] == "agree":
            said = f"if the variants agreed on every case, {valid} difference above {best - 1:.3f}"
        elif floor["all"] == "pass":
            said = f"if every case passed, {valid} rate above {best:.3f}"
        else:
            said = f"if every case failed, {valid} rate below {1 - best:.3f}"
        said += f" with {oracle} cases"
        out["floor_binds"] = True
        out["text"] = (
            f"{said} (clearing {line:g} takes at least {floor['cases']} cases); {what} would {goal} with {oracle}, "
            f"so about {need} are recommended"
        )
    else:
        how = ", read at the looks of stop_early," if stop_early else ""
        out["text"] = (
            f"{what} would {goal} with {oracle} cases; the interval the series reports{how} assumes nothing "
            f"about the cases (it holds for every population), so it is wider and needs about {need}"
        )
    return out


@functools.lru_cache(maxsize=256)
def _population(paired: bool, rate: float, rho: float, between: float, truth: float) -> plan_sim.Population:
    """The population the plan simulates: the planning rate and correlations (and difference, paired)."""
    if paired:
        return plan_sim.paired_population(rate, rho, between, truth)
    return plan_sim.beta_population(rate, rho)


def _every(q: Question) -> str:
    """What the zero-failure floor assumes of every case, in words."""
    floor = QUESTION_KINDS[q.kind].floor
    if floor == "agree":
        return "the variants agreed on every one"
    if floor == "all" or floor is None:
        return f"every one {'passed' if q.direction == 'at_least' else 'failed'}"
    assert_never(floor)


def _power(
    q: Question,
    pop: plan_sim.Population,
    r: int,
    level: float,
    truth: float,
    paired: bool,
    available: int,
    stop_early: bool = False,
) -> dict[str, Any]:
    """Cases for 80% power, by simulation with the interval the series reports (`aqven.research.stats.plan_sim`):
    a series of that many decides (confirms or refutes) 8 times in 10 when the truth is the planning rate
    (threshold) or the planning difference (paired; the comparison nearest its line, when there are several).
    ``share`` is the share of the simulated series that decided at that size."""
    line = decision_line(q)
    distance = abs(truth - line)
    what = "difference" if paired else "rate"
    out: dict[str, Any] = {"power": POWER, "truth": truth, "line": line, "cases": None, "decides": None}
    found: plan_sim.Outcome | plan_sim.SequentialOutcome | None = None
    if distance >= 1e-12:
        solve = plan_sim.sequential_cases_to_decide if stop_early else plan_sim.cases_to_decide
        found = solve(pop, r, level, line, upward(q), POWER)
    if found is None:
        out["text"] = (
            f"the planning {what} {truth:g} lies on the decision line {line:g}: no number of cases decides it "
            f"with {POWER:.0%} power"
            if distance < 1e-12
            else f"if the true {what} is {truth:.3g}, no number of cases up to a million decides it "
            f"{POWER:.0%} of the time"
        )
        return out
    above = truth > line
    confirms = above if upward(q) else not above
    decides = "confirmed" if confirms else "refuted"
    out.update({"cases": found.cases, "decides": decides, "share": round(found.decided, 3)})
    how = " by the last look of stop_early" if stop_early else ""
    out["text"] = (
        f"if the true {what} is {truth:.3g}, about {found.cases} cases would decide it ({decides}){how} "
        f"{found.decided:.0%} of the time; "
        + (f"only {available} are available" if found.cases > available else f"{available} are available")
    )
    return out


def _zero_failure_floor(q: Question, comparisons: int = 1) -> dict[str, Any] | None:
    """Threshold questions: the cases that must all pass (at least) or all fail (at most) before the
    interval can clear the line at all. Noninferior: the cases on which the variants must agree every time
    before the difference can clear −m (a share of about 3.7/n of cases that B breaks outright could hide
    in any sample of n). None for compare, whose line a sample of agreeing cases never clears."""
    floor = QUESTION_KINDS[q.kind].floor
    if floor is None:
        return None
    if floor == "agree":
        if q.margin <= 0:
            return None
        cases = launch_math.zero_failure_cases(1 - q.margin, ALPHA / 2 / comparisons)
        text = (
            f"a confirmation needs at least {cases} cases, and even then only if the variants agree on every "
            f"one: no interval valid for every population puts the difference above {-q.margin:g} on fewer"
        )
        return {"cases": cases, "line": -q.margin, "all": "agree", "text": text}
    if floor != "all":
        assert_never(floor)
    line = decision_line(q)
    at_least = q.direction == "at_least"
    # At most: an upper bound on n cases that all failed is at least 1 − 0.025^(1/n), the mirror image.
    cases = launch_math.zero_failure_cases(line) if at_least else launch_math.zero_failure_cases(1 - line)
    if not at_least and line <= 0:
        cases = None
    every = "passed" if at_least else "failed"
    if cases is None:
        text = f"no number of cases can confirm {'above' if at_least else 'below'} {line:g}"
    else:
        text = (
            f"a confirmation needs at least {cases} cases, and even then only if every one {every}: "
            f"no interval valid for every population puts its bound past {line:g} on fewer"
        )
    return {"cases": cases, "line": line, "all": "pass" if at_least else "fail", "text": text}
