"""The launch plan's planning keys (issue 10, item 4): where the planning rate and correlation come from (a dev
series of the same experiment on the same inputs, else the defaults), the verdict's multiplicity level, power,
the zero-failure floor, and the advice in recommended.text."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path
from typing import Any

import pytest
import scipy.stats

from aqven.research.experiments.workspace import Workspace
from aqven.research.launch.history import DevEstimates, estimates_from_cells, intra_case_correlation
from aqven.research.launch.plan import launch_plan
from aqven.research.stats import plan_sim
from aqven.research.stats import planning as lm
from support.series_kit import case_names, client_for, first_on, settle, start, write_tiny

TRIO_EXPERIMENT = """\
failure_mode: bad_reply
description: Either other writer answers well more often than w, by more than 5 points.
subject: {flow: answer}
varies: {what: agent, nodes: [answer]}
variants:
  - id: w
  - id: w2
    nodes: {answer: w2}
  - id: w3
    nodes: {answer: w3}
dataset: {id: cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: compare, metric: ok, baseline: w, margin: 0.05}
repeats: 1
"""

HIGH_EXPERIMENT = """\
failure_mode: bad_reply
description: The writer answers well on more than 98% of the cases.
subject: {flow: answer}
dataset: {id: cases}
checks:
  - id: ok
    function: checks/ok.py:reply_ok
metrics:
  ok: {check: ok}
