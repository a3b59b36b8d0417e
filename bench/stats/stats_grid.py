"""Coverage of the series intervals over the full grid of DESIGN §7, against a known truth.

Both interval kinds a verdict stands on are measured, with the very arithmetic the server runs (the
vectorised ``*_batch`` functions of `aqven.research.stats.intervals`):

* **one rate** (`one_rate_batch`): rates {0.5, 0.7, 0.9, 0.95, 0.97, 0.99, 0.995, 0.999} × cases
  {10, 30, 100, 300, 1000} × repeats {1, 2, 5, 10, 20} × intra-case correlation ρ {0, 0.1, 0.3, 0.6, 0.9}.
  With one repeat ρ does not change the data (each case gives one attempt, which passes with
  probability p whatever the spread between cases), so those cells are run once, with ρ = 0: 840 cells.
* **paired difference** (`paired_difference_batch`), on a coarser grid: rate of A {0.5, 0.9, 0.97, 0.99,
  0.999} × cases {10, 30, 100, 300, 1000} × repeats {1, 2, 5, 20} × ρ {0, 0.3, 0.9} × between-variant
  correlation c {0, 0.5, 0.9} × true difference B − A {0, −min(0.02, (1 − p_A)/2)}. With ρ = 0 every case
  has the same rate, so c has nothing to link and only c = 0 is run: 1,400 cells.

Simulation (as tests/research/stats/test_stats_coverage.py): each case draws its own pass rate from a Beta with mean p
and intra-case correlation ρ (α = p(1−ρ)/ρ, β = (1−p)(1−ρ)/ρ; every case has rate p when ρ = 0), and each
of its r attempts passes with that rate. In a pair, the two variants' case rates are linked by a Gaussian
copula with correlation c: z_B = c·z_A + √(1−c²)·ε, q = F⁻¹(Φ(z)). F⁻¹ is tabulated once per (p, ρ) on a
fine grid of z (20,001 points in [−8.5, 8.5], exact `betaincinv`/`betainccinv` at each point) and
interpolated; the script checks that the tabulated distribution has mean p (to 1e-5) and the intended ρ.
Each cell runs ``--sims`` series (2,000) from its own fixed seed (a hash of the cell), so a cell gives
the same numbers whatever else the grid holds and however many processes run it.

Per cell: coverage (the share of series whose interval holds the truth), the two one-sided misses
P(truth < low) and P(truth > high), the median and 90th-percentile width, and the width of an **oracle**:
a Wald interval that knows the true variance of the estimate —
``p(1−p)(1+(r−1)ρ)/(n·r)`` for one rate, and ``(v_A + v_B − 2·Cov(q_A, q_B))/n`` for the pair, with
``v = p(1−p)(1+(r−1)ρ)/r`` and ``Cov(q_A, q_B)`` the covariance of the copula-linked case rates (computed
by quadrature). ``sd_ratio`` (the estimate's standard deviation over the series ÷ the oracle's) checks the
oracle itself: it should be about 1 everywhere.

Negative controls on the same simulated data: naive Wilson on all attempts (`naive_wilson_batch`; for
pairs, Newcombe's square-and-add over naive Wilson without the correlation term) and clustered Wald
(`clustered_wald_batch`; for pairs, d ± z·√V on the per-case residual differences). They must fail
visibly.

A third world, for single cells only (``--cell broken,...``): a variant that **breaks a few cases**. A's
case rates are drawn as for one rate; B runs the same cases at the same rates, except that each case is
broken for B (every attempt fails) with probability β. The truth is B − A = −β·p, the case a noninferior
question must not confirm; the oracle variance is Var(δ)/n of the per-case difference δ = m_B − m_A.

Beyond the Beta grid, the populations of issue 10 (defined and simulated in `stats_families.py`, which
says how each world and its oracle are computed): the coverage families ``bimodal`` (a few hard cases
among easy ones with scattered failures), ``scores`` (scores in [0, 1]), ``drops`` (unequal repeats:
attempts lost at random, independently per variant), ``small_n`` (5–12 cases, many repeats) and
``ones`` (rates exactly 1.0), each for one rate and paired; ``boundary`` (false confirmations of the four
question kinds with the truth on the flip point, decided as `verdict.classify` does); and ``peeking``
(stop_early: the confidence sequence read at 20 looks, stopped at the first decided). Each part writes its
CSV (coverage_<family>.csv, boundary.csv, peeking.csv); the summary prints per part the figures and the
targets of issue 10 with PASS/FAIL.

    .venv/bin/python bench/stats/stats_grid.py            # every part → docs/figures/
    .venv/bin/python bench/stats/stats_grid.py --quick    # a small version of every part → bench/out/ (minutes)
    .venv/bin/python bench/stats/stats_grid.py --only bimodal,boundary   # some parts (see --help for the names)
    .venv/bin/python bench/stats/stats_grid.py --from-csv # the summary of every part's CSV in the output folder
    .venv/bin/python bench/stats/stats_grid.py --recheck-boundary 10 --sims 20000 --base-seed 7
                # the 10 boundary cells with the most false confirmations again → boundary_recheck.csv
    .venv/bin/python bench/stats/stats_grid.py --recheck-top 10 --sims 20000 --base-seed 7
                # the 10 cells of each Beta kind and of each family with the largest one-sided miss again,
                # with new series → coverage_recheck.csv, families_recheck.csv
    .venv/bin/python bench/stats/stats_grid.py --cell one_rate,p=0.97,n=100,r=20,rho=0.3 --sims 20000 --base-seed 7
    .venv/bin/python bench/stats/stats_grid.py --cell broken,p=0.5,n=30,r=5,rho=0.9,beta=0.05 --out bench/out/broken
    options: --sims N (series per cell), --jobs N (processes), --out DIR, --only PARTS, --no-plot,
             --from-csv (summary and plot from the CSVs in the output folder, no simulation),
             --compare PATH (the same cells from an earlier run, a CSV or a folder of them: before → after)

Writes coverage_one_rate.csv, coverage_paired.csv and coverage.png (the Beta grid), coverage_<family>.csv,
boundary.csv, peeking.csv and families.png (skipped with a message when matplotlib is missing) to the output
folder and prints a summary; the exit status is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import os
import resource
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.special
import scipy.stats

from aqven.research.stats.intervals import (
    Z95,
    clustered_wald_batch,
    naive_wilson_batch,
    one_rate_batch,
    paired_difference_batch,
)

ROOT = Path(__file__).resolve().parents[2]
BASE_SEED = 2026
FLOOR = 0.93  # the floor of tests/research/stats/test_stats_coverage.py
TARGET = 0.95
Z_GRID = np.linspace(-8.5, 8.5, 20_001)
Z_QUAD = np.linspace(-8.5, 8.5, 2_001)  # the quadrature of Cov(q_A, q_B)

FULL: dict[str, dict[str, list[Any]]] = {
    "one_rate": {
        "rates": [0.5, 0.7, 0.9, 0.95, 0.97, 0.99, 0.995, 0.999],
        "cases": [10, 30, 100, 300, 1000],
        "repeats": [1, 2, 5, 10, 20],
        "rhos": [0.0, 0.1, 0.3, 0.6, 0.9],
    },
    "paired": {
        "rates": [0.5, 0.9, 0.97, 0.99, 0.999],
        "cases": [10, 30, 100, 300, 1000],
        "repeats": [1, 2, 5, 20],
        "rhos": [0.0, 0.3, 0.9],
        "cs": [0.0, 0.5, 0.9],
    },
}
QUICK: dict[str, dict[str, list[Any]]] = {
    "one_rate": {
        "rates": [0.5, 0.95, 0.99, 0.999],
        "cases": [10, 100, 1000],
        "repeats": [1, 5, 20],
        "rhos": [0.0, 0.3, 0.9],
    },
    "paired": {
        "rates": [0.5, 0.97, 0.999],
        "cases": [10, 100],
        "repeats": [1, 5, 20],
        "rhos": [0.0, 0.3, 0.9],
        "cs": [0.0, 0.9],
    },
}


# ---- cells --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    kind: str  # one_rate | paired
    p: float  # the rate (one rate) or the rate of A (paired)
    n: int
    r: int
    rho: float
    c: float = 0.0
    diff: float = 0.0  # true B − A (paired)
    beta: float = 0.0  # share of cases that B breaks (broken)

    @property
    def key(self) -> str:
        key = f"{self.kind}|{self.p!r}|{self.n}|{self.r}|{self.rho!r}|{self.c!r}|{self.diff!r}"
        return key + (f"|{self.beta!r}" if self.kind == "broken" else "")  # older kinds keep their seeds

    @property
    def seed(self) -> int:
        return zlib.crc32(self.key.encode())

    @property
    def truth(self) -> float:
        if self.kind == "broken":
            return -self.beta * self.p
        return self.diff if self.kind == "paired" else self.p

    @property
    def cost(self) -> float:
        return self.n * (1.0 if self.kind == "one_rate" else 2.5)


def small_difference(pa: float) -> float:
    """B worse than A by half of A's failure rate, at most 2 points."""
    return -round(min(0.02, (1 - pa) / 2), 6)


