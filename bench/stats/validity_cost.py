"""What validity costs: cases for a 2-point half-width, by method, and each method's coverage there (issue 28, part 4).

For each cell (true rate 0.95 / 0.98 × intra-case correlation 0.1 / 0.3 × 1 / 3 / 5 repeats) the per-case
pass rates come from a Beta with that mean and ICC, and every attempt of a case passes with its rate (so a
case's passes are beta-binomial). For each method the bench finds the smallest number of cases ``n`` at
which **half the median width** (``median(high − low) / 2``, as the launch plan's ``half_width``) of its
two-sided 95% interval is at most 0.02, then measures at that ``n`` the method's **coverage** (the share of
intervals with ``low ≤ truth ≤ high``) in the same Beta world and in the **noisy-bimodal** world of
`bench/stats/stats_families.py` with the same mean (a share ``h`` of hard cases at ``qh = 0``, the rest at
``qe = 0.995``, every attempt drawn: ``h = 1 − rate/0.995``; the family grid's ``qh`` and ``qe``).

Methods (two-sided 95%):

* ``AQVEN``: the interval a series reports, `aqven.research.stats.one_rate` (Gaffke's bound on the per-case
  means, widened to hold the estimate). Computed from the counts of cases at each per-case mean ``j/r`` with
  `gaffke.gaffke_lower_counts`, as `plan_sim.simulate` does; the bench checks it against `one_rate` itself on
  the first series of every cell before it starts.
* ``Wilson``: Wilson's interval on all ``n·r`` attempts pooled as if independent (`naive_wilson_batch`).
* ``Clopper–Pearson``: the exact binomial interval on all attempts pooled as if independent.
* ``clustered SE``: Miller (2024, "Adding Error Bars to Evals", arXiv 2411.00640) as Inspect AI computes it:
  ``stderr()`` of `inspect_ai/scorer/_metrics/std.py` on the per-case scores after the default ``mean`` epoch
  reducer (sample sd with ddof 1 over √n); with equal repeats ``stderr(cluster=<case id>)`` on the unreduced
  attempts (its finite-cluster factor C/(C − 1)) gives the same number. Interval: mean ± 1.96·SE, not clipped.
* ``cluster bootstrap``: resample the ``n`` cases with replacement (``--boot`` resamples, 1,000 by default),
  percentile interval (2.5% and 97.5% of the resampled means, numpy's linear interpolation).

With equal repeats every method depends only on how many cases ended at each per-case mean ``j/r``, so a
series is drawn as multinomial counts over those ``r + 1`` values (exact for both worlds: beta-binomial, or
the two-rate binomial mixture), at a cost that does not grow with ``n``. The search doubles ``n`` and then
bisects, starting where fewer than half the series pass every attempt (`collapse_end`: below that the
median series has no failure, and the clustered SE and the bootstrap report a width of 0, so their "smallest
n" would be 2), with the same seed at every probe (``--series`` series a probe); coverage uses ``--cover-series``
new series a world. The **oracle** is a normal interval that knows the true sd of the mean of per-case
means: ``n = ⌈(1.96·σ/0.02)²⌉`` with ``σ² = ρ·p(1−p) + (1−ρ)·p(1−p)/r``.

    .venv/bin/python bench/stats/validity_cost.py            # 1,000 series a probe, 4,000 for coverage
    .venv/bin/python bench/stats/validity_cost.py --quick    # a smoke run: one cell of each rate, 200 series

Prints a markdown table and writes it to ``docs/figures/validity_cost.md`` (``--out``; ``--quick`` writes
``bench/out/validity_cost_quick.md``).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.stats
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stats_families import truth_one, world

from aqven.research.stats import naive_wilson_batch, one_rate
from aqven.research.stats.gaffke import gaffke_lower_counts

Floats = NDArray[np.float64]
LEVEL = 0.95
ALPHA = 1 - LEVEL
Z = float(scipy.stats.norm.ppf(1 - ALPHA / 2))
HALF = 0.02
QE, QH = 0.995, 0.0
METHODS = ("AQVEN", "Wilson", "Clopper–Pearson", "clustered SE", "cluster bootstrap")
ROOT = Path(__file__).resolve().parents[2]


def beta_world(rate: float, icc: float, repeats: int) -> tuple[Floats, Floats]:
    """Per-case means ``j/r`` and their probabilities when case rates are Beta(rate, icc)."""
    j = np.arange(repeats + 1)
    a, b = rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc
    return j / repeats, scipy.stats.betabinom.pmf(j, repeats, a, b)


def bimodal_share(rate: float) -> float:
    """The share of hard cases (rate ``QH``) that gives the noisy-bimodal world the mean ``rate``."""
    return (QE - rate) / (QE - QH)


def bimodal_world(rate: float, repeats: int) -> tuple[Floats, Floats]:
    h = bimodal_share(rate)
    w = world("bimodal", h=h, qh=QH, qe=QE)
    assert math.isclose(truth_one(w), rate, abs_tol=1e-12), (truth_one(w), rate)
    j = np.arange(repeats + 1)
    probs = h * scipy.stats.binom.pmf(j, repeats, QH) + (1 - h) * scipy.stats.binom.pmf(j, repeats, QE)
    return j / repeats, probs


def bimodal_icc(rate: float) -> float:
    h = bimodal_share(rate)
    return h * (1 - h) * (QE - QH) ** 2 / (rate * (1 - rate))


def oracle_cases(rate: float, icc: float, repeats: int) -> int:
    var = icc * rate * (1 - rate) + (1 - icc) * rate * (1 - rate) / repeats
    return math.ceil((Z * math.sqrt(var) / HALF) ** 2)


def draw(probs: Floats, n: int, series: int, seed: int) -> Floats:
    """Counts of cases at each per-case mean, shape (series, r + 1)."""
    p = np.clip(probs, 0.0, None)
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, p / p.sum(), size=series).astype(np.float64)


def interval(method: str, values: Floats, counts: Floats, repeats: int, boot: int, seed: int) -> tuple[Floats, Floats]:
    """(low, high) of ``method`` for every series of ``counts``."""
    n = counts.sum(axis=1)
    mean = counts @ values / n
    if method == "AQVEN":
        grid = np.tile(values, (counts.shape[0], 1))
        low = gaffke_lower_counts(grid, counts, ALPHA / 2)
        high = 1 - gaffke_lower_counts(1 - grid, counts, ALPHA / 2)
        return np.fmin(low, mean), np.fmax(high, mean)
    passes = counts @ (values * repeats)
    attempts = n * repeats
    if method == "Wilson":  # the pooled sums are all Wilson reads: one "case" per value with those sums
        _, low, high = naive_wilson_batch(counts * values * repeats, counts * repeats, LEVEL)
        return low, high
    if method == "Clopper–Pearson":
        with np.errstate(invalid="ignore"):
            low = np.where(passes > 0, scipy.stats.beta.ppf(ALPHA / 2, passes, attempts - passes + 1), 0.0)
            high = np.where(passes < attempts, scipy.stats.beta.ppf(1 - ALPHA / 2, passes + 1, attempts - passes), 1.0)
        return low, high
    if method == "clustered SE":
        var = counts @ (values**2) / n - mean**2
        se = np.sqrt(np.clip(var, 0.0, None) * n / (n - 1) / n)
        return mean - Z * se, mean + Z * se
    if method == "cluster bootstrap":
        rng = np.random.default_rng(seed)
        pvals = np.broadcast_to((counts / n[:, None])[:, None, :], (counts.shape[0], boot, counts.shape[1]))
        resampled = rng.multinomial(n.astype(np.int64)[:, None], pvals) @ values / n[:, None]
        low, high = np.quantile(resampled, [ALPHA / 2, 1 - ALPHA / 2], axis=1)
        return low, high
    raise ValueError(method)


def check_against_one_rate(values: Floats, counts: Floats, repeats: int) -> None:
    """The counts arithmetic is `one_rate`'s: the first 3 series through `one_rate` itself."""
    low, high = interval("AQVEN", values, counts[:3], repeats, 0, 0)
    for i in range(3):
        cells = [(float(v * repeats), repeats) for v, c in zip(values, counts[i], strict=True) for _ in range(int(c))]
        got = one_rate(cells, LEVEL)
        assert abs(got.low - low[i]) < 1e-9 and abs(got.high - high[i]) < 1e-9, (got, low[i], high[i])


