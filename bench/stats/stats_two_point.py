"""Gaffke's bound on two-point worlds: the extreme populations of a bounded mean, where a bound fails first.

A distribution-free bound on the mean of values in ``[0, 1]`` is tested hardest by populations with two
support points (a rare value far from the rest): the worst case of a bounded mean over a fixed mean and
variance is a two-point law. `aqven.research.stats.gaffke`'s bound is conjectured, not proven, to hold for
every population (its docstring), so this script measures its one-sided miss ``P(L > μ)`` of the lower
bound at ``α`` = 0.025 on ``X = lo`` with probability ``π``, else ``hi``, for every combination of

    n ∈ {2, 5, 10, 30, 100, 300, 1000}, π ∈ {0.001, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99},
    (lo, hi) ∈ {(0, 1), (0, 0.5), (0.5, 1), (0.9, 1), (0, 0.05), (0.95, 1)},

``--sims`` series each (default 4,000) from a fixed seed per cell, with the Clopper–Pearson interval of the
miss. Upper bounds are the mirror (``1 − x``), so the lower bound's cells cover them. Prints the cells
whose miss exceeds 0.025 and the worst cell; exit status 1 when a CP lower bound exceeds 0.025 (a miss
shown to be above the nominal level).

    .venv/bin/python bench/stats/stats_two_point.py            # 336 cells × 4,000 series
    .venv/bin/python bench/stats/stats_two_point.py --sims 20000 --only-n 5,10
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import zlib

import numpy as np
import scipy.stats

from aqven.research.stats.gaffke import gaffke_lower_batch

ALPHA = 0.025
NS = [2, 5, 10, 30, 100, 300, 1000]
PIS = [0.001, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99]
SUPPORTS = [(0.0, 1.0), (0.0, 0.5), (0.5, 1.0), (0.9, 1.0), (0.0, 0.05), (0.95, 1.0)]


def cp(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(scipy.stats.beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def miss(n: int, pi: float, lo: float, hi: float, sims: int, seed: int) -> int:
    rng = np.random.default_rng([seed, zlib.crc32(f"{n}|{pi!r}|{lo!r}|{hi!r}".encode())])
    x = np.where(rng.random((sims, n)) < pi, lo, hi)
    mu = pi * lo + (1 - pi) * hi
    low = gaffke_lower_batch(x, np.ones_like(x, dtype=bool), ALPHA)
    return int(np.sum(low > mu))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--only-n", type=str, default="", help="comma-separated n to run (default: all)")
    args = parser.parse_args()
    ns = [int(v) for v in args.only_n.split(",")] if args.only_n else NS
    started = time.perf_counter()
    rows = []
    for n, pi, (lo, hi) in itertools.product(ns, PIS, SUPPORTS):
        k = miss(n, pi, lo, hi, args.sims, args.seed)
        rows.append((k / args.sims, *cp(k, args.sims), n, pi, lo, hi))
    rows.sort(reverse=True)
    print(f"{len(rows)} two-point cells × {args.sims} series, α = {ALPHA} ({time.perf_counter() - started:.0f} s)")
    for rate, c_lo, c_hi, n, pi, lo, hi in rows[:10]:
        print(f"  miss {rate:.4f} [CP {c_lo:.4f}–{c_hi:.4f}]  n={n} P(X={lo})={pi} else {hi}")
    above = [r for r in rows if r[0] > ALPHA]
    shown = [r for r in rows if r[1] > ALPHA]
    print(f"cells with a miss above {ALPHA}: {len(above)}; with its CP lower bound above {ALPHA}: {len(shown)}")
    return 1 if shown else 0


if __name__ == "__main__":
    sys.exit(main())
