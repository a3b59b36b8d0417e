"""The worlds of bench/stats/stats_families.py: their oracles are the true spread of the estimate, and their
verdicts are the verdict table of `aqven.research.stats.verdict.classify` (a bench that measured the wrong
thing would pass or fail for nothing)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from support.paths import REPO

sys.path.insert(0, str(REPO / "bench" / "stats"))

import stats_families as fam

WORLDS = [
    ("one_rate", fam.world("bimodal", h=0.05, qh=0.2, qe=0.99)),
    ("one_rate", fam.world("scores", p=0.9, kappa=2)),
    ("one_rate", fam.world("beta", p=0.9, rho=0.3, drop=0.3)),
    ("paired", fam.world("bimodal", h=0.05, qh=0.0, qhb=0.6, qe=0.99)),
    ("paired", fam.world("bimodal", h=0.01, qh=0.2, qe=0.995, brk=0.05)),
    ("paired", fam.world("scores", p=0.9, kappa=2, lift=0.2)),
    ("paired", fam.world("scores", p=0.9, kappa=20, brk=0.05)),
    ("paired", fam.world("beta", p=0.9, diff=-0.02, rho=0.3, c=0.5, drop=0.3)),
    ("paired", fam.world("beta", p=0.9, rho=0.9, brk=0.05)),
]


@pytest.mark.parametrize(("kind", "w"), WORLDS, ids=[w.label for _, w in WORLDS])
def test_oracle_is_the_spread_of_the_estimate_and_the_truth_its_mean(kind: str, w: fam.World) -> None:
    rng = np.random.default_rng(11)
    n, r, sims = 40, 3, 4000
    if kind == "one_rate":
        y, reps = fam.sample_one(w, rng, sims, n, r)
        est = y.sum(axis=1) / reps.sum(axis=1)
        var, truth = fam.var_one(w, r), fam.truth_one(w)
    else:
        ya, ra, yb, rb = fam.sample_pair(w, rng, sims, n, r)
        both = (ra > 0) & (rb > 0)
        est = (np.where(both, yb, 0).sum(axis=1) / np.where(both, rb, 0).sum(axis=1)) - (
            np.where(both, ya, 0).sum(axis=1) / np.where(both, ra, 0).sum(axis=1)
        )
        var, truth = fam.var_pair(w, r), fam.truth_pair(w)
    sd = np.sqrt(var / n)
    assert float(np.std(est)) / sd == pytest.approx(1.0, abs=0.06)
    assert abs(float(np.mean(est)) - truth) < 4 * sd / np.sqrt(sims) + 2e-3 * sd


def test_vectorised_verdicts_are_the_classify_table() -> None:
    rng = np.random.default_rng(3)
    low = rng.uniform(-0.2, 1.0, 500)
    high = low + rng.uniform(0, 0.3, 500)
    for question in fam.QUESTIONS:
        fam.check_against_classify(question, low, high, 0.6, 0.05)  # raises on a disagreement
        conf, ref = fam.decisions(question, low, high, 0.6, 0.05)
        assert conf.any() and ref.any() and not (conf & ref).any()


def test_boundary_placement_puts_the_truth_on_the_flip_point() -> None:
    for question, truth in (("at_least", 0.97), ("at_most", 0.03), ("compare", 0.02), ("noninferior", -0.02)):
        bound, margin = fam.placement(question, truth, 0.0, 0.01)
        low = np.array([truth + 1e-9, truth - 1e-9])
        conf, _ = fam.decisions(question, low, low + (0.5 if question != "at_most" else 0.0), bound, margin)
        if question == "at_most":
            conf, _ = fam.decisions(question, low - 0.5, low, bound, margin)
            assert list(conf) == [False, True]
        else:
            assert list(conf) == [True, False]
