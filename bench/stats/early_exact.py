"""What early stopping can save at best with one repeat: exact binomial group-sequential designs.

With one attempt per case, a case's pass is a Bernoulli draw of the population's mean whatever the population of
cases is, so an exact binomial group-sequential test is valid for every population (issue 28, part 3 asks what the
best such design saves). At the same 20 looks a stop_early series makes (k/20 of its planned cases), each design
confirms "the rate is above the line" at look k once the passes reach c_k; the c_k are the smallest integers whose
chance of a first crossing at the line, by dynamic programming over the passes, stays within an error-spending
function (O'Brien–Fleming-like and Pocock-like, Lan–DeMets) of the one-sided 0.025. Printed per cell: the planned
cases for 80% power, the median and mean saving (1 − cases run / planned) at that N and at 3×, and the exact false
confirmation at the line under peeking at every look.

    .venv/bin/python bench/stats/early_exact.py
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from aqven.research.stats.exact_sequential import first_stops, upper_counts

ALPHA = 0.025
LOOKS = 20


def spending(name: str, t: float) -> float:
    if name == "obrien-fleming":
        return float(2 * (1 - norm.cdf(norm.ppf(1 - ALPHA / 2) / math.sqrt(t))))
    if name == "pocock":
        return float(ALPHA * math.log(1 + (math.e - 1) * t))
    raise ValueError(name)


def looks(n: int) -> list[int]:
    return sorted({max(1, math.ceil(k * n / LOOKS)) for k in range(1, LOOKS + 1)})


def boundaries(n: int, line: float, design: str) -> tuple[list[int], list[int], float]:
    """(look sizes, the pass count that confirms at each, the exact chance of confirming at the line), by the
    product's dynamic programming (`exact_sequential.upper_counts`) with this spending function."""
    sizes = looks(n)
    counts, spent = upper_counts(sizes, line, [spending(design, m / sizes[-1]) for m in sizes])
    return sizes, counts, spent[-1]


def stops(n: int, line: float, truth: float, design: str) -> tuple[float, float, float]:
    """(power, median saving, mean saving) at the truth, by the same dynamic programming."""
    sizes, cs, _ = boundaries(n, line, design)
    p = first_stops(sizes, cs, [-1] * len(cs), truth)[0]
    never = 1 - p.sum()
    ran = np.array(sizes, dtype=float)
    saving = 1 - ran / n
    probs = np.append(p, never)
    savings = np.append(saving, 0.0)  # a series that never confirms runs all its cases
    order = np.argsort(savings)
    cdf = np.cumsum(probs[order])
    median = float(savings[order][np.searchsorted(cdf, 0.5)])
    return float(p.sum()), median, float((probs * savings).sum())


def planned(line: float, truth: float, design: str, power: float = 0.8) -> int:
    lo, hi = 1, 2
    while stops(hi, line, truth, design)[0] < power:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if stops(mid, line, truth, design)[0] >= power else (mid, hi)
    return hi


HEAD = (
    "| truth vs line | design | planned N (80% power) | median saving at N (mean) | at 3N (mean) |"
    " false confirmation at the line |"
)


def main() -> None:
    print(HEAD)
    print("|---|---|---|---|---|---|")
    for line in (0.90, 0.95):
        for design in ("obrien-fleming", "pocock"):
            n = planned(line, 0.97, design)
            _, med, mean = stops(n, line, 0.97, design)
            _, med3, mean3 = stops(3 * n, line, 0.97, design)
            _, _, false = boundaries(n, line, design)
            cells = [f"0.97 vs {line}", design, str(n), f"{med:.3f} ({mean:.3f})", f"{med3:.3f} ({mean3:.3f})"]
            print("| " + " | ".join([*cells, f"{false:.4f}"]) + " |")


if __name__ == "__main__":
    main()