def one_rate_cells(g: dict[str, list[Any]]) -> list[Cell]:
    out = []
    for p in g["rates"]:
        for n in g["cases"]:
            for r in g["repeats"]:
                for rho in g["rhos"]:
                    if r == 1 and rho != 0.0:
                        continue  # one attempt per case: ρ does not change the data
                    out.append(Cell("one_rate", p, n, r, rho))
    return out


def paired_cells(g: dict[str, list[Any]]) -> list[Cell]:
    out = []
    for p in g["rates"]:
        for diff in (0.0, small_difference(p)):
            for n in g["cases"]:
                for r in g["repeats"]:
                    for rho in g["rhos"]:
                        for c in g["cs"]:
                            if rho == 0.0 and c != 0.0:
                                continue  # no spread between cases: nothing for c to link
                            out.append(Cell("paired", p, n, r, rho, c, diff))
    return out


# ---- the simulated world --------------------------------------------------------------------------------


def beta_params(p: float, rho: float) -> tuple[float, float]:
    return p * (1 - rho) / rho, (1 - p) * (1 - rho) / rho


@functools.lru_cache(maxsize=256)
def quantile_table(p: float, rho: float) -> np.ndarray:
    """F⁻¹(Φ(z)) on Z_GRID for the Beta(mean p, ICC ρ) of case rates (exact at each grid point)."""
    a, b = beta_params(p, rho)
    lower = scipy.special.betaincinv(a, b, scipy.special.ndtr(Z_GRID))
    upper = scipy.special.betainccinv(a, b, scipy.special.ndtr(-Z_GRID))  # precise near u = 1
    table: np.ndarray = np.where(Z_GRID < 0, lower, upper)
    return table


def case_rates_from_z(z: np.ndarray, p: float, rho: float, table: np.ndarray | None) -> np.ndarray:
    if rho == 0.0:
        return np.full(z.shape, p)
    assert table is not None
    out: np.ndarray = np.interp(z, Z_GRID, table)
    return out


def quad_weights(z: np.ndarray) -> np.ndarray:
    w = scipy.stats.norm.pdf(z) * (z[1] - z[0])
    w[[0, -1]] /= 2
    out: np.ndarray = w / w.sum()
    return out


def table_moments(p: float, rho: float) -> tuple[float, float]:
    """Mean and ICC (Var(q)/(p(1−p))) of the tabulated case-rate distribution."""
    w = quad_weights(Z_GRID)
    q = quantile_table(p, rho)
    mean = float((w * q).sum())
    return mean, float((w * (q - mean) ** 2).sum()) / (p * (1 - p))