def collapse_end(probs: Floats) -> int:
    """The fewest cases at which fewer than half the series pass every attempt: below it the median series
    has no failure, and the clustered SE and the bootstrap report a width of 0 (so the search starts here)."""
    return max(2, math.ceil(math.log(0.5) / math.log(float(probs[-1]))))


def smallest(test: Callable[[int], bool], start: int = 2, cap: int = 1 << 20) -> int:
    """The smallest n ≥ start with test(n): doubling, then bisection."""
    lo, hi = start - 1, start
    while not test(hi):
        if hi >= cap:
            raise RuntimeError("no n up to the cap")
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if test(mid) else (mid, hi)
    return hi


def half_width(method: str, probs: Floats, values: Floats, n: int, repeats: int, args: argparse.Namespace) -> float:
    counts = draw(probs, n, args.series, args.seed)
    low, high = interval(method, values, counts, repeats, args.boot, args.seed + 1)
    return float(np.median(high - low) / 2)


def narrow_enough(method: str, probs: Floats, values: Floats, repeats: int, args: argparse.Namespace, n: int) -> bool:
    return half_width(method, probs, values, n, repeats, args) <= HALF


def coverage(
    method: str, probs: Floats, values: Floats, n: int, repeats: int, truth: float, series: int, seed: int, boot: int
) -> float:
    counts = draw(probs, n, series, seed)
    low, high = interval(method, values, counts, repeats, boot, seed + 1)
    return float(np.mean((low <= truth) & (truth <= high)))


