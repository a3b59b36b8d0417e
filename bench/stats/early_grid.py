"""What a ``stop_early`` series saves at the launch plan's own size, and what it confirms falsely (issue 28, part 3).

Worlds (the truth 0.97 against a line of 0.90 or 0.95, "at least"):

* ``beta r=1``: every case at 0.97, one attempt per case (any population gives the same Bernoulli attempts);
* ``beta r=5 icc=0.2``: case rates from a Beta of mean 0.97 and intra-case correlation 0.2, 5 repeats;
* ``bimodal r=5``: 2% of cases hard (rate 0.0), the rest at 0.99, 5 repeats (mean 0.9702) — noisy bimodal;
* ``bimodal r=1``: the same cases, one attempt each (Bernoulli attempts of mean 0.9702, as every population gives).

**The plan's N** is what the launch plan recommends for a stop_early experiment with a dev series that
measured the world's rate and intra-case correlation exactly (`plan_sim.sequential_cases_to_decide` on
`plan_sim.beta_population`, the call `launch.plan._power` makes): the fewest planned cases at which 80% of
simulated stop_early series decide by their last look. The fixed-size plan (`plan_sim.cases_to_decide`) is
printed beside it. Series are then drawn from the *true* world (seed ``--seed``, not the plan's), read with the
product's design for them, and stopped at their first deciding look. Saving = 1 − cases run / N, per series. The
designs (`simulate`):

* one attempt per case: the exact binomial group-sequential design (`aqven.research.stats.exact_sequential`, 20
  looks spending 0.025·t^0.1 a side), its boundaries on the passes — what `exact_rate` decides by, and what the
  launch plan now sizes such series with (`plan_sim.exact_sequential_outcome`);
* several attempts per case: `aqven.research.stats.sequential.sequence_bounds_counts` — Gaffke's bound with the
  error spent at the looks of `SPEND_AT`, the arithmetic a series runs (`sequence_rate` calls
  `sequence_bounds_batch`; both end in the same `gaffke._solve`).

**False confirmations** at the line: worlds whose true mean is exactly the line (two-point case rates and a
Beta), read at every look and counted "confirmed" if any look confirms (peeking at every look), at the
plan's N and 3× it.

**The interval where a series ends** (``--coverage``): for the exact design, exactly over every state a series
stops in (`exact_sequential.terminal_states`), the chance that the reported lower bound is above the true rate or
the upper bound below it (`exact_sequential.bounds_at`), at 40 rates from 0.02 to 0.995, for several N and lines;
the worst rate of each is printed (target ≤ 0.025).

``--betting`` adds the betting confidence sequence this design replaced (`betting.sequence_interval_batch`,
tuned for N, read at the 20 looks) on the same worlds and sizes, per-case arithmetic (slower).

    .venv/bin/python bench/stats/early_grid.py                 # 4,000 series a cell, seed 11, ~4 min
    .venv/bin/python bench/stats/early_grid.py --betting       # and the betting sequence, 1,000 series a cell
    .venv/bin/python bench/stats/early_grid.py --ceiling       # only the ceiling of the saving at the plan's N
    .venv/bin/python bench/stats/early_grid.py --coverage      # only the exact design's interval coverage, ~5 min
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
import scipy.stats

from aqven.research.stats import exact_sequential, plan_sim
from aqven.research.stats.betting import sequence_interval_batch
from aqven.research.stats.sequential import look_lengths, sequence_bounds_counts

LEVEL = 0.95


@dataclass(frozen=True)
class World:
    label: str
    rates: tuple[float, ...]
    weights: tuple[float, ...]
    repeats: int

    @property
    def mean(self) -> float:
        return float(np.dot(self.rates, self.weights))

    @property
    def icc(self) -> float:
        m = self.mean
        var = float(np.dot(self.weights, (np.array(self.rates) - m) ** 2))
        return var / (m * (1 - m)) if 0 < m < 1 else 0.0

    def population(self) -> plan_sim.Population:
        return plan_sim.Population.of(list(self.rates), list(self.weights))


def beta_world(label: str, mean: float, icc: float, repeats: int) -> World:
    pop = plan_sim.beta_population(mean, icc)
    return World(label, tuple(float(v) for v in pop.a), tuple(float(w) for w in pop.weights), repeats)


def worlds() -> list[World]:
    return [
        beta_world("beta r=1", 0.97, 0.0, 1),
        beta_world("beta r=5 icc=0.2", 0.97, 0.2, 5),
        World("bimodal r=5 (2% at 0.0, 98% at 0.99)", (0.0, 0.99), (0.02, 0.98), 5),
        World("bimodal r=1 (2% at 0.0, 98% at 0.99)", (0.0, 0.99), (0.02, 0.98), 1),
    ]


def at_line_worlds(line: float, repeats: int) -> list[World]:
    """Two-point case rates with mean ``line`` (a rare value far below, or a share of cases that never pass),
    and a Beta at the line."""
    out = []
    for low in (0.0, 0.5, line - 0.05):
        high = 1.0
        share = (high - line) / (high - low)  # share at ``low`` so that the mean is the line
        out.append(World(f"two-point {low:g}/{high:g}", (low, high), (share, 1 - share), repeats))
    out.append(World("two-point 0/0.999", (0.0, 0.999), (1 - line / 0.999, line / 0.999), repeats))
    out.append(beta_world("beta icc=0.3", line, 0.3, repeats))
    return out


def simulate(w: World, cases: int, line: float, series: int, seed: int, union: bool = False) -> dict[str, float]:
    """Series from the true world, read with the product's design for it and stopped at their first deciding look:
    savings and shares. One attempt per case: the exact design's boundaries (`exact_sequential.design`) on the
    passes; several: the union-bound sequence (`sequence_bounds_counts`), as ``union`` forces for any world."""
    values, probs = plan_sim._value_probabilities(w.population(), w.repeats)
    probs = np.clip(probs, 0.0, None)
    probs /= probs.sum()
    lengths = np.array(look_lengths(cases, cases), dtype=np.int64)
    rng = np.random.default_rng(seed)
    steps = np.diff(np.concatenate([[0], lengths]))
    counts = np.cumsum(np.stack([rng.multinomial(int(k), probs, size=series) for k in steps], axis=1), axis=1)
    if w.repeats == 1 and not union:
        d = exact_sequential.design(cases, line, tuple(int(v) for v in lengths), True)
        passes = counts[:, :, 1]  # values 0, 1
        return _stops(passes >= np.array(d.upper), passes <= np.array(d.lower), lengths, cases)
    low, high = sequence_bounds_counts(values, counts.astype(np.float64), 1 - LEVEL, len(lengths))
    return _stops(low > line, high <= line, lengths, cases)


def _stops(confirmed: np.ndarray, refuted: np.ndarray, lengths: np.ndarray, cases: int) -> dict[str, float]:
    decided = confirmed | refuted
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(lengths) - 1)
    rows = np.arange(confirmed.shape[0])
    saving = 1 - lengths[first] / cases
    return {
        "median_saving": float(np.median(saving)),
        "mean_saving": float(saving.mean()),
        "confirmed": float(confirmed[rows, first].mean()),
        "refuted": float(refuted[rows, first].mean()),
        "ever_confirmed": float(confirmed.any(axis=1).mean()),
        "cases_run": float(lengths[first].mean()),
    }


def betting(w: World, cases: int, line: float, series: int, seed: int) -> dict[str, float]:
    """The replaced design: the betting sequence tuned for N, per-case draws from the same world."""
    rng = np.random.default_rng(seed)
    q = rng.choice(np.array(w.rates), p=np.array(w.weights), size=(series, cases))
    x = rng.binomial(w.repeats, q) / w.repeats
    lengths = np.array(look_lengths(cases, cases), dtype=np.int64)
    seen = np.tile(lengths, (series, 1))
    low, high = sequence_interval_batch(x, np.ones_like(x, dtype=bool), 1 - LEVEL, seen, tuned_for=cases)
    return _stops(low > line, high <= line, lengths, cases)


def confirm_floor(line: float, alpha: float = (1 - LEVEL) / 2) -> int:
    """The fewest all-pass cases on which any design valid for every population can confirm "at least line":
    a population with a share ``line`` of cases that always pass and the rest never gives n all-pass cases
    with chance line^n while its mean is the line, so confirming on them needs line^n ≤ alpha."""
    return math.floor(math.log(alpha) / math.log(line)) + 1


def ceiling(plans: dict[tuple[str, float], int]) -> None:
    """The most any design valid for every population can save at the plan's N: it cannot confirm on fewer
    than `confirm_floor` cases, so a confirming series runs at least that many."""
    print(
        "ceiling: confirming on n all-pass cases needs line^n ≤ 0.025 "
        "(any repeats, any design valid for every population)"
    )
    print(
        "| world | line | fewest cases that can confirm | stop_early plan N "
        "| the most a confirming series can save at N |"
    )
    print("|---|---|---|---|---|")
    for (label, line), n in plans.items():
        floor = confirm_floor(line)
        print(f"| {label} | {line:.2f} | {floor} | {n} | {max(0.0, 1 - floor / n):.3f} |", flush=True)


def plans_only() -> dict[tuple[str, float], int]:
    out = {}
    for line in (0.90, 0.95):
        for w in worlds():
            plan = plan_sim.sequential_cases_to_decide(
                plan_sim.beta_population(w.mean, w.icc), w.repeats, LEVEL, line, True
            )
            assert plan is not None
            out[(w.label, line)] = plan.cases
    return out


def coverage() -> None:
    """The exact design's interval where a series ends: the worst miss over a grid of true rates."""
    print("exact design, one attempt per case: the chance the interval where a series ends misses the true rate")
    print("| N | line | worst P(lower bound > rate) | at rate | worst P(upper bound < rate) | at rate |")
    print("|---|---|---|---|---|---|")
    for n, line in ((30, 0.7), (40, 0.9), (60, 0.5), (150, 0.9), (150, 0.95), (300, 0.9)):
        d = exact_sequential.design(n, line, tuple(look_lengths(n, n)), True)
        low, high = (0.0, 0.0), (0.0, 0.0)
        for p in np.linspace(0.02, 0.995, 40):
            states = exact_sequential.terminal_states(d, float(p))
            bounds = [(exact_sequential.bounds_at(d, k, x, x), chance) for k, x, chance in states]
            lo = sum(chance for (b, _), chance in bounds if b > p)
            hi = sum(chance for (_, b), chance in bounds if b < p)
            low, high = max(low, (lo, float(p))), max(high, (hi, float(p)))
        print(f"| {n} | {line} | {low[0]:.4f} | {low[1]:.3f} | {high[0]:.4f} | {high[1]:.3f} |", flush=True)