question: {kind: threshold, metric: ok, bound: 0.97, margin: 0.01, direction: DIRECTION}
repeats: 2
"""


def tiny(tmp_path: Path, names: list[str] | None = None, **overrides: str | None) -> Path:
    more: dict[str, str | None] = {
        "experiments/trio/experiment.yaml": TRIO_EXPERIMENT,
        "experiments/high/experiment.yaml": HIGH_EXPERIMENT.replace("DIRECTION", "at_least"),
        "experiments/low/experiment.yaml": HIGH_EXPERIMENT.replace("DIRECTION", "at_most").replace(
            "bound: 0.97, margin: 0.01", "bound: 0.03, margin: 0.01"
        ),
    }
    more.update(overrides)
    root = write_tiny(tmp_path / "tiny", names or case_names(12, 12), overrides=more)
    # w3 is the same writer under another name (another agent file, the same simulator).
    (root / "agents" / "w3.yaml").write_text((root / "agents" / "w.yaml").read_text())
    return root


def plan(client: Any, experiment: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/api/experiments/{experiment}/launch-plan", json=body)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


# ---- defaults, multiplicity, power and the floor -----------------------------------------------------------


def test_defaults_say_so_and_plan_at_the_verdicts_level(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny(tmp_path)
    with client_for(root) as client:
        one = plan(client, "rate", on="dev", cases=10, repeats=1)
        assert one["planning"] == "defaults" and one["planning_series"] is None
        assert one["planning_rate"] == 0.5 and one["planning_rho"] == lm.RHO
        assert one["comparisons"] == 1 and one["level"] == 0.95
        pair = plan(client, "pair", on="dev", cases=10, repeats=1)
        assert pair["comparisons"] == 1 and pair["level"] == 0.95
        assert pair["planning_rho_between"] == lm.RHO_BETWEEN and pair["planning_differences"] == [0.0]
        # Two comparisons with the baseline: the verdict decides each at 97.5%, and so does the plan.
        trio = plan(client, "trio", on="dev", cases=10, repeats=1)
        assert trio["comparisons"] == 2 and trio["level"] == 0.975
        # Issue 28: the half-width is the one the series reports (simulated at the plan's size and level).
        pop = plan_sim.paired_population(0.5, lm.RHO, lm.RHO_BETWEEN, 0.0)
        line = trio["power"]["line"]
        assert trio["half_width"] == plan_sim.simulate(pop, 10, 1, 0.975, line, True).half_width
        assert trio["half_width"] > pair["half_width"]
        assert trio["recommended"]["cases"] > pair["recommended"]["cases"]
        assert trio["planning_differences"] == [0.0, 0.0]


def test_power_is_the_cases_that_decide_eight_times_in_ten(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny(tmp_path)
    with client_for(root) as client:
        high = plan(client, "high", on="dev")
    # Defaults: the planning rate is the bound clamped to 0.95, 0.03 below the line 0.98: a series refutes.
    power = high["power"]
    assert power["power"] == 0.8 and power["truth"] == 0.95 and power["line"] == pytest.approx(0.98)
    assert power["decides"] == "refuted"
    # Issue 28: by simulation with the interval the series reports (the Wald formula said 270).
    found = plan_sim.cases_to_decide(plan_sim.beta_population(0.95, 0.3), 2, 0.95, power["line"], True, 0.8)
    assert found is not None and power["cases"] == found.cases == 194 and found.decided >= 0.8
    assert high["recommended"]["cases"] == power["cases"]  # one number of cases per plan
    assert f"about {power['cases']} cases would decide it (refuted) 80% of the time" in power["text"]
    # A compare question planned with no effect, and a margin of 0: the truth is on the line, no power.
    ws = Workspace.load(root)
    exp = ws.experiment("pair")
    flat = exp.spec.model_copy(update={"question": exp.spec.question.model_copy(update={"margin": 0.0})})
    got = launch_plan(ws, dataclasses.replace(exp, spec=flat), on="dev")
    assert got["power"]["cases"] is None and "lies on the decision line" in got["power"]["text"]


def test_zero_failure_floor_for_at_least_and_at_most(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny(tmp_path)
    with client_for(root) as client:
        high = plan(client, "high", on="dev")
        low = plan(client, "low", on="dev")
        rate = plan(client, "rate", on="dev")
        pair = plan(client, "pair", on="dev")
    floor = high["zero_failure_floor"]
    assert floor["cases"] == 183 and floor["all"] == "pass" and floor["line"] == pytest.approx(0.98)
    # 183 is the first n whose all-pass bound 0.025^(1/n) exceeds 0.98.
    assert 0.025 ** (1 / 183) > 0.98 >= 0.025 ** (1 / 182)
    assert low["zero_failure_floor"]["cases"] == 183 and low["zero_failure_floor"]["all"] == "fail"
    assert rate["zero_failure_floor"]["cases"] == lm.zero_failure_cases(0.55) == 7
    assert pair["zero_failure_floor"] is None
    # One number of cases: the power's (issue 28).
    assert high["recommended"]["by"] == "power"


def test_floor_binds_when_the_dev_rate_is_near_one(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny(tmp_path)
    ws = Workspace.load(root)
    est = DevEstimates("ser_x", cases=200, attempts=400, rate=400.5 / 401, rho=None)
    got = launch_plan(ws, ws.experiment("high"), on="dev", repeats=1, estimates=est)
    assert got["planning"] == "from series ser_x"
    # The normal approximation asked for fewer cases than the floor; the simulated interval knows the floor:
    # at a true rate of 0.9988 a confirmation needs at least 183 cases that all pass (issue 28).
    assert lm.recommended_cases(400.5 / 401, 1, 0.01) < 183
    rec = got["recommended"]
    assert rec["cases"] >= 183 and rec["by"] == "power" and rec["reason"] == "short_of_cases"
    assert got["power"]["decides"] == "confirmed"
    assert rec["text"].endswith(f"only {got['available']} are available")
    assert got["below_recommended"] is True
    assert got["planning_series"] == {"series_id": "ser_x", "cases": 200, "attempts": 400, "rho": "default"}
    assert got["planning_rho"] == lm.RHO


def _threshold(ws: Workspace, bound: float) -> Any:
    exp = ws.experiment("high")
    question = exp.spec.question.model_copy(update={"bound": bound, "margin": 0.0})
    return dataclasses.replace(exp, spec=exp.spec.model_copy(update={"question": question}))


def test_why_so_many_names_the_floor_when_it_binds(tiny_env: Path, tmp_path: Path) -> None:
    """Issue 28 part 4: where the plan recommends more cases than a normal interval that knew the spread would
    need, it says why in one line; at a line of 0.90 the zero-failure floor is the reason."""
    from aqven.cli.series_cmd import plan_lines

    ws = Workspace.load(tiny(tmp_path))
    est = DevEstimates("ser_x", cases=200, attempts=400, rate=0.97, rho=0.3)
    got = launch_plan(ws, _threshold(ws, 0.90), on="dev", repeats=2, estimates=est)
    why = got["why_so_many"]
    # The oracle by hand: σ² = ρ·p(1 − p) + (1 − ρ)·p(1 − p)/r, (z + z_0.8)·σ/√n ≤ 0.97 − 0.90.
    var = 0.3 * 0.97 * 0.03 + 0.7 * 0.97 * 0.03 / 2
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    oracle = math.ceil((z * math.sqrt(var) / 0.07) ** 2)
    assert oracle == why["oracle_cases"] == 31
    floor = got["zero_failure_floor"]["cases"]
    assert floor == 36 and 0.025 ** (1 / oracle) < 0.90 < 0.025 ** (1 / floor)
    need = got["recommended"]["cases"]
    assert need > floor and why["cases"] == need and why["floor_binds"] is True
    assert why["text"] == (
        f"if every case passed, no method valid for every population could put the rate above "
        f"{0.025 ** (1 / 31):.3f} with 31 cases (clearing 0.9 takes at least 36 cases); a normal interval that "
        f"knew the spread between cases would decide 80% of the time with 31, so about {need} are recommended"
    )
    assert "above 0.888 with 31 cases" in why["text"]
    assert "why so many: " + why["text"] in plan_lines(got)

    # At 0.95 the floor (72) is far below the oracle: the width of a bound valid for every population is why.
    wide = launch_plan(ws, _threshold(ws, 0.95), on="dev", repeats=2, estimates=est)["why_so_many"]
    assert wide["floor_binds"] is False and wide["oracle_cases"] > 72
    assert wide["text"].startswith(
        f"a normal interval that knew the spread between cases would decide 80% of the time with "
        f"{wide['oracle_cases']} cases; the interval the series reports assumes nothing"
    )

    # Where the plan needs no more than the oracle (refuting 0.98 at the default rate 0.95), nothing is said.
    plain = launch_plan(ws, ws.experiment("high"), on="dev", repeats=2)
    assert plain["why_so_many"] is None
    assert not any(line.startswith("why so many") for line in plan_lines(plain))


def test_recommended_text_is_advice_when_enough_cases(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny(tmp_path, case_names(390, 10))
    ws = Workspace.load(root)
    got = launch_plan(ws, ws.experiment("rate"), on="dev", cases=10, repeats=1)
    rec = got["recommended"]
    found = plan_sim.cases_to_decide(plan_sim.beta_population(0.5, lm.RHO), 1, 0.95, 0.55, True, 0.8)
    assert found is not None
    assert rec == {
        "cases": found.cases,
        "repeats": 1,
        "reason": "short_of_cases",
        "text": f"if the true rate is 0.5, about {found.cases} cases would decide it (refuted) 80% of the time; "
        "only 390 are available",
        "by": "power",
    }
    assert got["below_recommended"] is True
    enough = launch_plan(ws, ws.experiment("rate"), on="dev", cases=10, repeats=20)
    assert enough["recommended"]["reason"] == "enough_cases"
    assert enough["recommended"]["text"].endswith("390 are available")
    assert "needed" not in rec["text"] and "must" not in rec["text"]


# ---- a dev series of the same experiment ------------------------------------------------------------------


def test_plan_uses_the_dev_series_of_the_same_inputs(tiny_env: Path, tmp_path: Path) -> None:
    fails = [first_on("dev", "fail", i) for i in (0, 100, 200)]
    names = case_names(17, 12) + fails
    root = tiny(tmp_path, names)
    with client_for(root) as client:
        assert plan(client, "rate", on="holdout", simulate=True)["planning"] == "defaults"
        sid = start(client, experiment_id="rate", on="dev", repeats=2, simulate=True)["series"]["series_id"]
        assert settle(client, sid)["status"] == "done"
        held = plan(client, "rate", on="holdout", simulate=True)
        assert held["planning"] == f"from series {sid}"
        # 20 dev cases × 2 repeats, 3 of them always failing: 34 passes of 40, shrunk a little towards 0.5.
        assert held["planning_rate"] == pytest.approx(34.5 / 41)
        assert held["planning_series"] == {"series_id": sid, "cases": 20, "attempts": 40, "rho": "series"}
        # Every case passes both repeats or fails both: the intra-case correlation is 1.
        assert held["planning_rho"] == pytest.approx(1.0)
        pop = plan_sim.beta_population(held["planning_rate"], held["planning_rho"])
        want = plan_sim.simulate(pop, 12, 2, 0.95, held["power"]["line"], True).half_width
        assert held["half_width"] == pytest.approx(want, rel=1e-12)
        # series_start returns the same plan.
        again = start(client, experiment_id="rate", on="holdout", simulate=True)
        assert again["launch_plan"]["planning"] == f"from series {sid}"
        settle(client, again["series"]["series_id"])
        # A live plan does not plan with a simulated series.
        assert plan(client, "rate", on="holdout")["planning"] == "defaults"
        # Another prompt is another experiment's inputs: back to the defaults.
        (root / "flows" / "answer" / "answer.md").write_text("Answer this briefly: {{ text }}\n")
    with client_for(root) as client:
        assert plan(client, "rate", on="holdout", simulate=True)["planning"] == "defaults"


def test_paired_estimates_from_cells() -> None:
    base = [(1.0, 1), (0.0, 1), (1.0, 1), (1.0, 1), (0.0, 1), (1.0, 1)]
    other = [(1.0, 1), (1.0, 1), (1.0, 1), (1.0, 1), (0.0, 1), (1.0, 1)]
    est = estimates_from_cells("ser_p", "compare", ("a", ["b"]), {"a": base, "b": other})
    assert est is not None
    assert est.rate == pytest.approx((9 + 0.5) / (12 + 1))
    assert est.differences == pytest.approx((1 / 6,))
    # ρ needs repeats; the between-variant correlation of the per-case means is Pearson's, clamped to [0, 0.95].
    assert est.rho is None
    assert est.rho_between == pytest.approx(float(scipy.stats.pearsonr([1, 0, 1, 1, 0, 1], [1, 1, 1, 1, 0, 1])[0]))
    assert estimates_from_cells("ser_p", "compare", ("a", ["b"]), {"a": [(0.0, 0)], "b": [(0.0, 0)]}) is None


def test_plan_with_paired_dev_estimates(tiny_env: Path, tmp_path: Path) -> None:
    root = tiny(tmp_path)
    ws = Workspace.load(root)
    est = DevEstimates("ser_p", 20, 40, rate=0.9, rho=0.2, rho_between=0.8, differences=(0.02,))
    got = launch_plan(ws, ws.experiment("pair"), on="dev", cases=10, repeats=2, estimates=est)
    assert got["planning"] == "from series ser_p"
    assert got["planning_rho_between"] == 0.8 and got["planning_differences"] == [0.02]
    pop = plan_sim.paired_population(0.9, 0.2, 0.8, 0.02)
    assert got["half_width"] == plan_sim.simulate(pop, 10, 2, 0.95, 0.05, True).half_width
    # The planning difference +0.02 lies 0.03 below the line +0.05: a series of enough cases refutes.
    assert got["power"]["truth"] == 0.02 and got["power"]["decides"] == "refuted"
    found = plan_sim.cases_to_decide(pop, 2, 0.95, 0.05, True, 0.8)
    assert found is not None and got["power"]["cases"] == found.cases


def test_intra_case_correlation_recovers_a_known_rho() -> None:
    rng = random.Random(7)
    for rho in (0.05, 0.3, 0.6):
        # Beta(a, b) case rates have intra-case correlation 1/(a + b + 1).
        total = 1 / rho - 1
        a, b = 0.8 * total, 0.2 * total
        cells = []
        for _ in range(600):
            p = rng.betavariate(a, b)
            r = 10
            cells.append((float(sum(rng.random() < p for _ in range(r))), r))
        got = intra_case_correlation(cells)
        assert got is not None and got == pytest.approx(rho, abs=0.05), (rho, got)
    assert intra_case_correlation([(1.0, 2)] * 4) is None  # too few cases
    assert intra_case_correlation([(2.0, 2)] * 10) is None  # no variance at all


def test_cli_prints_the_plan_as_advice(tiny_env: Path, tmp_path: Path) -> None:
    from aqven.cli.series_cmd import plan_lines

    root = tiny(tmp_path)
    ws = Workspace.load(root)
    got = launch_plan(ws, ws.experiment("high"), on="dev", cases=2, repeats=2)
    lines = plan_lines(got)
    assert lines[0].startswith(f"plan: expected half-width ±{got['half_width']:.3f} at 95% against the 0.01 margin")
    assert "(planning: defaults, rate 0.95, intra-case correlation 0.3)" in lines[0]
    assert lines[1] == "advice: " + got["recommended"]["text"]
    assert lines[2] == "power: " + got["power"]["text"]
    assert lines[3] == "floor: " + got["zero_failure_floor"]["text"]
    trio = launch_plan(ws, ws.experiment("trio"), on="dev", cases=2, repeats=1)
    assert " at 97.5% " in plan_lines(trio)[0]
    assert plan_lines({"half_width": None}) == []