def cells(quick: bool) -> list[tuple[float, float, int]]:
    if quick:
        return [(0.95, 0.3, 3), (0.98, 0.1, 1)]
    return [(rate, icc, r) for rate in (0.95, 0.98) for icc in (0.1, 0.3) for r in (1, 3, 5)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1000, help="series per probe of the search")
    parser.add_argument("--cover-series", type=int, default=4000, help="series per coverage measurement")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples per series")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--quick", action="store_true", help="two cells, 200 series, 200 resamples")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.series, args.cover_series, args.boot = 200, 400, 200
    default = ROOT / ("bench/out/validity_cost_quick.md" if args.quick else "docs/figures/validity_cost.md")
    out = args.out or default
    started = time.perf_counter()
    head = [
        f"Cases for a 2-point half-width (half the median width ≤ {HALF}) and coverage there, two-sided 95%: "
        f"{args.series} series a probe, {args.cover_series} series a coverage, {args.boot} bootstrap resamples, "
        f"seed {args.seed}.",
        f"Noisy bimodal: a share h of cases at {QH:g}, the rest at {QE:g} (0.95: h {bimodal_share(0.95):.4f}, ICC "
        f"{bimodal_icc(0.95):.2f}; 0.98: h {bimodal_share(0.98):.4f}, ICC {bimodal_icc(0.98):.2f}).",
        "",
        "| rate | ICC | repeats | oracle n | method | n | half-width at n | coverage, Beta | coverage, noisy bimodal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines = list(head)
    for line in head:
        print(line, flush=True)
    for rate, icc, repeats in cells(args.quick):
        values, probs = beta_world(rate, icc, repeats)
        check_against_one_rate(values, draw(probs, 40, 3, args.seed), repeats)
        bvalues, bprobs = bimodal_world(rate, repeats)
        oracle = oracle_cases(rate, icc, repeats)
        start = collapse_end(probs)
        for method in METHODS:
            narrow = functools.partial(narrow_enough, method, probs, values, repeats, args)
            n = smallest(narrow, start)
            hw = half_width(method, probs, values, n, repeats, args)
            cov = coverage(method, probs, values, n, repeats, rate, args.cover_series, args.seed + 2, args.boot)
            bim = coverage(method, bprobs, bvalues, n, repeats, rate, args.cover_series, args.seed + 3, args.boot)
            row = f"| {rate:.2f} | {icc:g} | {repeats} | {oracle} | {method} | {n} | {hw:.4f} | {cov:.3f} | {bim:.3f} |"
            print(row, flush=True)
            lines.append(row)
    seconds = time.perf_counter() - started
    lines += ["", f"{seconds:.0f} s, {datetime.date.today().isoformat()}"]
    print(lines[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"written to {out.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
