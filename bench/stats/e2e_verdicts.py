"""End to end: how often held-out series of the showcase confirm, refute or stay open when the truth is known.

Real series through the real scheduler, engine, checks, SQLite store and verdict code, in-process
(`ProjectService`), on simulated models with their latency scaled to zero. The simulators of the showcase
(`sim/world.py`) decide every reply with a known per-ticket pass rate (`world.true_pass_rate`), so the true
rate of a series is the mean of those rates over the very cases it runs: the held-out refund cases of
`support_case_bulk` under the package `lumen`, in file order, the first ``--cases`` of them.

Four questions, two on each side of their decision line:

* ``reply_noninferior_mistral`` as shipped (noninferior, margin 0.02): the true difference mistral − gpt is
  about −0.003, above −0.02 → a confirmation is right, a refutation is false.
* ``e2e_noninferior_m0001``: the same experiment with margin 0.001: the true difference is below −0.001 →
  a confirmation is false.
* ``e2e_threshold_098``: gpt's promises rate at least 0.98 (margin 0); the truth (about 0.975) is below →
  a confirmation is false.
* ``e2e_threshold_095``: the same at least 0.95 (margin 0); the truth is above → a refutation is false.

Each question runs ``--seeds`` held-out series (50), each with its own attempt seeds (`SeriesStartBody.seed`).
Printed: the shares of confirmed / refuted / inconclusive (and anything else), the rate of wrong verdicts with
its 95% Clopper–Pearson interval, and the pooled observed pass rates against the truth (a check of the
simulators). Exit status 1 if a false-confirmation rate's point estimate exceeds 5% (or a series ends
other than done).

    .venv/bin/python bench/stats/e2e_verdicts.py [--seeds 50] [--cases 100] [--repeats 2] [--jobs 2] [--quick]
    .venv/bin/python bench/stats/e2e_verdicts.py --cases 0 --repeats 2 --name e2e_verdicts_725x2   # all 725 cases

Writes every series to bench/out/<name>_series.csv and the summary to docs/figures/<name>.csv (bench/out/
with --quick or --out); <name> is e2e_verdicts unless --name says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import importlib.util
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"

import scipy.stats
import yaml

from aqven.project.init import init_project
from aqven.research.experiments.loading import selected_cases
from aqven.research.series.start import SeriesStartBody
from aqven.server.service import ProjectService

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "lumen"
BASE = "reply_noninferior_mistral"
LIMIT = 0.05


@dataclass(frozen=True)
class Question:
    experiment: str
    kind: str  # noninferior | threshold
    margin: float
    bound: float | None = None
    note: str = ""


QUESTIONS = [
    Question(BASE, "noninferior", 0.02, note="as shipped"),
    Question("e2e_noninferior_m0001", "noninferior", 0.001, note="copy with margin 0.001"),
    Question("e2e_threshold_098", "threshold", 0.0, 0.98, note="gpt at least 0.98"),
    Question("e2e_threshold_095", "threshold", 0.0, 0.95, note="gpt at least 0.95"),
]


# ---- the project ------------------------------------------------------------------------------------


def make_project(parent: Path) -> Path:
    root = init_project(parent / "e2e", PACKAGE)
    cfg = root / "aqven.yaml"
    text = cfg.read_text()
    if 'spend_cap_usd: "1.00"' not in text:
        raise SystemExit('the showcase\'s aqven.yaml no longer has spend_cap_usd: "1.00"; update this bench')
    cfg.write_text(text.replace('spend_cap_usd: "1.00"', 'spend_cap_usd: "100.00"'))
    base_dir = root / "experiments" / BASE
    base = yaml.safe_load((base_dir / "experiment.yaml").read_text())
    for q in QUESTIONS[1:]:
        folder = root / "experiments" / q.experiment
        folder.mkdir()
        spec = dict(base)
        if q.kind == "noninferior":
            spec["question"] = {**base["question"], "margin": q.margin}
            spec["description"] = f"{base['description'].strip()} (e2e bench: margin {q.margin})"
        else:
            spec.pop("varies", None)
            spec["variants"] = [{"id": "gpt", "description": "The revise step as written (agent gpt)."}]
            spec["question"] = {
                "kind": "threshold",
                "metric": "promises",
                "bound": q.bound,
                "direction": "at_least",
                "margin": q.margin,
            }
            spec["description"] = f"e2e bench: the promises rate of the polish step (gpt) is at least {q.bound}."
        (folder / "experiment.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
        (folder / "experiment.md").write_text(
            f"# {q.experiment}\n\nWritten by bench/stats/e2e_verdicts.py: {q.note}.\n"
        )
    return root


def load_world(root: Path) -> ModuleType:
    """sim/world.py of the showcase template (byte-identical to the project's copy; loading the copy
    itself would write a __pycache__ into the project's inputs)."""
    template = Path(importlib.util.find_spec("aqven").origin or "").parent / "templates/showcase/sim/world.py"  # type: ignore[union-attr]
    if template.read_bytes() != (root / "sim" / "world.py").read_bytes():
        raise SystemExit("the project's sim/world.py differs from the template's")
    spec = importlib.util.spec_from_file_location("_e2e_world", template)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def truths(svc: ProjectService, world: ModuleType, cases: int | None) -> dict[str, dict[str, Any]]:
    """Per question: the held-out cases a series runs, and the true rates/difference on them."""
    from aqven.project.split import side_of

    ws = svc.workspace()
    out: dict[str, dict[str, Any]] = {}
    for q in QUESTIONS:
        spec = ws.experiment(q.experiment).spec
        held = [c for c in selected_cases(ws.project, spec) if side_of(ws.project.package, c.name) == "holdout"]
        used = held[:cases] if cases is not None else held
        keys = [world.case_key_from_inputs(c.input) for c in used]
        rate = {a: sum(world.true_pass_rate(a, k) for k in keys) / len(keys) for a in ("gpt", "mistral")}
        if q.kind == "noninferior":
            truth = rate["mistral"] - rate["gpt"]
            line = -q.margin
        else:
            truth = rate["gpt"]
            assert q.bound is not None
            line = q.bound + q.margin
        out[q.experiment] = {
            "cases": len(used),
            "names": [c.name for c in used],
            "rate_gpt": rate["gpt"],
            "rate_mistral": rate["mistral"],
            "truth": truth,
            "line": line,
            # The question's claim ("at least the line" / "not worse than the margin") holds when truth > line.
            "claim_true": truth > line,
        }
    return out


# ---- running series -----------------------------------------------------------------------------------


async def one_series(svc: ProjectService, q: Question, seed: int, cases: int | None, repeats: int) -> dict[str, Any]:
    started = time.perf_counter()
    body = SeriesStartBody(
        experiment_id=q.experiment,
        on="holdout",
        cases=cases,
        repeats=repeats,
        simulate=True,
        seed=seed,
        client_op_id=None,
    )
    out = await svc.series.start(body)
    sid = out["series"]["series_id"]
    state = await svc.series.get(sid, wait_seconds=50)
    while state["status"] not in ("done", "failed", "cancelled", "awaiting_approval", "waiting_human"):
        state = await svc.series.get(sid, wait_seconds=50)
    v = state.get("verdict") or {}
    decided = (v.get("decided") or [{}])[0]
    row = {
        "experiment": q.experiment,
        "seed": seed,
        "series_id": sid,
        "status": state["status"],
        "verdict": v.get("verdict"),
        "reason": v.get("reason"),
        "below_mde": v.get("below_mde"),
        "estimate": decided.get("estimate"),
        "low": decided.get("low"),
        "high": decided.get("high"),
        "cases": decided.get("cases"),
        "attempts": state["progress"]["attempts"],
        "counted": state["progress"]["counted"],
        "infra_errors": state["progress"]["infra_errors"],
        "model_failures": state["progress"]["model_failures"],
        "seconds": round(time.perf_counter() - started, 2),
        "text": v.get("text"),
    }
    # Observed passes per variant, for the check of the simulators against the truth.
    for cell in v.get("cells") or []:
        if cell.get("estimate") is not None:
            row[f"rate_{cell['variant']}"] = cell["estimate"]
            row[f"attempts_{cell['variant']}"] = cell["attempts"]
    return row


async def run_seeds(root: Path, seeds: list[int], cases: int | None, repeats: int, log: bool) -> list[dict[str, Any]]:
    svc = ProjectService(root)
    rows: list[dict[str, Any]] = []
    try:
        for i, seed in enumerate(seeds):
            t0 = time.perf_counter()
            got = await asyncio.gather(*(one_series(svc, q, seed, cases, repeats) for q in QUESTIONS))
            rows.extend(got)
            if log:
                verdicts = " ".join(f"{r['verdict'][:4] if r['verdict'] else r['status']}" for r in got)
                print(
                    f"  [{os.getpid()}] seed {seed} ({i + 1}/{len(seeds)}): {verdicts}  "
                    f"{time.perf_counter() - t0:.1f} s",
                    flush=True,
                )
    finally:
        await svc.shutdown()
    return rows


def worker(args: tuple[list[int], int | None, int]) -> list[dict[str, Any]]:
    seeds, cases, repeats = args
    with tempfile.TemporaryDirectory(prefix="aqven-e2e-") as tmp:
        root = make_project(Path(tmp))
        return asyncio.run(run_seeds(root, seeds, cases, repeats, log=True))


# ---- reporting ------------------------------------------------------------------------------------


def read_series(path: Path) -> list[dict[str, Any]]:
    """The per-series rows a run wrote, with numbers as numbers."""

    def value(k: str, v: str) -> Any:
        if v == "":
            return None
        if k in ("seed", "attempts", "counted", "infra_errors", "model_failures", "cases") or k.startswith("attempts_"):
            return int(v)
        if k in ("estimate", "low", "high", "seconds") or k.startswith("rate_"):
            return float(v)
        if k == "below_mde":
            return v == "True"
        return v

    with path.open(newline="") as f:
        return [{k: value(k, v) for k, v in row.items()} for row in csv.DictReader(f)]


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(scipy.stats.beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def summarise(rows: list[dict[str, Any]], truth: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    table = []
    bad = False
    for q in QUESTIONS:
        mine = [r for r in rows if r["experiment"] == q.experiment]
        t = truth[q.experiment]
        n = len(mine)
        counts = {v: sum(r["verdict"] == v for r in mine) for v in ("confirmed", "refuted", "inconclusive")}
        other = n - sum(counts.values())
        wrong_kind = "refuted" if t["claim_true"] else "confirmed"
        k = counts[wrong_kind]
        lo, hi = clopper_pearson(k, n)
        obs = {}
        for a in ("gpt", "mistral"):
            att = sum(r.get(f"attempts_{a}") or 0 for r in mine)
            if att:
                obs[a] = sum((r.get(f"rate_{a}") or 0) * (r.get(f"attempts_{a}") or 0) for r in mine) / att

        # Wiring: the deciding estimate is B − A (or the rate) of the per-variant cells the series reports.
        def expected(r: dict[str, Any], kind: str = q.kind) -> float | None:
            if kind == "threshold":
                return r.get("rate_gpt")
            if r.get("rate_mistral") is None or r.get("rate_gpt") is None:
                return None
            return float(r["rate_mistral"]) - float(r["rate_gpt"])

        miswired = sum(
            1
            for r in mine
            if r["estimate"] is not None and (e := expected(r)) is not None and abs(float(r["estimate"]) - e) > 1e-9
        )
        estimates = [float(r["estimate"]) for r in mine if r["estimate"] is not None]
        entry = {
            "experiment": q.experiment,
            "question": (
                f"noninferior, margin {q.margin}"
                if q.kind == "noninferior"
                else f"threshold at least {q.bound}, margin {q.margin}"
            ),
            "cases": t["cases"],
            "truth": round(t["truth"], 6),
            "decision_line": t["line"],
            "right_answer": "confirmed" if t["claim_true"] else "refuted",
            "series": n,
            "confirmed": counts["confirmed"] / n,
            "refuted": counts["refuted"] / n,
            "inconclusive": counts["inconclusive"] / n,
            "other": other / n,
            "below_mde": sum(bool(r["below_mde"]) for r in mine) / n,
            "wrong": wrong_kind,
            "wrong_rate": k / n,
            "wrong_cp_low": lo,
            "wrong_cp_high": hi,
            "observed_gpt": obs.get("gpt"),
            "true_gpt": t["rate_gpt"],
            "observed_mistral": obs.get("mistral"),
            "true_mistral": t["rate_mistral"] if q.kind == "noninferior" else None,
            "mean_estimate": sum(estimates) / len(estimates) if estimates else None,
            "miswired": miswired,
            "median_half_width": sorted((r["high"] - r["low"]) / 2 for r in mine if r["low"] is not None)[n // 2]
            if n
            else None,
        }
        table.append(entry)
        if (wrong_kind == "confirmed" and k / n > LIMIT) or other or miswired:
            bad = True
    return table, bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="held-out series per question (default 50)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=100, help="held-out cases per series (0: all 725)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes, one project each")
    parser.add_argument("--quick", action="store_true", help="5 seeds of 30 cases (a smoke test)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--name", default="e2e_verdicts", help="file name stem of the CSVs (default e2e_verdicts)")
    parser.add_argument(
        "--from-csv", action="store_true", help="run nothing: summarise bench/out/<name>_series.csv again"
    )
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.cases = 5, 30
    cases = args.cases or None
    out = args.out or (ROOT / ("bench/out" if args.quick else "docs/figures"))
    started = time.perf_counter()

    with tempfile.TemporaryDirectory(prefix="aqven-e2e-truth-") as tmp:
        root = make_project(Path(tmp))
        svc = ProjectService(root)
        truth = truths(svc, load_world(root), cases)
        asyncio.run(svc.shutdown())
    print(f"held-out series of {args.cases or 'all'} cases × {args.repeats} repeats, {args.seeds} seeds per question")
    for q in QUESTIONS:
        t = truth[q.experiment]
        what = "mistral − gpt" if q.kind == "noninferior" else "gpt rate"
        print(
            f"  {q.experiment:27} {t['cases']} cases: true {what} {t['truth']:+.5f} vs line {t['line']:+.4f} → "
            f"right answer {'confirmed' if t['claim_true'] else 'refuted'} (gpt {t['rate_gpt']:.5f}, "
            f"mistral {t['rate_mistral']:.5f})"
        )

    series_csv = ROOT / f"bench/out/{args.name}_series.csv"
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    jobs = max(1, min(args.jobs, len(seeds)))
    if args.from_csv:
        rows = read_series(series_csv)
    else:
        chunks = [seeds[i::jobs] for i in range(jobs)]
        if jobs == 1:
            rows = worker((chunks[0], cases, args.repeats))
        else:
            with mp.get_context("spawn").Pool(jobs) as pool:
                rows = [r for part in pool.map(worker, [(c, cases, args.repeats) for c in chunks]) for r in part]
        rows.sort(key=lambda r: (r["experiment"], r["seed"]))
        series_csv.parent.mkdir(parents=True, exist_ok=True)
        keys = list(dict.fromkeys(k for r in rows for k in r))
        with series_csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
    wall = time.perf_counter() - started

    table, bad = summarise(rows, truth)
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{args.name}.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        for e in table:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in e.items()})

    attempts = sum(r["attempts"] for r in rows)
    cpu = sum(
        getattr(resource.getrusage(w), k)
        for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for k in ("ru_utime", "ru_stime")
    )
    print(
        f"\n==== summary: {len(rows)} series, {attempts} attempts (summarised again from {series_csv}) ===="
        if args.from_csv
        else f"\n==== summary: {len(rows)} series, {attempts} attempts in {wall:.0f} s "
        f"({attempts / wall:.0f} attempts/s on {jobs} process(es); CPU {cpu:.0f} s; load average "
        f"{os.getloadavg()[0]:.2f}) ===="
    )
    print(
        f"{'question':27} {'truth':>9} {'line':>7} {'right':>9} | {'conf':>5} {'refu':>5} {'inco':>5} {'othr':>5} | "
        f"wrong verdict: rate [95% CP]      | half-width | observed vs true rate"
    )
    for e in table:
        obs = f"gpt {e['observed_gpt']:.4f}/{e['true_gpt']:.4f}"
        if e["observed_mistral"] is not None:
            obs += f", mistral {e['observed_mistral']:.4f}/{e['true_mistral']:.4f}"
        print(
            f"{e['experiment']:27} {e['truth']:+9.5f} {e['decision_line']:+7.3f} {e['right_answer']:>9} | "
            f"{e['confirmed']:5.2f} {e['refuted']:5.2f} {e['inconclusive']:5.2f} {e['other']:5.2f} | "
            f"false {e['wrong'][:4]}. {e['wrong_rate']:.3f} [{e['wrong_cp_low']:.3f}, {e['wrong_cp_high']:.3f}] | "
            f"{e['median_half_width']:.4f}     | {obs}"
        )
    for e in table:
        print(
            f"{e['experiment']:27} mean estimate {e['mean_estimate']:+.5f} vs truth {e['truth']:+.5f}; "
            f"series whose estimate is not B − A (or the rate) of their cells: {e['miswired']}"
        )
    for e in table:
        if e["wrong"] == "confirmed":
            flag = "ABOVE 5% — a bug" if e["wrong_rate"] > LIMIT else "ok"
            print(
                f"false confirmation rate of {e['experiment']}: {e['wrong_rate']:.3f} "
                f"(95% Clopper–Pearson {e['wrong_cp_low']:.3f}–{e['wrong_cp_high']:.3f}) — {flag}"
            )
    odd = [r for r in rows if r["status"] != "done" or r["verdict"] not in ("confirmed", "refuted", "inconclusive")]
    for r in odd:
        print(
            f"UNEXPECTED: {r['experiment']} seed {r['seed']}: status {r['status']}, verdict {r['verdict']} "
            f"({r['reason']})"
        )
    print(f"series: {series_csv}\nsummary: {out / f'{args.name}.csv'}")
    return 1 if bad or odd else 0


if __name__ == "__main__":
    sys.exit(main())
