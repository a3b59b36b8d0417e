"""How much can any sequence valid at 20 looks save at the plan's own size? The easiest world, Gaussian.

Issue 10 asks a ``stop_early`` series to save half of its attempts when the truth lies two margins past
the point where its verdict flips. `stats_grid.py --only peeking` measures that on the families; this
script measures the ceiling in the world where stopping is easiest: per-case values Gaussian with a known
standard deviation σ, ``N`` planned cases sized so that a fixed-size normal interval has a half-width of
one margin ``m = z·σ/√N`` (the plan), the truth at ``2m`` past the flip point, the lower bound read at the
20 looks ``⌈jN/20⌉`` with running intersection, stopped at the first look whose bound clears the flip point.
Savings = 1 − mean(cases at the stop)/N (a series that never decides runs to N).

Boundaries, one-sided at 0.025 like a confidence sequence's confirming side:

* **betting with a known σ** (the best case of `aqven.research.stats.betting`: a fixed bet λ tuned for
  ``f·N`` cases, ``λ = √(2 ln 40/(f·N·σ²))``; by Ville's inequality valid at every look): half-width
  ``λσ²/2 + ln 40/(λ t)`` at ``t`` cases;
* **Bonferroni over the looks** with exact normal bounds (a fixed-size bound at 0.025/k at k of the looks);
* **Pocock's constant normal boundary** calibrated for these 20 looks by simulation: valid for Gaussian data,
  and for other populations only as the number of cases grows — not a bound for every population;
* the fixed-size normal interval read at every look (not valid when acted on: the negative control).

    .venv/bin/python bench/stats_early_limit.py        # 20,000 series of 400 cases, seed 1
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import scipy.stats

Z = float(scipy.stats.norm.isf(0.025))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=20_000)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    n = args.cases
    looks = np.ceil(np.arange(1, 21) * n / 20).astype(int)
    margin = Z / math.sqrt(n)  # σ = 1
    sums = np.cumsum(np.random.default_rng(args.seed).standard_normal((args.series, n)), axis=1)[:, looks - 1]
    means = sums / looks

    def saved(half: np.ndarray) -> tuple[float, float]:
        low = np.maximum.accumulate(means - half, axis=1)
        decided = low > -2 * margin  # the truth is 0, the flip point 2 margins below it
        first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(looks) - 1)
        return 1 - float(looks[first].mean()) / n, float(decided[:, -1].mean())

    log40 = math.log(40)
    print(f"{args.series} Gaussian series of {n} planned cases, truth 2 margins past the flip point, 20 looks")
    for share in (0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0):
        lam = math.sqrt(2 * log40 / (share * n))
        s, d = saved(lam / 2 + log40 / (lam * looks))
        print(f"  betting, known σ, tuned for {share:.1f}·N: saved {s:.3f}, decided by N {d:.3f}")
    for at in ([19], [9, 19], [5, 9, 19], [4, 7, 11, 19], [5, 8, 11, 14, 19], list(range(20))):
        q = np.full(20, np.inf)
        q[at] = float(scipy.stats.norm.isf(0.025 / len(at)))
        s, d = saved(q / np.sqrt(looks))
        print(
            f"  Bonferroni at looks {[a + 1 for a in at] if len(at) < 20 else 'all 20'}: saved {s:.3f}, decided {d:.3f}"
        )
    pocock = float(np.quantile((sums / np.sqrt(looks)).max(axis=1), 0.975))  # the null: truth on the flip point
    s, d = saved(pocock / np.sqrt(looks))
    print(
        f"  Pocock's normal boundary (z = {pocock:.3f} at every look; asymptotic only): saved {s:.3f}, decided {d:.3f}"
    )
    s, d = saved(Z / np.sqrt(looks))
    print(f"  fixed-size normal interval at every look (invalid when acted on): saved {s:.3f}, decided {d:.3f}")


if __name__ == "__main__":
    main()