def case_covariance(pa: float, pb: float, rho: float, c: float) -> float:
    """Cov(q_A, q_B) of case rates linked by a Gaussian copula with correlation c (quadrature)."""
    if rho == 0.0 or c == 0.0:
        return 0.0
    ta, tb = quantile_table(pa, rho), quantile_table(pb, rho)
    w = quad_weights(Z_QUAD)
    qa = np.interp(Z_QUAD, Z_GRID, ta)
    mean_a, mean_b = float((w * qa).sum()), float((w * np.interp(Z_QUAD, Z_GRID, tb)).sum())
    zb = c * Z_QUAD[:, None] + math.sqrt(1 - c * c) * Z_QUAD[None, :]
    inner = (np.interp(zb, Z_GRID, tb) * w[None, :]).sum(axis=1)  # E[q_B | z_A]
    return float((w * qa * inner).sum()) - mean_a * mean_b


def oracle_sd(cell: Cell, cov: float = 0.0) -> float:
    def v(p: float) -> float:
        return p * (1 - p) * (1 + (cell.r - 1) * cell.rho) / cell.r

    if cell.kind == "one_rate":
        return math.sqrt(v(cell.p) / cell.n)
    if cell.kind == "broken":
        # δ = m_B − m_A per case: unbroken, two independent draws at the case's rate q; broken, m_B = 0.
        p, rho, r, beta = cell.p, cell.rho, cell.r, cell.beta
        e_qq = rho * p * (1 - p) + p * p  # E[q²]
        e_var = p * (1 - p) * (1 - rho)  # E[q(1 − q)]
        e_d2 = (1 - beta) * 2 * e_var / r + beta * (e_var / r + e_qq)
        return math.sqrt((e_d2 - (beta * p) ** 2) / cell.n)
    pa, pb = cell.p, cell.p + cell.diff
    return math.sqrt(max(v(pa) + v(pb) - 2 * cov, 0.0) / cell.n)


# ---- one cell -----------------------------------------------------------------------------------------

_FIELDS = {
    "one_rate": ("kind", "p", "n", "r", "rho"),
    "paired": ("kind", "p", "n", "r", "rho", "c", "diff"),
    "broken": ("kind", "p", "n", "r", "rho", "beta"),
}


def _cover(low: np.ndarray, high: np.ndarray, truth: float) -> tuple[float, float, float]:
    """(coverage, P(truth < low), P(truth > high)); a row without an interval counts as a miss."""
    below = float(np.mean(truth < low))  # the interval lies above the truth
    above = float(np.mean(truth > high))  # ... below the truth
    cov = float(np.mean((low <= truth) & (truth <= high)))
    return cov, below, above


