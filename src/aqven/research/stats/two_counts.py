"""Did one cell's pass count move beyond chance between two series? Fisher's exact test on two counts.

Studio's diff of two series compares each working case and variant: `a` passes of `n` attempts before, `b` of `m`
after. With a few repeats per cell most moves are the models' randomness: 2/2 → 1/2 happens by chance alone
whenever a case passes three times in four. A move is *beyond chance* only when Fisher's exact test (two-sided)
puts it below `LEVEL`; each cell is tested alone, so among many cells some 5% of unchanged ones may still cross it.
"""

from __future__ import annotations

import scipy.stats

LEVEL = 0.05  # two-sided


def change_p(a_pass: int, a_n: int, b_pass: int, b_n: int) -> float:
    """The two-sided p-value of Fisher's exact test of `a_pass`/`a_n` against `b_pass`/`b_n` (1.0 when either is
    empty)."""
    if a_n <= 0 or b_n <= 0:
        return 1.0
    a_pass, b_pass = min(max(a_pass, 0), a_n), min(max(b_pass, 0), b_n)
    table = [[a_pass, a_n - a_pass], [b_pass, b_n - b_pass]]
    return float(scipy.stats.fisher_exact(table, alternative="two-sided").pvalue)


def least_p(a_n: int, b_n: int) -> float:
    """The smallest p-value any change between cells of `a_n` and `b_n` attempts can reach (all pass against all
    fail): above `LEVEL`, no change of such a cell can be told from chance."""
    return change_p(a_n, a_n, 0, b_n)


def beyond_chance(a_pass: int, a_n: int, b_pass: int, b_n: int) -> bool:
    return change_p(a_pass, a_n, b_pass, b_n) < LEVEL
