"""Coverage of the judge-corrected interval (Rogan–Gladen, aqven.research.stats.judge_correction) on seeded worlds of
known truth: a judge with sensitivity Se and specificity Sp labels the attempts of cases whose true rates come
from a Beta distribution; its Se and Sp were measured on `--agree` human-labelled cases of each kind.

    .venv/bin/python bench/stats/judge_correction_grid.py [--series 2000] [--seed 1]

Prints, per world: the corrected interval's coverage, its one-sided misses, its median half-width, and the
uncorrected (judge-decided) interval's coverage and half-width. Not a timed test.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from aqven.research.stats.intervals import one_rate, paired_difference
from aqven.research.stats.judge_correction import JudgeAccuracy, correct_difference, correct_rate


def judged(rng: np.random.Generator, rates: np.ndarray, repeats: int, se: float, sp: float) -> list[tuple[float, int]]:
    good = rng.random((len(rates), repeats)) < rates[:, None]
    says = np.where(good, rng.random(good.shape) < se, rng.random(good.shape) < 1 - sp)
    return [(float(s), repeats) for s in says.sum(axis=1)]


def accuracy(rng: np.random.Generator, cases: int, repeats: int, se: float, sp: float) -> JudgeAccuracy:
    pos = rng.binomial(repeats, se, size=cases)
    neg = rng.binomial(repeats, sp, size=cases)
    return JudgeAccuracy(
        "f", "agree", "ser", tuple((float(y), repeats) for y in pos), tuple((float(y), repeats) for y in neg)
    )


def beta(rng: np.random.Generator, mean: float, kappa: float, n: int) -> np.ndarray:
    return rng.beta(mean * kappa, (1 - mean) * kappa, size=n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--agree", type=int, default=60)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    head = "world                         cover  miss_lo miss_hi  half   | raw_cover raw_half"
    print(head)
    print("-" * len(head))
    for (se, sp), truth in itertools.product(((0.9, 0.8), (0.95, 0.95), (0.8, 0.7)), (0.5, 0.85, 0.97)):
        lo = hi = raw = 0
        halves, raw_halves = [], []
        for _ in range(args.series):
            acc = accuracy(rng, args.agree, 3, se, sp)
            cells = judged(rng, beta(rng, truth, 8, args.cases), args.repeats, se, sp)
            fixed = correct_rate(cells, acc, 0.95).interval
            plain = one_rate(cells, 0.95)
            lo += truth < fixed.low
            hi += truth > fixed.high
            raw += plain.low <= truth <= plain.high
            halves.append(fixed.half_width)
            raw_halves.append(plain.half_width)
        s = args.series
        print(
            f"rate {truth:<5} Se {se} Sp {sp}         {1 - (lo + hi) / s:.3f}  {lo / s:.4f}  {hi / s:.4f}  "
            f"{np.median(halves):.3f}  | {raw / s:.3f}     {np.median(raw_halves):.3f}"
        )
    # Paired: B passes 10 points more than A on every case (up to 1).
    big = beta(np.random.default_rng(0), 0.7, 6, 1_000_000)
    truth = float(np.mean(np.clip(big + 0.10, 0, 1) - big))
    for se, sp in ((0.9, 0.8), (0.95, 0.95)):
        lo = hi = raw = 0
        halves = []
        for _ in range(args.series):
            acc = accuracy(rng, args.agree, 3, se, sp)
            base = beta(rng, 0.7, 6, args.cases)
            a = judged(rng, base, args.repeats, se, sp)
            b = judged(rng, np.clip(base + 0.10, 0, 1), args.repeats, se, sp)
            fixed = correct_difference(a, b, acc, 0.95).interval
            plain = paired_difference(a, b, 0.95)
            lo += truth < fixed.low
            hi += truth > fixed.high
            raw += plain.low <= truth <= plain.high
            halves.append(fixed.half_width)
        s = args.series
        print(
            f"diff {truth:+.3f} Se {se} Sp {sp}       {1 - (lo + hi) / s:.3f}  {lo / s:.4f}  {hi / s:.4f}  "
            f"{np.median(halves):.3f}  | {raw / s:.3f}"
        )


if __name__ == "__main__":
    main()