def cp_upper(k: int, n: int) -> float:
    return 1.0 if k >= n else float(scipy.stats.beta.ppf(0.975, k + 1, n - k))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=4000)
    parser.add_argument("--null-series", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--betting", action="store_true")
    parser.add_argument("--betting-series", type=int, default=1000)
    parser.add_argument("--ceiling", action="store_true", help="only the ceiling of the saving at the plan's N")
    parser.add_argument("--coverage", action="store_true", help="only the exact design's interval coverage")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.coverage:
        coverage()
        print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        return
    if args.ceiling:
        ceiling(plans_only())
        print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        return
    print(f"stop_early at the launch plan's N: {args.series} series a cell, seed {args.seed}, level {LEVEL}")
    print(
        "| world | line | fixed-size plan N | stop_early plan N | median saving at N (mean) | decided at N "
        "| cases run ÷ fixed plan N | median saving at 3N (mean) | decided at 3N |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    plans: dict[tuple[str, float], int] = {}
    worst = {"n": 0.0, "3n": 0.0}
    for line in (0.90, 0.95):
        for w in worlds():
            pop = plan_sim.beta_population(w.mean, w.icc)
            fixed = plan_sim.cases_to_decide(pop, w.repeats, LEVEL, line, True)
            plan = plan_sim.sequential_cases_to_decide(pop, w.repeats, LEVEL, line, True)
            assert fixed is not None and plan is not None
            n = plan.cases
            plans[(w.label, line)] = n
            one = simulate(w, n, line, args.series, args.seed)
            three = simulate(w, 3 * n, line, args.series, args.seed + 1)
            print(
                f"| {w.label} | {line:.2f} | {fixed.cases} | {n} | {one['median_saving']:.3f} "
                f"({one['mean_saving']:.3f}) | {one['confirmed'] + one['refuted']:.3f} "
                f"| {one['cases_run'] / fixed.cases:.2f} | {three['median_saving']:.3f} ({three['mean_saving']:.3f}) "
                f"| {three['confirmed'] + three['refuted']:.3f} |",
                flush=True,
            )
            if args.betting:
                b1 = betting(w, n, line, args.betting_series, args.seed)
                b3 = betting(w, 3 * n, line, args.betting_series, args.seed + 1)
                print(
                    f"|   betting sequence, same N | | | | {b1['median_saving']:.3f} ({b1['mean_saving']:.3f}) "
                    f"| {b1['confirmed'] + b1['refuted']:.3f} | {b1['cases_run'] / fixed.cases:.2f} "
                    f"| {b3['median_saving']:.3f} ({b3['mean_saving']:.3f}) | {b3['confirmed'] + b3['refuted']:.3f} |",
                    flush=True,
                )
    print()
    ceiling(plans)
    print()
    print(f"false confirmations at the line, confirmed at any look: {args.null_series} series a cell")
    print("| line | repeats | world (mean = line) | N | at N [CP upper] | at 3N [CP upper] |")
    print("|---|---|---|---|---|---|")
    for line in (0.90, 0.95):
        for repeats in (1, 5):
            n = max(v for (label, ln), v in plans.items() if ln == line)
            for w in at_line_worlds(line, repeats):
                assert math.isclose(w.mean, line, abs_tol=1e-4), (w.label, w.mean)  # the Beta grid: within 3e-5
                row = [line, repeats, w.label, n]
                for size, key in ((n, "n"), (3 * n, "3n")):
                    out = simulate(w, size, line, args.null_series, args.seed + 7)
                    k = round(out["ever_confirmed"] * args.null_series)
                    worst[key] = max(worst[key], out["ever_confirmed"])
                    row.append(f"{out['ever_confirmed']:.4f} [{cp_upper(k, args.null_series):.4f}]")
                print("| " + " | ".join(str(v) for v in row) + " |", flush=True)
    print(f"worst false confirmation: at N {worst['n']:.4f}, at 3N {worst['3n']:.4f} (target ≤ 0.025)")
    print(f"{time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