def _paired_controls(
    ya: np.ndarray, yb: np.ndarray, r: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    pa, la, ua = naive_wilson_batch(ya, r)
    pb, lb, ub = naive_wilson_batch(yb, r)
    d = pb - pa
    naive = (d - np.hypot(pb - lb, ua - pa), d + np.hypot(ub - pb, pa - la))
    n = r.shape[1]
    big_n = r.sum(axis=1)
    resid = (yb - r * pb[:, None]) - (ya - r * pa[:, None])
    v = (n / (n - 1) if n > 1 else 0.0) * (resid**2).sum(axis=1) / big_n**2
    half = Z95 * np.sqrt(v)
    return naive, (np.clip(d - half, -1, 1), np.clip(d + half, -1, 1))


def run_cell(job: tuple[Cell, int, float, int]) -> dict[str, Any]:
    cell, sims, cov_q, base_seed = job
    started = time.perf_counter()
    rng = np.random.default_rng([base_seed, cell.seed])
    reps = np.full((sims, cell.n), float(cell.r))
    truth = cell.truth
    if cell.kind == "one_rate":
        if cell.rho == 0.0:
            q: np.ndarray = np.full((sims, cell.n), cell.p)
        else:
            a, b = beta_params(cell.p, cell.rho)
            q = rng.beta(a, b, size=(sims, cell.n))
        y = rng.binomial(cell.r, q).astype(np.float64)
        est, low, high = one_rate_batch(y, reps)
        controls = {
            "naive_wilson": naive_wilson_batch(y, reps)[1:],
            "clustered_wald": clustered_wald_batch(y, reps)[1:],
        }
        all_pass = float(np.mean(y.sum(axis=1) == cell.n * cell.r))
    elif cell.kind == "broken":
        if cell.rho == 0.0:
            q = np.full((sims, cell.n), cell.p)
        else:
            a, b = beta_params(cell.p, cell.rho)
            q = rng.beta(a, b, size=(sims, cell.n))
        ya = rng.binomial(cell.r, q).astype(np.float64)
        broken = rng.random((sims, cell.n)) < cell.beta
        yb = np.where(broken, 0.0, rng.binomial(cell.r, q)).astype(np.float64)
        est, low, high = paired_difference_batch(ya, reps, yb, reps)
        naive, cwald = _paired_controls(ya, yb, reps)
        controls = {"naive_wilson": naive, "clustered_wald": cwald}
        all_pass = float(np.mean((ya.sum(axis=1) == cell.n * cell.r) & (yb.sum(axis=1) == cell.n * cell.r)))
    else:
        pa, pb = cell.p, cell.p + cell.diff
        za = rng.standard_normal((sims, cell.n))
        zb = cell.c * za + math.sqrt(1 - cell.c**2) * rng.standard_normal((sims, cell.n))
        ta = quantile_table(pa, cell.rho) if cell.rho else None
        tb = quantile_table(pb, cell.rho) if cell.rho else None
        qa = case_rates_from_z(za, pa, cell.rho, ta)
        qb = case_rates_from_z(zb, pb, cell.rho, tb)
        ya = rng.binomial(cell.r, qa).astype(np.float64)
        yb = rng.binomial(cell.r, qb).astype(np.float64)
        est, low, high = paired_difference_batch(ya, reps, yb, reps)
        naive, cwald = _paired_controls(ya, yb, reps)
        controls = {"naive_wilson": naive, "clustered_wald": cwald}
        all_pass = float(np.mean((ya.sum(axis=1) == cell.n * cell.r) & (yb.sum(axis=1) == cell.n * cell.r)))
    coverage, below, above = _cover(low, high, truth)
    width = high - low
    o_sd = oracle_sd(cell, cov_q)
    o_width = 2 * Z95 * o_sd
    med, p90 = (float(x) for x in np.nanquantile(width, [0.5, 0.9]))
    row: dict[str, Any] = {
        **{k: v for k, v in asdict(cell).items() if k in _FIELDS[cell.kind]},
        "truth": truth,
        "sims": sims,
        "seed": f"{base_seed}:{cell.seed}",
        "coverage": coverage,
        "p_true_below_low": below,
        "p_true_above_high": above,
        "worst_one_sided": max(below, above),
        "width_median": med,
        "width_p90": p90,
        "oracle_width": o_width,
        "ratio_median": med / o_width if o_width > 0 else math.nan,
        "ratio_p90": p90 / o_width if o_width > 0 else math.nan,
        "sd_ratio": float(np.std(est)) / o_sd if o_sd > 0 else math.nan,
        "all_pass_share": all_pass,
    }
    if cell.kind == "paired":
        row["case_cov"] = cov_q
    for name, (lo, hi) in controls.items():
        cv, b, a = _cover(lo, hi, truth)
        row[f"{name}_coverage"] = cv
        row[f"{name}_worst_one_sided"] = max(a, b)
    row["seconds"] = time.perf_counter() - started
    return row


# ---- the grid -----------------------------------------------------------------------------------------


def check_tables(cells: Sequence[Cell]) -> float:
    """The tabulated copula marginals have the intended mean and ICC; returns the largest mean error."""
    worst = 0.0
    pairs = {(p, c.rho) for c in cells if c.kind == "paired" and c.rho for p in (c.p, c.p + c.diff)}
    for p, rho in sorted(pairs):
        mean, icc = table_moments(p, rho)
        worst = max(worst, abs(mean - p))
        if abs(mean - p) > 1e-5 or abs(icc - rho) > 0.01 * rho:
            raise SystemExit(f"case-rate table off for p={p}, ρ={rho}: mean {mean:.7f}, ICC {icc:.4f}")
    return worst


def run_grid(cells: Sequence[Cell], sims: int, jobs: int, base_seed: int = BASE_SEED) -> list[dict[str, Any]]:
    covs: dict[tuple[float, float, float, float], float] = {}
    for c in cells:
        if c.kind == "paired":
            k = (c.p, c.p + c.diff, c.rho, c.c)
            if k not in covs:
                covs[k] = case_covariance(*k)
    work = [(c, sims, covs.get((c.p, c.p + c.diff, c.rho, c.c), 0.0), base_seed) for c in cells]
    import stats_families as fam

    return fam.run_jobs(run_cell, work, [c.cost for c in cells], jobs, parts=20)


# ---- reporting ----------------------------------------------------------------------------------------


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        keys = [k for k in dict.fromkeys(k for row in rows for k in row) if k != "seconds"]
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def read_csv(path: Path) -> list[dict[str, Any]]:
    def value(k: str, v: str) -> Any:
        if k in ("kind", "seed", "family", "question", "world"):
            return v
        if k in ("n", "r", "sims"):
            return int(v)
        return float(v)

    with path.open(newline="") as f:  # a mixed CSV (the recheck) leaves other kinds' columns empty
        return [{k: value(k, v) for k, v in row.items() if v != ""} for row in csv.DictReader(f)]


def describe(row: dict[str, Any]) -> str:
    text = f"p={row['p']} n={row['n']} r={row['r']} ρ={row['rho']}"
    if row["kind"] == "paired":
        text += f" c={row['c']} d={row['diff']}"
    if row["kind"] == "broken":
        text += f" β={row['beta']} (d={row['truth']:.6g})"
    return text


def expected_fails(row: dict[str, Any]) -> float:
    """Expected failing attempts of the series (of the better variant, for a pair): how much the data can say."""
    best = max(row["p"], row["p"] + row.get("diff", 0.0))
    return float(row["n"] * row["r"] * (1 - best))


def summarise(kind: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    cov = np.array([r["coverage"] for r in rows])
    worst = max(rows, key=lambda r: r["worst_one_sided"])
    lowest = min(rows, key=lambda r: r["coverage"])
    rm = np.array([r["ratio_median"] for r in rows])
    r90 = np.array([r["ratio_p90"] for r in rows])
    sd = np.array([r["sd_ratio"] for r in rows])
    below_low = np.array([r["p_true_below_low"] for r in rows])
    above_high = np.array([r["p_true_above_high"] for r in rows])
    lines = [
        f"{kind}: {len(rows)} cells × {rows[0]['sims']} series",
        f"  ours            coverage min {cov.min():.4f} ({describe(lowest)}), mean {cov.mean():.4f}; "
        f"cells < {FLOOR}: {int((cov < FLOOR).sum())} ({(cov < FLOOR).mean():.1%}), "
        f"< 0.94: {int((cov < 0.94).sum())} ({(cov < 0.94).mean():.1%})",
        f"                  worst one-sided miss {worst['worst_one_sided']:.4f} ({describe(worst)}; "
        f"P(true<low) {worst['p_true_below_low']:.4f}, P(true>high) {worst['p_true_above_high']:.4f}); "
        f"mean P(true<low) {below_low.mean():.4f}, mean P(true>high) {above_high.mean():.4f}",
        f"                  width ÷ oracle: median width {np.median(rm):.3f} (cells' median; range "
        f"{rm.min():.3f}–{rm.max():.3f}), 90th-pct width {np.median(r90):.3f} (range {r90.min():.3f}–"
        f"{r90.max():.3f}); oracle check sd(est)/oracle sd {np.median(sd):.3f} ({sd.min():.3f}–{sd.max():.3f})",
    ]
    rich = np.array([expected_fails(r) >= 10 for r in rows])
    if rich.any():
        lines.append(
            f"                  width ÷ oracle where ≥ 10 failures are expected ({int(rich.sum())} cells): median "
            f"{np.median(rm[rich]):.3f} (max {rm[rich].max():.3f}), 90th-pct {np.median(r90[rich]):.3f} (max "
            f"{r90[rich].max():.3f}); where < 10 ({int((~rich).sum())} cells): median "
            + (f"{np.median(rm[~rich]):.3f} (max {rm[~rich].max():.3f})" if (~rich).any() else "-")
        )
    for name in ("naive_wilson", "clustered_wald"):
        c = np.array([r[f"{name}_coverage"] for r in rows])
        w = np.array([r[f"{name}_worst_one_sided"] for r in rows])
        lines.append(
            f"  {name:15} coverage min {c.min():.4f}, mean {c.mean():.4f}; cells < {FLOOR}: "
            f"{int((c < FLOOR).sum())} ({(c < FLOOR).mean():.1%}); worst one-sided miss {w.max():.4f}"
        )
    return lines


def breakdown(rows: Sequence[dict[str, Any]], axis: str) -> list[str]:
    """Coverage of ours and the controls along one axis of the grid."""
    values = sorted({r[axis] for r in rows})
    lines = [
        f"  by {axis:5} | cells | ours min  mean  <{FLOOR} | naive Wilson min  mean | clustered Wald min  mean "
        f"| width÷oracle (median)"
    ]
    for v in values:
        sub = [r for r in rows if r[axis] == v]
        o = np.array([r["coverage"] for r in sub])
        nw = np.array([r["naive_wilson_coverage"] for r in sub])
        cw = np.array([r["clustered_wald_coverage"] for r in sub])
        rm = np.median([r["ratio_median"] for r in sub])
        lines.append(
            f"  {v!s:>8} | {len(sub):5} | {o.min():.3f} {o.mean():.3f} {int((o < FLOOR).sum()):4} | "
            f"{nw.min():16.3f} {nw.mean():.3f} | {cw.min():18.3f} {cw.mean():.3f} | {rm:.3f}"
        )
    return lines


def plot(results: dict[str, list[dict[str, Any]]], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    kinds = [k for k in ("one_rate", "paired") if results.get(k)]
    fig, axes = plt.subplots(3, len(kinds), figsize=(6.5 * len(kinds), 13), squeeze=False)
    styles = {
        "coverage": ("ours", "tab:blue"),
        "naive_wilson_coverage": ("naive Wilson", "tab:red"),
        "clustered_wald_coverage": ("clustered Wald", "tab:orange"),
    }
    titles = {"one_rate": "one rate", "paired": "paired difference"}
    for j, kind in enumerate(kinds):
        rows = results[kind]
        ax = axes[0][j]
        for col, (label, colour) in styles.items():
            ys = np.sort([r[col] for r in rows])
            ax.plot(np.arange(1, len(ys) + 1), ys, color=colour, label=label, lw=1.6)
        ax.axhline(TARGET, color="black", lw=1, label="0.95")
        ax.axhline(FLOOR, color="grey", lw=1, ls="--", label=f"{FLOOR} (test floor)")
        ax.set_ylim(0, 1.005)
        ax.set_xlabel("cells, each method sorted by its coverage")
        ax.set_ylabel("coverage")
        ax.set_title(f"{titles[kind]}: {len(rows)} cells × {rows[0]['sims']} series")
        ax.legend(loc="lower right", fontsize=8)
        ax = axes[1][j]
        rates = sorted({r["p"] for r in rows})
        pos = {p: i for i, p in enumerate(rates)}
        rng = np.random.default_rng(0)
        for k, (col, (label, colour)) in enumerate(styles.items()):
            xs = np.array([pos[r["p"]] for r in rows]) + (k - 1) * 0.25 + rng.uniform(-0.08, 0.08, len(rows))
            ax.scatter(xs, [r[col] for r in rows], s=4, color=colour, alpha=0.5, label=label)
        ax.axhline(TARGET, color="black", lw=1)
        ax.axhline(FLOOR, color="grey", lw=1, ls="--")
        ax.set_xticks(range(len(rates)), [str(p) for p in rates])
        ax.set_xlabel("true rate" if kind == "one_rate" else "true rate of A")
        ax.set_ylabel("coverage")
        ax.set_ylim(0, 1.005)
        ax.legend(loc="lower left", fontsize=8, markerscale=3)
        ax = axes[2][j]
        for k, (col, label, colour) in enumerate(
            (("ratio_median", "median width", "tab:blue"), ("ratio_p90", "90th-percentile width", "tab:purple"))
        ):
            xs = np.array([pos[r["p"]] for r in rows]) + (k - 0.5) * 0.3 + rng.uniform(-0.08, 0.08, len(rows))
            ax.scatter(xs, [r[col] for r in rows], s=4, color=colour, alpha=0.5, label=label)
        ax.axhline(1.0, color="black", lw=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(rates)), [str(p) for p in rates])
        ax.set_xlabel("true rate" if kind == "one_rate" else "true rate of A")
        ax.set_ylabel("our width ÷ oracle width")
        ax.legend(loc="upper left", fontsize=8, markerscale=3)
    fig.suptitle("Coverage of the 95% intervals (DESIGN §7) against a known truth")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot: {path}"


def parse_cell(spec: str) -> Cell:
    kind, *pairs = spec.split(",")
    if kind not in _FIELDS:
        raise SystemExit(f"--cell: the kind is one_rate, paired or broken, not {kind!r}")
    values = dict(pair.split("=", 1) for pair in pairs)
    try:
        return Cell(
            kind,
            float(values["p"]),
            int(values["n"]),
            int(values["r"]),
            float(values.get("rho", 0)),
            float(values.get("c", 0)),
            float(values.get("diff", 0)),
            float(values.get("beta", 0)),
        )
    except (KeyError, ValueError) as exc:
        raise SystemExit(f"--cell {spec!r}: needs p=, n=, r= (and rho=, c=, diff=, beta=): {exc}") from exc


def cell_spec(row: dict[str, Any]) -> str:
    spec = f"{row['kind']},p={row['p']},n={row['n']},r={row['r']},rho={row['rho']}"
    if row["kind"] == "broken":
        return spec + f",beta={row['beta']}"
    return spec + (f",c={row['c']},diff={row['diff']}" if row["kind"] == "paired" else "")


def recheck(specs: Sequence[str], sims: int, jobs: int, base_seed: int, path: Path, before: Path | None = None) -> int:
    """Selected cells again, with more series or another seed; one-sided misses with 95% Clopper–Pearson."""
    cells = [parse_cell(s) for s in specs]
    rows = run_grid(cells, sims, min(jobs, len(cells)), base_seed)
    for row in rows:
        for side in ("p_true_below_low", "p_true_above_high"):
            lo, hi = _cp(round(row[side] * sims), sims)
            row[f"{side}_cp_low"], row[f"{side}_cp_high"] = lo, hi
    write_csv(rows, path)
    print(f"→ {path}")
    for row in rows:
        print(
            f"{row['kind']} {describe(row)}: {sims} series (seed {row['seed']}): coverage {row['coverage']:.4f}; "
            f"P(truth < low) {row['p_true_below_low']:.4f} [{row['p_true_below_low_cp_low']:.4f}–"
            f"{row['p_true_below_low_cp_high']:.4f}], "
            f"P(truth > high) {row['p_true_above_high']:.4f} [{row['p_true_above_high_cp_low']:.4f}–"
            f"{row['p_true_above_high_cp_high']:.4f}]; "
            f"median width ÷ oracle {row['ratio_median']:.3f}"
        )
    if before is not None:
        print("\n".join(compare(rows, before)))
    return 0


def _compare_key(row: dict[str, Any]) -> tuple[str, str, int]:
    return cell_spec(row), str(row["seed"]), int(row["sims"])


def load_before(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Rows of an earlier run (a CSV, or every coverage_*.csv of a folder), by cell, seed and series."""
    files = sorted(path.glob("coverage_*.csv")) if path.is_dir() else [path]
    if not files or not all(f.exists() for f in files):
        raise SystemExit(f"--compare: no coverage CSV at {path}")
    return {_compare_key(row): row for f in files for row in read_csv(f) if "family" not in row}  # Beta grid rows


def compare(rows: Sequence[dict[str, Any]], path: Path) -> list[str]:
    """Before → after for the cells of this run that an earlier run measured on the same series."""
    before = load_before(path)
    pairs = [(before[_compare_key(r)], r) for r in rows if _compare_key(r) in before]
    lines = [f"compared with {path}: {len(pairs)} of {len(rows)} cells measured there on the same series"]
    if not pairs:
        return lines
    if len(pairs) <= 40:
        for b, a in pairs:
            lines.append(
                f"  {a['kind']} {describe(a)}: P(truth < low) {b['p_true_below_low']:.4f} → "
                f"{a['p_true_below_low']:.4f}, P(truth > high) {b['p_true_above_high']:.4f} → "
                f"{a['p_true_above_high']:.4f}, coverage {b['coverage']:.4f} → {a['coverage']:.4f}, "
                f"median width × {a['width_median'] / b['width_median']:.3f}"
            )
    for kind in sorted({a["kind"] for _, a in pairs}):
        sub = [(b, a) for b, a in pairs if a["kind"] == kind]
        w = np.array([a["width_median"] / b["width_median"] for b, a in sub])
        limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / sub[0][1]["sims"])
        worst_b = max(sub, key=lambda ba: ba[0]["worst_one_sided"])[0]
        worst_a = max(sub, key=lambda ba: ba[1]["worst_one_sided"])[1]
        if len(pairs) > 40:  # the cells that changed most, each way
            order = np.argsort(w)
            for i in [*order[:3], *order[::-1][:3]]:
                b, a = sub[i]
                lines.append(
                    f"  {kind} {describe(a)}: median width × {w[i]:.3f}; P(truth < low) "
                    f"{b['p_true_below_low']:.4f} → {a['p_true_below_low']:.4f}, P(truth > high) "
                    f"{b['p_true_above_high']:.4f} → {a['p_true_above_high']:.4f}"
                )
        lines += [
            f"  {kind}: {len(sub)} cells; median width after ÷ before: median {np.median(w):.3f}, "
            f"range {w.min():.3f}–{w.max():.3f}; cells wider by > 5%: {int((w > 1.05).sum())}, "
            f"narrower by > 5%: {int((w < 0.95).sum())}",
            f"    worst one-sided miss {worst_b['worst_one_sided']:.4f} ({describe(worst_b)}) → "
            f"{worst_a['worst_one_sided']:.4f} ({describe(worst_a)}); cells with a one-sided miss above "
            f"{limit:.4f} (2.5% + 3 SE): {sum(b['worst_one_sided'] > limit for b, _ in sub)} → "
            f"{sum(a['worst_one_sided'] > limit for _, a in sub)}",
            f"    mean P(truth < low) {np.mean([b['p_true_below_low'] for b, _ in sub]):.4f} → "
            f"{np.mean([a['p_true_below_low'] for _, a in sub]):.4f}, mean P(truth > high) "
            f"{np.mean([b['p_true_above_high'] for b, _ in sub]):.4f} → "
            f"{np.mean([a['p_true_above_high'] for _, a in sub]):.4f}; minimum coverage "
            f"{min(b['coverage'] for b, _ in sub):.4f} → {min(a['coverage'] for _, a in sub):.4f}",
        ]
        by_n = {n: w[[a["n"] == n for _, a in sub]] for n in sorted({a["n"] for _, a in sub})}
        lines.append(
            "    median width after ÷ before by n, median (max): "
            + ", ".join(f"n={n} {np.median(x):.3f} ({x.max():.3f})" for n, x in by_n.items())
        )
    return lines


def _cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(scipy.stats.beta.ppf(0.975, k + 1, n - k))
    return lo, hi


BETA_PARTS = ("one_rate", "paired")
PARTS = (*BETA_PARTS, "bimodal", "scores", "drops", "small_n", "ones", "boundary", "peeking")
PREVIOUS_WIDTH = {"one_rate": 1.197, "paired": 1.318}
"""Median width ÷ oracle on the Beta grid before the distribution-free guard (commit 0c344cf)."""
WIDTH_ALLOWANCE = 1.25


def _parts(text: str | None) -> list[str]:
    if text is None:
        return list(PARTS)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise SystemExit(f"--only: unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
    return parts


def _csv_name(part: str) -> str:
    return {"boundary": "boundary.csv", "peeking": "peeking.csv"}.get(part, f"coverage_{part}.csv")


def _cpu() -> float:
    return sum(
        getattr(resource.getrusage(w), k)
        for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for k in ("ru_utime", "ru_stime")
    )


def run_part(part: str, quick: bool, sims: int, jobs: int, base_seed: int) -> list[dict[str, Any]]:
    import stats_families as fam

    if part in BETA_PARTS:
        g = (QUICK if quick else FULL)[part]
        cells = one_rate_cells(g) if part == "one_rate" else paired_cells(g)
        if part == "paired":
            err = check_tables(cells)
            print(f"copula tables: mean of every tabulated case-rate distribution within {err:.1e} of p")
        print(f"{part}: {len(cells)} cells × {sims} series on {jobs} process(es)", flush=True)
        return run_grid(cells, sims, jobs, base_seed)
    if part == "boundary":
        bcells = fam.boundary_cells(quick)
        print(f"boundary: {len(bcells)} cells × {sims} series on {jobs} process(es)", flush=True)
        return fam.run_all(fam.run_boundary_cell, bcells, sims, jobs, base_seed, part)
    if part == "peeking":
        pcells = fam.peek_cells(quick)
        sims = min(sims, 500) if quick else sims  # 20 looks of a sequence are the dearest cells
        print(f"peeking: {len(pcells)} cells × {sims} series on {jobs} process(es)", flush=True)
        return fam.run_all(fam.run_peek_cell, pcells, sims, jobs, base_seed, part)
    fcells = fam.family_cells(part, quick)
    print(f"{part}: {len(fcells)} cells × {sims} series on {jobs} process(es)", flush=True)
    return fam.run_all(fam.run_family_cell, fcells, sims, jobs, base_seed, part)


def summary(results: dict[str, list[dict[str, Any]]], compare_with: Path | None) -> tuple[list[str], bool]:
    """The printed summary of every part at hand, and whether everything passed."""
    import stats_families as fam

    lines: list[str] = []
    ok = True
    for kind in BETA_PARTS:
        rows = results.get(kind)
        if not rows:
            continue
        lines += summarise(kind, rows)
        for axis in ("p", "n", "r", "rho") + (("c", "diff") if kind == "paired" else ()):
            lines += breakdown(rows, axis)
        if compare_with is not None:
            lines += compare(rows, compare_with)
        cov = np.array([r["coverage"] for r in rows])
        worst = max(r["worst_one_sided"] for r in rows)
        above = sum(r["worst_one_sided"] > fam.MISS_LIMIT for r in rows)
        width = float(np.median([r["ratio_median"] for r in rows]))
        allowed = WIDTH_ALLOWANCE * PREVIOUS_WIDTH[kind]
        grid_ok = cov.min() >= fam.COVERAGE_FLOOR and above == 0
        lines += [
            f"  Beta grid {kind} — {'PASS' if grid_ok else 'FAIL'}: min coverage {cov.min():.4f} (≥ "
            f"{fam.COVERAGE_FLOOR}), worst one-sided miss {worst:.4f}, cells above {fam.MISS_LIMIT}: {above}",
            f"  Beta grid {kind} width — {'PASS' if width <= allowed else 'FAIL'}: median width ÷ oracle {width:.3f} "
            f"against {PREVIOUS_WIDTH[kind]:.3f} before the guard (× {width / PREVIOUS_WIDTH[kind]:.3f}; target ≤ "
            f"{WIDTH_ALLOWANCE}× = {allowed:.3f})",
        ]
        for name in ("naive_wilson", "clustered_wald"):
            if np.mean([r[f"{name}_coverage"] < FLOOR for r in rows]) < 0.25:
                lines.append(f"  WARNING: the negative control {name} does not fail visibly on {kind}")
                grid_ok = False
        ok = ok and grid_ok and width <= allowed
    for part in fam.FAMILIES:
        if results.get(part):
            part_lines = fam.summarise_family(part, results[part])
            lines += part_lines
            ok = ok and not any(" — FAIL" in x for x in part_lines)
    if results.get("boundary"):
        part_lines = fam.summarise_boundary(results["boundary"])
        lines += part_lines
        ok = ok and not any(" — FAIL" in x for x in part_lines)
    if results.get("peeking"):
        part_lines = fam.summarise_peek(results["peeking"])
        lines += part_lines
        ok = ok and not any(" — FAIL" in x for x in part_lines)
    return lines, ok


def recheck_families(parts: Sequence[str], top: int, out: Path, sims: int, jobs: int, base_seed: int) -> int:
    """The ``top`` cells of each family with the largest one-sided miss again → families_recheck.csv."""
    import stats_families as fam

    cells = []
    for part in parts:
        path = out / _csv_name(part)
        if part in fam.FAMILIES and path.exists():
            ranked = sorted(read_csv(path), key=lambda r: -r["worst_one_sided"])
            cells += [fam.cell_from_row(r) for r in ranked[:top]]
    if not cells:
        return 0
    rows = fam.run_all(fam.run_family_cell, cells, sims, jobs, base_seed, "recheck")
    fam.add_cp(rows)
    path = out / "families_recheck.csv"
    done = {c.family for c in cells}
    kept = [r for r in read_csv(path) if r["family"] not in done] if path.exists() else []  # other families'
    write_csv(kept + rows, path)
    rows = kept + rows
    lines = fam.recheck_lines(rows, "families")
    print(f"→ {out / 'families_recheck.csv'}\n" + "\n".join(lines))
    return 0 if " — PASS" in lines[0] else 1


def recheck_boundary(top: int, out: Path, sims: int, jobs: int, base_seed: int) -> int:
    """The ``top`` boundary cells with the most false confirmations again → boundary_recheck.csv."""
    import stats_families as fam

    ranked = sorted(read_csv(out / "boundary.csv"), key=lambda r: -r["false_confirmed"])
    worlds = fam.all_boundary_worlds()
    cells = [fam.boundary_from_row(r, worlds) for r in ranked[:top]]
    rows = fam.run_all(fam.run_boundary_cell, cells, sims, jobs, base_seed, "boundary recheck")
    write_csv(rows, out / "boundary_recheck.csv")
    lines = fam.recheck_lines(rows, "boundary")
    print(f"→ {out / 'boundary_recheck.csv'}\n" + "\n".join(lines))
    return 0 if " — PASS" in lines[0] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small version of every part (a minute or two)")
    parser.add_argument("--sims", type=int, default=2000, help="simulated series per cell (default 2000)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (docs/figures, or bench/out with --quick)"
    )
    parser.add_argument(
        "--only", default=None, metavar="PARTS", help=f"comma-separated parts to run (default all): {', '.join(PARTS)}"
    )
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--from-csv", action="store_true", help="no simulation: summarise and plot every part's CSV in --out"
    )
    parser.add_argument(
        "--cell",
        action="append",
        default=[],
        help="measure only this cell again, e.g. one_rate,p=0.97,n=100,r=20,rho=0.3, "
        "paired,p=0.5,n=10,r=1,rho=0.9,c=0.9,diff=-0.02 or broken,p=0.5,n=30,r=5,rho=0.9,beta=0.05 "
        "(repeatable; use with --sims and --base-seed); writes coverage_recheck.csv in the output folder",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="PATH",
        help="print before → after against an earlier run's CSV (or folder of CSVs) for the cells measured "
        "there with the same seed and series (e.g. the same grid before a change to the intervals)",
    )
    parser.add_argument(
        "--recheck-top",
        type=int,
        default=0,
        metavar="K",
        help="measure again the K cells of each Beta kind (coverage_recheck.csv) and of each family "
        "(families_recheck.csv) with the largest one-sided miss in the CSVs of the output folder (use with "
        "--sims and --base-seed; --only limits the parts)",
    )
    parser.add_argument(
        "--recheck-boundary",
        type=int,
        default=0,
        metavar="K",
        help="measure again the K boundary cells with the most false confirmations in boundary.csv of the output "
        "folder (use with --sims 20000); writes boundary_recheck.csv there",
    )
    parser.add_argument("--base-seed", type=int, default=BASE_SEED, help=f"seed of every cell's stream ({BASE_SEED})")
    args = parser.parse_args()
    out = args.out or (ROOT / ("bench/out" if args.quick else "docs/figures"))
    parts = _parts(args.only)
    if args.cell or args.recheck_top or args.recheck_boundary:
        status = 0
        specs = list(args.cell)
        for kind in [k for k in BETA_PARTS if k in parts] if args.recheck_top else ():
            ranked = sorted(read_csv(out / f"coverage_{kind}.csv"), key=lambda r: -r["worst_one_sided"])
            specs += [cell_spec(r) for r in ranked[: args.recheck_top]]
        if specs:
            status |= recheck(specs, args.sims, args.jobs, args.base_seed, out / "coverage_recheck.csv", args.compare)
        if args.recheck_top:
            status |= recheck_families(parts, args.recheck_top, out, args.sims, args.jobs, args.base_seed)
        if args.recheck_boundary:
            status |= recheck_boundary(args.recheck_boundary, out, args.sims, args.jobs, args.base_seed)
        print(f"\n{_cpu():.0f} s CPU (all processes)")
        return status
    started = time.perf_counter()
    results: dict[str, list[dict[str, Any]]] = {}
    timing: list[str] = []
    for part in parts:
        path = out / _csv_name(part)
        if args.from_csv:
            if path.exists():
                results[part] = read_csv(path)
            continue
        t0, c0 = time.perf_counter(), _cpu()
        rows = run_part(part, args.quick, args.sims, args.jobs, args.base_seed)
        write_csv(rows, path)
        results[part] = rows
        timing.append(f"{part} {time.perf_counter() - t0:.0f} s wall / {_cpu() - c0:.0f} s CPU")
        print(f"{part}: {timing[-1]} → {path}", flush=True)
    if not args.no_plot:
        if any(k in results for k in BETA_PARTS):
            print(plot({k: v for k, v in results.items() if k in BETA_PARTS}, out / "coverage.png"))
        import stats_families as fam

        families = {k: v for k, v in results.items() if k in fam.FAMILIES}
        if families or "boundary" in results:
            print(fam.plot(families, results.get("boundary", []), out / "families.png"))
    print("\n==== summary ====")
    lines, ok = summary(results, args.compare)
    print("\n".join(lines))
    if timing:
        print("\ntime per part: " + "; ".join(timing))
    load = os.getloadavg()[0]
    print(
        f"total {time.perf_counter() - started:.0f} s wall, {_cpu():.0f} s CPU (all processes); load average {load:.2f}"
    )
    print("ALL PASS" if ok else "SOME FAIL (see the lines marked FAIL)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
