"""The populations of issue 10 for `stats_grid.py`: new coverage families, boundary cells and peeking.

Every interval is the server's own vectorised arithmetic (`one_rate_batch`, `paired_difference_batch`,
`sequence_interval_batch`); the worlds are simulated here. A **world** is a population of cases (one
variant, or two run on the same cases); a series draws ``n`` cases from it and runs ``r`` attempts of
each.

Worlds
------

* ``beta`` — each case's pass rate ``q ~ Beta`` with mean ``p`` and intra-case correlation ``ρ``
  (``q = p`` when ρ = 0; ``q = 1`` when p = 1), attempts pass with ``q`` (as the Beta grid). In a pair,
  B's rate ``p + diff`` is linked to A's by a Gaussian copula with correlation ``c`` (the Beta grid's
  tables); with ``brk > 0`` instead, B runs A's very case rates and *breaks* a share ``brk`` of the
  cases (every attempt fails). With ``drop > 0`` each attempt is lost at random with probability
  ``drop``, independently per variant (its counted attempts ``R ~ Binomial(r, 1 − drop)``; a case left
  with none drops out, in a pair from both variants).
* ``bimodal`` — a share ``h`` of hard cases passes at ``qh``, the rest at ``qe`` (easy cases with
  scattered random failures, binomial repeats). Pair: B runs the same cases at the same rates with its
  own attempts (truth 0), and either breaks a share ``brk`` of the cases or passes its hard cases at
  ``qhb`` instead of ``qh`` (``mend``: B better by ``h·(qhb − qh)``).
* ``scores`` — each case's mean score ``m ~ Beta(p·κ, (1 − p)·κ)`` (concentration κ: ICC ``1/(κ+1)``),
  each attempt scores ``s ~ Beta(m·κa, (1 − m)·κa)`` with the attempt concentration ``κa = 20``
  (`ATTEMPT_KAPPA`: an attempt's score has sd ``√(m(1−m)/21)`` around its case's mean); ``m`` is kept
  within 1e-12 of the edges (a Beta draw can round to exactly 1). Pair: B has the same case means with
  its own attempts, and either scores 0 on a share ``brk`` of the cases, or lifts every case mean to
  ``m + lift·(1 − m)``.

The truth is the mean over the population of the case rates (of ``m_B − m_A`` for a pair).

The oracle
----------

The true standard deviation of the estimate over series, from the world's moments (no simulation):
the estimate of a rate is ``Σy/ΣR`` over the cases, ``y`` the passes (or summed scores) of a case and
``R`` its counted attempts. Linearised about the truth ``μ`` it is ``μ + Σ(y_i − μR_i)/(n·E[R])``, so

    Var = (E[R²]·Var(q) + E[R]·E[w]) / (n·E[R]²)

with ``q`` the case rate (mean score), ``w`` the variance of one attempt given its case (``q(1 − q)``
for pass/fail, ``m(1 − m)/(κa + 1)`` for scores); exact when every case has ``r`` attempts
(``Var(q) + E[w]/r``, over ``n``). A pair's estimate ``p̂_B − p̂_A`` runs on the cases counted in
both: with each variant's attempts lost independently, ``P = P(R > 0)``, the two variants' terms are
``(E[R²]Var(q) + E[R]E[w])/(E[R]²·P)`` less ``2·Cov(q_A, q_B)/P²``, over ``n``. Broken, mended and
lifted pairs (all repeats kept) use ``Var(δ)/n`` of the per-case difference ``δ = m_B − m_A``, whose
first two moments follow from the world in closed form (`_pair_moments`). Each cell reports
``sd_ratio`` = the estimate's sd over its series ÷ the oracle's: about 1 where the oracle is right.
The oracle width is ``2·1.96·sd``; ``ratio_median`` = median width ÷ it (nan where the truth is an edge
and the oracle 0, e.g. every rate 1.0).

Question kinds at their boundary (`BoundaryCell`), decided as `aqven.research.stats.verdict.classify` does
(vectorised in `decisions`, checked against `classify` itself on the first 200 series of every cell):

* threshold at least ``b``: truth = ``b + m``; confirmed iff ``L > b + m``
* threshold at most ``b``: a failure rate (the mirror of a pass world: ``1 − passes``), truth = ``b − m``;
  confirmed iff ``U < b − m``
* compare: truth ``B − A = m``; confirmed iff ``L > m``
* noninferior: truth ``B − A = −m``; confirmed iff ``L > −m``

Peeking (`PeekCell`): a stop_early series of ``N`` planned cases reads the confidence sequence at the 20
looks of `aqven.research.stats.sequential` (prefix lengths ``⌈j·N/20⌉``) and stops at the first look whose
verdict is decided. ``N`` is the plan: the cases for an oracle half-width of one margin
(``⌈1.96²·Var(δ)/m²⌉``), times ``factor`` (clamped to 20…2,000). The truth sits ``pos`` margins past the
point where the verdict flips (``pos = 0``: the boundary; ``+2``: two margins on the confirming side;
``−2``: two on the refuting side).
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import stats_grid as grid

from aqven.research.stats.betting import sequence_interval_batch
from aqven.research.stats.intervals import (
    Z95,
    one_rate_batch,
    paired_difference_batch,
    penalised_beta_batch,
    square_and_add_batch,
)
from aqven.research.stats.sequential import look_lengths
from aqven.research.stats.verdict import QuestionSpec, classify

ATTEMPT_KAPPA = 20.0
EDGE = 1e-12
CHUNK = 4_000_000  # attempt scores drawn per block (memory)
Arrays = tuple[np.ndarray, ...]


# ---- worlds -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    """A population of cases: ``name`` (beta | bimodal | scores) and its parameters (see the module)."""

    name: str
    params: tuple[tuple[str, float], ...]

    def get(self, key: str, default: float = 0.0) -> float:
        return dict(self.params).get(key, default)

    @property
    def label(self) -> str:
        return self.name + "(" + ",".join(f"{k}={v:g}" for k, v in self.params) + ")"


def world(name: str, **params: float) -> World:
    return World(name, tuple(sorted((k, float(v)) for k, v in params.items())))


def _beta_rates(rng: np.random.Generator, p: float, rho: float, shape: tuple[int, int]) -> np.ndarray:
    if p >= 1.0:
        return np.ones(shape)
    if rho == 0.0:
        return np.full(shape, p)
    a, b = grid.beta_params(p, rho)
    out: np.ndarray = rng.beta(a, b, size=shape)
    return out


def _copula_rates(
    rng: np.random.Generator, pa: float, pb: float, rho: float, c: float, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    za = rng.standard_normal(shape)
    zb = c * za + math.sqrt(max(1 - c * c, 0.0)) * rng.standard_normal(shape)

    def rates(z: np.ndarray, p: float) -> np.ndarray:
        if p >= 1.0:
            return np.ones(shape)
        return grid.case_rates_from_z(z, p, rho, grid.quantile_table(p, rho) if rho else None)

    return rates(za, pa), rates(zb, pb)


def _scores(rng: np.random.Generator, m: np.ndarray, r: int) -> np.ndarray:
    """Summed scores of ``r`` attempts per case, each ``Beta(m·κa, (1−m)·κa)`` (drawn in blocks)."""
    out = np.empty(m.shape)
    rows = max(1, CHUNK // max(1, m.shape[1] * r))
    for i in range(0, m.shape[0], rows):
        mm = m[i : i + rows, :, None]
        out[i : i + rows] = rng.beta(mm * ATTEMPT_KAPPA, (1 - mm) * ATTEMPT_KAPPA, size=(*mm.shape[:2], r)).sum(axis=2)
    return out


def _score_means(rng: np.random.Generator, p: float, kappa: float, shape: tuple[int, int]) -> np.ndarray:
    out: np.ndarray = np.clip(rng.beta(p * kappa, (1 - p) * kappa, size=shape), EDGE, 1 - EDGE)
    return out


def _counted(rng: np.random.Generator, drop: float, r: int, shape: tuple[int, int]) -> np.ndarray:
    if drop <= 0:
        return np.full(shape, float(r))
    out: np.ndarray = rng.binomial(r, 1 - drop, size=shape).astype(np.float64)
    return out


def sample_one(w: World, rng: np.random.Generator, sims: int, n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(passes or summed scores, counted attempts), shape (sims, n)."""
    shape = (sims, n)
    if w.name == "scores":
        m = _score_means(rng, w.get("p"), w.get("kappa"), shape)
        return _scores(rng, m, r), np.full(shape, float(r))
    if w.name == "bimodal":
        q = np.where(rng.random(shape) < w.get("h"), w.get("qh"), w.get("qe"))
        reps = np.full(shape, float(r))
    else:
        q = _beta_rates(rng, w.get("p"), w.get("rho"), shape)
        reps = _counted(rng, w.get("drop"), r, shape)
    y = rng.binomial(reps.astype(np.int64), q).astype(np.float64)
    return y, reps


def sample_pair(w: World, rng: np.random.Generator, sims: int, n: int, r: int) -> Arrays:
    """(y_A, R_A, y_B, R_B), shape (sims, n) each."""
    shape = (sims, n)
    full = np.full(shape, float(r))
    brk = w.get("brk")
    broken = rng.random(shape) < brk if brk > 0 else np.zeros(shape, dtype=bool)
    if w.name == "scores":
        m = _score_means(rng, w.get("p"), w.get("kappa"), shape)
        mb = m + w.get("lift") * (1 - m)
        ya, yb = _scores(rng, m, r), _scores(rng, np.clip(mb, EDGE, 1 - EDGE), r)
        return ya, full, np.where(broken, 0.0, yb), full
    if w.name == "bimodal":
        hard = rng.random(shape) < w.get("h")
        qa = np.where(hard, w.get("qh"), w.get("qe"))
        qb = np.where(hard, w.get("qhb", w.get("qh")), w.get("qe"))
        ra = rb = full
    else:
        p, rho = w.get("p"), w.get("rho")
        if brk > 0:
            qa = qb = _beta_rates(rng, p, rho, shape)
        else:
            qa, qb = _copula_rates(rng, p, p + w.get("diff"), rho, w.get("c"), shape)
        ra = _counted(rng, w.get("drop"), r, shape)
        rb = _counted(rng, w.get("drop"), r, shape)
    ya = rng.binomial(ra.astype(np.int64), qa).astype(np.float64)
    yb = rng.binomial(rb.astype(np.int64), qb).astype(np.float64)
    return ya, ra, np.where(broken, 0.0, yb), rb


def _moments(w: World, variant: str = "a") -> tuple[float, float, float]:
    """(mean, Var(q), E[w]) of one variant's case rates (means) and per-attempt variance."""
    if w.name == "scores":
        p, kappa = w.get("p"), w.get("kappa")
        var_m = p * (1 - p) / (kappa + 1)
        return p, var_m, (p * (1 - p) - var_m) / (ATTEMPT_KAPPA + 1)
    if w.name == "bimodal":
        h, qe = w.get("h"), w.get("qe")
        qh = w.get("qh") if variant == "a" else w.get("qhb", w.get("qh"))
        mu = h * qh + (1 - h) * qe
        return mu, h * (1 - h) * (qh - qe) ** 2, h * qh * (1 - qh) + (1 - h) * qe * (1 - qe)
    p = w.get("p") + (w.get("diff") if variant == "b" else 0.0)
    rho = w.get("rho")
    return p, rho * p * (1 - p), (1 - rho) * p * (1 - p)


def truth_one(w: World) -> float:
    return _moments(w)[0]


def truth_pair(w: World) -> float:
    mu_a = _moments(w, "a")[0]
    if w.get("brk") > 0:
        return -w.get("brk") * mu_a
    if w.name == "scores":
        return w.get("lift") * (1 - mu_a)
    return _moments(w, "b")[0] - mu_a


def var_one(w: World, r: int) -> float:
    """Var of one case's contribution (the oracle variance of the estimate is this over n)."""
    _, var_q, e_w = _moments(w)
    d = w.get("drop")
    e_r = r * (1 - d)
    e_r2 = r * d * (1 - d) + e_r**2
    return (e_r2 * var_q + e_r * e_w) / e_r**2


def _pair_moments(w: World, r: int) -> float:
    """Var(δ) of the per-case difference ``δ = m_B − m_A`` for broken, mended or lifted pairs."""
    mu, var_q, e_w = _moments(w)
    brk = w.get("brk")
    if brk > 0:  # unbroken: two independent means of one case; broken: δ = −m_A
        e_q2 = var_q + mu * mu
        e_d2 = (1 - brk) * 2 * e_w / r + brk * (e_w / r + e_q2)
        return e_d2 - (brk * mu) ** 2
    if w.name == "scores":  # m_B = m + s(1 − m): E[δ|m] = s(1 − m)
        s = w.get("lift")
        e_1m2 = var_q + (1 - mu) ** 2  # E[(1 − m)²]
        e_wb = ((1 - s) * (1 - mu) - (1 - s) ** 2 * e_1m2) / (ATTEMPT_KAPPA + 1)  # E[m_B(1 − m_B)]/(κa+1)
        d = s * (1 - mu)
        return s * s * e_1m2 - d * d + (e_w + e_wb) / r
    h, qh, qhb, qe = w.get("h"), w.get("qh"), w.get("qhb", w.get("qh")), w.get("qe")  # bimodal
    d = h * (qhb - qh)
    within = (h * (qh * (1 - qh) + qhb * (1 - qhb)) + (1 - h) * 2 * qe * (1 - qe)) / r
    return h * (qhb - qh) ** 2 - d * d + within


def var_pair(w: World, r: int) -> float:
    if w.name != "beta" or w.get("brk") > 0:
        return _pair_moments(w, r)
    p, diff, rho, c, d = w.get("p"), w.get("diff"), w.get("rho"), w.get("c"), w.get("drop")
    cov = grid.case_covariance(p, p + diff, rho, c) if p < 1 and p + diff < 1 else 0.0
    e_r = r * (1 - d)
    e_r2 = r * d * (1 - d) + e_r**2
    both = 1 - d**r if d > 0 else 1.0  # P(R > 0)
    total = 0.0
    for v in ("a", "b"):
        _, var_q, e_w = _moments(w, v)
        total += (e_r2 * var_q + e_r * e_w) / (e_r**2 * both)
    return total - 2 * cov / both**2


# ---- coverage cells -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FamilyCell:
    family: str  # bimodal | scores | drops | small_n | ones
    kind: str  # one_rate | paired
    w: World
    n: int
    r: int

    @property
    def key(self) -> str:
        return f"{self.family}|{self.kind}|{self.w.label}|{self.n}|{self.r}"

    @property
    def seed(self) -> int:
        return zlib.crc32(self.key.encode())

    @property
    def truth(self) -> float:
        return truth_one(self.w) if self.kind == "one_rate" else truth_pair(self.w)

    @property
    def cost(self) -> float:
        return self.n * (1.0 if self.kind == "one_rate" else 2.5) * (3 if self.w.name == "scores" else 1)

    def oracle_sd(self) -> float:
        v = var_one(self.w, self.r) if self.kind == "one_rate" else var_pair(self.w, self.r)
        return math.sqrt(max(v, 0.0) / self.n)


# world parameters of each family, by kind: the CSV columns a cell is rebuilt from
PARAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "bimodal": {"one_rate": ("h", "qh", "qe"), "paired": ("h", "qh", "qe", "brk")},
    "scores": {"one_rate": ("p", "kappa"), "paired": ("p", "kappa", "brk")},
    "drops": {"one_rate": ("p", "rho", "drop"), "paired": ("p", "rho", "c", "diff", "drop")},
    "small_n": {"one_rate": ("p", "rho"), "paired": ("p", "rho", "c", "diff")},
    "ones": {"one_rate": ("p",), "paired": ("p", "rho", "diff")},
}
WORLD_OF = {"bimodal": "bimodal", "scores": "scores", "drops": "beta", "small_n": "beta", "ones": "beta"}
FAMILIES = tuple(PARAMS)


def _grid(family: str, kind: str, axes: dict[str, list[float]], ns: list[int], rs: list[int]) -> list[FamilyCell]:
    import itertools

    names = list(axes)
    out = []
    for values in itertools.product(*(axes[k] for k in names)):
        params = dict(zip(names, values, strict=True))
        if params.get("rho", 1.0) == 0.0 and "c" in params:
            params["c"] = 0.0  # no spread between cases: nothing for c to link
        if kind == "paired" and "diff" in params and params["diff"] == -1.0:
            params["diff"] = grid.small_difference(params["p"])
        for n in ns:
            for r in rs:
                if r == 1 and params.get("rho", 0.0) != 0.0 and WORLD_OF[family] == "beta":
                    continue
                out.append(FamilyCell(family, kind, world(WORLD_OF[family], **params), n, r))
    return list(dict.fromkeys(out))  # ρ = 0 with several c: one cell


SMALL_DIFF = -1.0  # a placeholder: B worse than A by `stats_grid.small_difference(p)`


def family_cells(family: str, quick: bool) -> list[FamilyCell]:
    """The cells of one family (``quick``: a small version)."""
    q = quick
    if family == "bimodal":
        one = _grid(
            family,
            "one_rate",
            {
                "h": [0.01, 0.05] if q else [0.005, 0.01, 0.02, 0.05],
                "qh": [0.0, 0.2] if q else [0.0, 0.2, 0.5],
                "qe": [0.995] if q else [0.98, 0.995, 0.999],
            },
            [30, 100] if q else [30, 100, 300, 1000],
            [5, 20] if q else [1, 5, 20],
        )
        pair = _grid(
            family,
            "paired",
            {
                "h": [0.01] if q else [0.01, 0.05],
                "qh": [0.2] if q else [0.0, 0.2, 0.5],
                "qe": [0.995] if q else [0.98, 0.999],
                "brk": [0.0, 0.02] if q else [0.0, 0.005, 0.02],
            },
            [100] if q else [30, 100, 300],
            [20] if q else [1, 5, 20],
        )
    elif family == "scores":
        one = _grid(
            family,
            "one_rate",
            {
                "p": [0.9, 0.997] if q else [0.5, 0.9, 0.97, 0.99, 0.997],
                "kappa": [2.0, 200.0] if q else [2.0, 20.0, 200.0],
            },
            [30] if q else [10, 30, 100, 300],
            [1, 10] if q else [1, 5, 20],
        )
        pair = _grid(
            family,
            "paired",
            {"p": [0.99] if q else [0.5, 0.9, 0.99, 0.997], "kappa": [2.0] if q else [2.0, 200.0], "brk": [0.0, 0.02]},
            [30] if q else [10, 30, 100, 300],
            [5] if q else [1, 5, 20],
        )
    elif family == "drops":
        one = _grid(
            family,
            "one_rate",
            {
                "p": [0.9, 0.99] if q else [0.5, 0.9, 0.97, 0.99, 0.999],
                "rho": [0.3] if q else [0.0, 0.3, 0.9],
                "drop": [0.3] if q else [0.1, 0.3],
            },
            [30] if q else [10, 30, 100, 1000],
            [10] if q else [2, 5, 20],
        )
        pair = _grid(
            family,
            "paired",
            {
                "p": [0.97] if q else [0.5, 0.9, 0.99, 0.999],
                "diff": [0.0] if q else [0.0, SMALL_DIFF],
                "rho": [0.5] if q else [0.0, 0.3, 0.9],
                "c": [1.0] if q else [0.9],
                "drop": [0.3] if q else [0.1, 0.3],
            },
            [30] if q else [10, 30, 100, 300],
            [10] if q else [2, 5, 20],
        )
    elif family == "small_n":
        one = _grid(
            family,
            "one_rate",
            {
                "p": [0.9, 0.99] if q else [0.5, 0.7, 0.9, 0.97, 0.99, 0.999],
                "rho": [0.0, 0.3] if q else [0.0, 0.1, 0.3, 0.6, 0.9],
            },
            [5, 12] if q else [5, 8, 12],
            [20] if q else [10, 20],
        )
        pair = _grid(
            family,
            "paired",
            {
                "p": [0.9] if q else [0.5, 0.9, 0.97, 0.99, 0.999],
                "rho": [0.3] if q else [0.0, 0.3, 0.9],
                "c": [0.9] if q else [0.0, 0.9],
                "diff": [0.0, SMALL_DIFF],
            },
            [8] if q else [5, 8, 12],
            [20] if q else [10, 20],
        )
    elif family == "ones":
        one = _grid(
            family,
            "one_rate",
            {"p": [1.0]},
            [10, 100] if q else [5, 10, 30, 100, 300, 1000],
            [5] if q else [1, 2, 5, 20],
        )
        pair = _grid(
            family,
            "paired",
            {"p": [1.0], "rho": [0.0], "diff": [0.0]},
            [30] if q else [5, 10, 30, 100, 300, 1000],
            [5] if q else [1, 5, 20],
        )
        pair += _grid(
            family,
            "paired",
            {"p": [1.0], "rho": [0.0, 0.3] if q else [0.0, 0.3, 0.9], "diff": [-0.01]},
            [30] if q else [5, 10, 30, 100, 300, 1000],
            [5] if q else [1, 5, 20],
        )
        pair = [c for c in pair if not (c.r == 1 and c.w.get("rho"))]
    else:
        raise SystemExit(f"unknown family {family!r}")
    return one + pair


def _cover(low: np.ndarray, high: np.ndarray, truth: float) -> tuple[float, float, float]:
    return grid._cover(low, high, truth)


SERIES_BLOCK = 4_000_000  # series × cases simulated at once (memory: a 20,000-series recheck of 1,000 cases)


def _blocks(sims: int, n: int) -> list[int]:
    rows = max(1, SERIES_BLOCK // max(n, 1))
    return [min(rows, sims - i) for i in range(0, sims, rows)]


def _family_block(cell: FamilyCell, rng: np.random.Generator, sims: int) -> Arrays:
    """(estimate, low, high, unguarded low, unguarded high, all pass, counted cases) of ``sims`` series."""
    if cell.kind == "one_rate":
        y, reps = sample_one(cell.w, rng, sims, cell.n, cell.r)
        est, low, high = one_rate_batch(y, reps)
        _, ulow, uhigh = penalised_beta_batch(y, reps)
        all_pass = np.all(y == reps, axis=1)
        cases = (reps > 0).sum(axis=1)
    else:
        ya, ra, yb, rb = sample_pair(cell.w, rng, sims, cell.n, cell.r)
        est, low, high = paired_difference_batch(ya, ra, yb, rb)
        _, ulow, uhigh = square_and_add_batch(ya, ra, yb, rb)
        all_pass = np.all((ya == ra) & (yb == rb), axis=1)
        cases = ((ra > 0) & (rb > 0)).sum(axis=1)
    return est, low, high, ulow, uhigh, all_pass, cases


def run_family_cell(job: tuple[FamilyCell, int, int]) -> dict[str, Any]:
    cell, sims, base_seed = job
    started = time.perf_counter()
    rng = np.random.default_rng([base_seed, cell.seed])
    parts = [_family_block(cell, rng, k) for k in _blocks(sims, cell.n)]
    est, low, high, ulow, uhigh, passed, cases = (np.concatenate([p[i] for p in parts]) for i in range(7))
    all_pass = float(np.mean(passed))
    truth = cell.truth
    cov, below, above = _cover(low, high, truth)
    ucov, ubelow, uabove = _cover(ulow, uhigh, truth)
    width = high - low
    o_sd = cell.oracle_sd()
    o_width = 2 * Z95 * o_sd
    med, p90 = (float(x) for x in np.nanquantile(width, [0.5, 0.9]))
    row: dict[str, Any] = {
        "family": cell.family,
        "kind": cell.kind,
        **{k: cell.w.get(k) for k in PARAMS[cell.family][cell.kind]},
        "n": cell.n,
        "r": cell.r,
        "truth": truth,
        "sims": sims,
        "seed": f"{base_seed}:{cell.seed}",
        "coverage": cov,
        "p_true_below_low": below,
        "p_true_above_high": above,
        "worst_one_sided": max(below, above),
        "width_median": med,
        "width_p90": p90,
        "oracle_width": o_width,
        "ratio_median": med / o_width if o_width > 0 else math.nan,
        "ratio_p90": p90 / o_width if o_width > 0 else math.nan,
        "sd_ratio": float(np.nanstd(est)) / o_sd if o_sd > 0 else math.nan,
        "all_pass_share": all_pass,
        "no_data_share": float(np.mean(cases == 0)),
        "unguarded_coverage": ucov,
        "unguarded_worst_one_sided": max(ubelow, uabove),
        "seconds": time.perf_counter() - started,
    }
    return row


def cell_from_row(row: dict[str, Any]) -> FamilyCell:
    family, kind = row["family"], row["kind"]
    params = {k: float(row.get(k, 0.0)) for k in PARAMS[family][kind]}
    return FamilyCell(family, kind, world(WORLD_OF[family], **params), int(row["n"]), int(row["r"]))


def describe(row: dict[str, Any]) -> str:
    params = " ".join(f"{k}={row.get(k, 0.0):g}" for k in PARAMS[row["family"]][row["kind"]])
    return f"{row['kind']} {params} n={row['n']} r={row['r']}"


# ---- question kinds -----------------------------------------------------------------------------------

QUESTIONS = ("at_least", "at_most", "compare", "noninferior")


def decisions(
    question: str, low: np.ndarray, high: np.ndarray, bound: float, margin: float
) -> tuple[np.ndarray, np.ndarray]:
    """(confirmed, refuted) per series: the table of `aqven.research.stats.verdict.classify`, vectorised."""
    b, m = bound, margin
    if question == "at_least":
        return low > b + m, high <= b + m
    if question == "at_most":
        return high < b - m, low >= b - m
    if question == "compare":
        return low > m, high <= m
    return low > -m, high <= -m


def spec(question: str, bound: float, margin: float) -> QuestionSpec:
    if question in ("at_least", "at_most"):
        return QuestionSpec("threshold", "ok", bound=bound, margin=margin, direction=question)  # type: ignore[arg-type]
    return QuestionSpec(question, "ok", margin=margin)  # type: ignore[arg-type]


def check_against_classify(question: str, low: np.ndarray, high: np.ndarray, bound: float, margin: float) -> None:
    """The vectorised table agrees with `classify` itself on the first 200 series."""
    conf, ref = decisions(question, low[:200], high[:200], bound, margin)
    q = spec(question, bound, margin)
    for i in range(min(200, len(low))):
        want = classify(q, float(low[i]), float(high[i]))
        got = "confirmed" if conf[i] else "refuted" if ref[i] else "inconclusive"
        if want != got:
            raise SystemExit(f"vectorised verdict {got} ≠ classify {want} ({question}, [{low[i]}, {high[i]}])")


def _question_data(question: str, w: World, rng: np.random.Generator, sims: int, n: int, r: int) -> Arrays:
    """Per-case data for a question: (y, R) of the rate it asks about, or (y_A, R_A, y_B, R_B)."""
    if question in ("compare", "noninferior"):
        return sample_pair(w, rng, sims, n, r)
    y, reps = sample_one(w, rng, sims, n, r)
    if question == "at_most":  # a failure rate: the mirror of the pass world
        y = reps - y
    return y, reps


def question_truth(question: str, w: World) -> float:
    if question in ("compare", "noninferior"):
        return truth_pair(w)
    mu = truth_one(w)
    return 1 - mu if question == "at_most" else mu


def question_case_var(question: str, w: World, r: int) -> float:
    return var_pair(w, r) if question in ("compare", "noninferior") else var_one(w, r)


def placement(question: str, truth: float, pos: float, margin: float) -> tuple[float, float]:
    """(bound, margin) that put the truth ``pos`` margins past the flip point toward "confirmed".

    For compare and noninferior the margin follows from the truth: compare flips at ``m``
    (truth = (1 + pos)·m), noninferior at ``−m`` (truth = (pos − 1)·m)."""
    if question == "at_least":  # flips at b + m
        return truth - (pos + 1) * margin, margin
    if question == "at_most":  # flips at b − m
        return truth + (pos + 1) * margin, margin
    if question == "compare":
        return 0.0, truth / (1 + pos)
    return 0.0, truth / (pos - 1)


@dataclass(frozen=True)
class BoundaryCell:
    question: str
    w: World
    n: int
    r: int
    margin: float = 0.01  # used by the threshold kinds; compare/noninferior take it from the truth

    @property
    def key(self) -> str:
        return f"boundary|{self.question}|{self.w.label}|{self.n}|{self.r}|{self.margin!r}"

    @property
    def seed(self) -> int:
        return zlib.crc32(self.key.encode())

    @property
    def cost(self) -> float:
        paired = self.question in ("compare", "noninferior")
        return self.n * (2.5 if paired else 1.0) * (3 if self.w.name == "scores" else 1)


def cp(k: int, n: int) -> tuple[float, float]:
    return grid._cp(k, n)


def run_boundary_cell(job: tuple[BoundaryCell, int, int]) -> dict[str, Any]:
    cell, sims, base_seed = job
    started = time.perf_counter()
    rng = np.random.default_rng([base_seed, cell.seed])
    blocks = []
    for k in _blocks(sims, cell.n):
        data = _question_data(cell.question, cell.w, rng, k, cell.n, cell.r)
        if len(data) == 2:
            blocks.append((*one_rate_batch(*data)[1:], *penalised_beta_batch(*data)[1:]))
        else:
            blocks.append((*paired_difference_batch(*data)[1:], *square_and_add_batch(*data)[1:]))
    low, high, ulow, uhigh = (np.concatenate([b[i] for b in blocks]) for i in range(4))
    truth = question_truth(cell.question, cell.w)
    bound, margin = placement(cell.question, truth, 0.0, cell.margin)
    check_against_classify(cell.question, low, high, bound, margin)
    conf, ref = decisions(cell.question, low, high, bound, margin)
    uconf, _ = decisions(cell.question, ulow, uhigh, bound, margin)
    k = int(conf.sum())
    lo, hi = cp(k, sims)
    return {
        "question": cell.question,
        "world": cell.w.label,
        "n": cell.n,
        "r": cell.r,
        "bound": bound,
        "margin": margin,
        "truth": truth,
        "sims": sims,
        "seed": f"{base_seed}:{cell.seed}",
        "false_confirmed": k / sims,
        "cp_low": lo,
        "cp_high": hi,
        "refuted": float(ref.mean()),
        "unguarded_false_confirmed": float(uconf.mean()),
        "seconds": time.perf_counter() - started,
    }


def _boundary_worlds(question: str, quick: bool) -> list[World]:
    rhos = [0.0, 0.9] if quick else [0.0, 0.3, 0.9]
    if question in ("at_least", "at_most"):
        out = [world("beta", p=p, rho=rho) for p in ([0.97] if quick else [0.9, 0.97, 0.99]) for rho in rhos]
        out += [world("bimodal", h=0.01, qh=0.2, qe=0.995)]
        out += [] if quick else [world("bimodal", h=0.05, qh=0.0, qe=0.99), world("bimodal", h=0.02, qh=0.5, qe=0.999)]
        out += [world("scores", p=0.97, kappa=2)]
        out += [] if quick else [world("scores", p=0.99, kappa=200), world("scores", p=0.997, kappa=20)]
        return out  # at most: the same pass worlds, mirrored (failure rates 0.1, 0.03, 0.01, …)
    if question == "compare":  # B better
        out = [
            world("beta", p=p, diff=d, rho=rho, c=0.0 if rho == 0 else 0.5)
            for p, d in ([(0.9, 0.02)] if quick else [(0.5, 0.02), (0.9, 0.02), (0.97, 0.01)])
            for rho in rhos
        ]
        out += [world("bimodal", h=0.05, qh=0.0, qhb=0.4, qe=0.99)]
        out += (
            []
            if quick
            else [
                world("bimodal", h=0.02, qh=0.2, qhb=0.7, qe=0.995),
                world("bimodal", h=0.01, qh=0.5, qhb=1.0, qe=0.999),
            ]
        )
        out += [world("scores", p=0.9, kappa=2, lift=0.2)]
        out += (
            []
            if quick
            else [world("scores", p=0.97, kappa=200, lift=1 / 3), world("scores", p=0.5, kappa=20, lift=0.04)]
        )
        return out
    out = [  # noninferior: B worse
        world("beta", p=p, diff=d, rho=rho, c=0.0 if rho == 0 else 0.5)
        for p, d in ([(0.9, -0.02)] if quick else [(0.5, -0.02), (0.9, -0.02), (0.97, -0.01)])
        for rho in rhos
    ]
    out += [world("beta", p=0.97, rho=0.3, brk=0.02)]
    out += [] if quick else [world("beta", p=0.9, rho=0.9, brk=0.05), world("beta", p=0.99, rho=0.0, brk=0.01)]
    out += [world("bimodal", h=0.01, qh=0.2, qe=0.995, brk=0.02)]
    out += (
        []
        if quick
        else [
            world("bimodal", h=0.05, qh=0.0, qe=0.99, brk=0.01),
            world("bimodal", h=0.02, qh=0.5, qe=0.999, brk=0.005),
        ]
    )
    out += [world("scores", p=0.97, kappa=2, brk=0.02)]
    out += [] if quick else [world("scores", p=0.99, kappa=200, brk=0.01), world("scores", p=0.9, kappa=20, brk=0.05)]
    return out


BOUNDARY_SIZES = [(30, 5), (100, 20), (300, 2), (1000, 5)]


def boundary_cells(quick: bool) -> list[BoundaryCell]:
    sizes = [(30, 5), (300, 2)] if quick else BOUNDARY_SIZES
    return [BoundaryCell(q, w, n, r) for q in QUESTIONS for w in _boundary_worlds(q, quick) for n, r in sizes]


def boundary_from_row(row: dict[str, Any], worlds: dict[str, World]) -> BoundaryCell:
    return BoundaryCell(row["question"], worlds[row["world"]], int(row["n"]), int(row["r"]))


def all_boundary_worlds() -> dict[str, World]:
    return {w.label: w for q in QUESTIONS for quick in (False, True) for w in _boundary_worlds(q, quick)}


# ---- peeking ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeekCell:
    question: str
    w: World
    r: int
    pos: float  # margins past the flip point toward "confirmed" (0: the boundary)
    factor: float  # planned cases ÷ the plan (oracle half-width = one margin)
    margin: float = 0.01  # threshold kinds; compare/noninferior take it from the truth
    control: bool = field(default=False, compare=False)  # also peek with the fixed-n interval

    @property
    def key(self) -> str:
        return f"peek|{self.question}|{self.w.label}|{self.r}|{self.pos!r}|{self.factor!r}|{self.margin!r}"

    @property
    def seed(self) -> int:
        return zlib.crc32(self.key.encode())

    def plan(self) -> tuple[float, float, float, int]:
        """(truth, bound, margin, planned cases N)."""
        truth = question_truth(self.question, self.w)
        bound, margin = placement(self.question, truth, self.pos, self.margin)
        var = question_case_var(self.question, self.w, self.r)
        n = math.ceil(self.factor * Z95**2 * var / margin**2)
        return truth, bound, margin, int(min(max(n, 20), 2000))

    def unclamped(self) -> int:
        """The planned cases before the clamp to 20…2,000."""
        truth = question_truth(self.question, self.w)
        _, margin = placement(self.question, truth, self.pos, self.margin)
        return math.ceil(self.factor * Z95**2 * question_case_var(self.question, self.w, self.r) / margin**2)

    @property
    def cost(self) -> float:
        return (
            self.plan()[3] * (2.5 if self.question in ("compare", "noninferior") else 1.0) * (3 if self.control else 1)
        )


def run_peek_cell(job: tuple[PeekCell, int, int]) -> dict[str, Any]:
    cell, sims, base_seed = job
    started = time.perf_counter()
    rng = np.random.default_rng([base_seed, cell.seed])
    truth, bound, margin, big_n = cell.plan()
    data = _question_data(cell.question, cell.w, rng, sims, big_n, cell.r)
    paired = len(data) == 4
    if paired:
        ya, ra, yb, rb = data
        valid = (ra > 0) & (rb > 0)
        x = (1 + yb / rb - ya / ra) / 2
    else:
        y, reps = data
        valid = reps > 0
        x = np.where(valid, y / np.where(valid, reps, 1.0), 0.0)
    lengths = np.array(look_lengths(big_n, big_n), dtype=np.int64)
    seen = np.tile(lengths, (sims, 1))
    lows, highs = sequence_interval_batch(x, valid, 0.05, seen)
    if paired:
        lows, highs = 2 * lows - 1, 2 * highs - 1
    conf, ref = decisions(cell.question, lows, highs, bound, margin)
    decided = conf | ref
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(lengths) - 1)
    rows = np.arange(sims)
    stop_conf = conf[rows, first]
    stop_ref = ref[rows, first]
    used = lengths[first]
    full = paired_difference_batch(*data) if paired else one_rate_batch(*data)
    fixed_width = full[2] - full[1]
    seq_width = highs[:, -1] - lows[:, -1]
    k = int(stop_conf.sum())
    lo, hi = cp(k, sims)
    expect = "confirmed" if cell.pos > 0 else "refuted" if cell.pos < 0 else ""
    right = stop_conf if expect == "confirmed" else stop_ref if expect == "refuted" else np.zeros(sims, bool)
    wrong = stop_ref if expect == "confirmed" else stop_conf
    row: dict[str, Any] = {
        "question": cell.question,
        "world": cell.w.label,
        "r": cell.r,
        "pos": cell.pos,
        "factor": cell.factor,
        "planned_cases": big_n,
        "plan_unclamped": cell.unclamped(),
        "bound": bound,
        "margin": margin,
        "truth": truth,
        "sims": sims,
        "seed": f"{base_seed}:{cell.seed}",
        "confirmed": k / sims,
        "confirmed_cp_high": hi,
        "confirmed_cp_low": lo,
        "refuted": float(stop_ref.mean()),
        "right": float(right.mean()) if expect else math.nan,
        "wrong": float(wrong.mean()),
        "saved": 1 - float(used.mean()) / big_n,
        "stopped_early_share": float(np.mean(used < big_n)),
        "fixed_decided": float(np.mean(np.logical_or(*decisions(cell.question, full[1], full[2], bound, margin)))),
        "width_ratio_median": float(np.nanmedian(seq_width / fixed_width)),
    }
    if cell.control:  # the fixed-n interval read at every look, stopped at the first decided: peeking
        fconf = np.zeros(sims, dtype=bool)
        open_ = np.ones(sims, dtype=bool)
        for length in lengths:
            sub = tuple(a[:, :length] for a in data)
            res = paired_difference_batch(*sub) if paired else one_rate_batch(*sub)
            c, rf = decisions(cell.question, res[1], res[2], bound, margin)
            fconf |= open_ & c
            open_ &= ~(c | rf)
        row["fixed_peek_confirmed"] = float(fconf.mean())
    row["seconds"] = time.perf_counter() - started
    return row


def peek_worlds(question: str, quick: bool) -> list[tuple[World, int, float]]:
    """(world, repeats, margin) of the one-rate peeking cells of a threshold kind."""
    if question == "at_least":
        out = [
            (world("beta", p=0.9, rho=0.3), 2, 0.02),
            (world("bimodal", h=0.02, qh=0.2, qe=0.99), 5, 0.01),
            (world("scores", p=0.97, kappa=2), 2, 0.01),
        ]
    else:
        out = [(world("beta", p=0.95, rho=0.3), 2, 0.015), (world("bimodal", h=0.02, qh=0.2, qe=0.99), 5, 0.01)]
    return out[:1] if quick else out


def paired_peek_world(name: str, d: float) -> tuple[World, int, float]:
    """(world with truth ``B − A = d``, repeats, margin): ``beta`` (A at 0.9, ρ 0.3, copula 0.5) or
    ``bimodal`` (5% hard cases at 0 that B passes at ``d/0.05`` when d > 0; B breaks a share of the
    cases of 1% at 0.2 among 0.995 when d < 0)."""
    if name == "beta":
        return world("beta", p=0.9, diff=round(d, 6), rho=0.3, c=0.5), 2, 0.02
    if d > 0:
        return world("bimodal", h=0.05, qh=0.0, qhb=round(d / 0.05, 6), qe=0.99), 5, 0.01
    mu = 0.01 * 0.2 + 0.99 * 0.995
    return world("bimodal", h=0.01, qh=0.2, qe=0.995, brk=round(-d / mu, 9)), 5, 0.01


def peek_cells(quick: bool) -> list[PeekCell]:
    out: list[PeekCell] = []
    factors = [1.0] if quick else [1.0, 3.0]
    for q in ("at_least", "at_most"):
        for w, r, m in peek_worlds(q, quick):
            for pos in (0.0,) if quick and q == "at_most" else (0.0, 2.0, -2.0):
                for f in factors:
                    out.append(PeekCell(q, w, r, pos, f, m, control=(pos == 0.0 and f == 1.0)))
    for q in ("compare", "noninferior"):
        for name in ("beta",) if quick else ("beta", "bimodal"):
            margin = paired_peek_world(name, 0.01)[2]
            for pos in (0.0,) if quick else (0.0, 2.0, -2.0):
                d = (1 + pos) * margin if q == "compare" else (pos - 1) * margin  # flips at m, −m
                w, r, _ = paired_peek_world(name, d)
                for f in factors:
                    out.append(PeekCell(q, w, r, pos, f, control=(pos == 0.0 and f == 1.0)))
    return out


def peek_from_row(row: dict[str, Any], worlds: dict[str, World]) -> PeekCell:
    return PeekCell(
        row["question"],
        worlds[row["world"]],
        int(row["r"]),
        float(row["pos"]),
        float(row["factor"]),
        float(row["margin"]) if row["question"] in ("at_least", "at_most") else 0.01,
    )


# ---- running ------------------------------------------------------------------------------------------


def run_all(fn: Any, cells: Sequence[Any], sims: int, jobs: int, base_seed: int, label: str) -> list[dict[str, Any]]:
    """Cells through ``fn`` on ``jobs`` processes (big cells first), in the order given."""
    work = [(c, sims, base_seed) for c in cells]
    return run_jobs(fn, work, [c.cost for c in cells], jobs, f"{label}: ", parts=10)


def run_jobs(
    fn: Any, work: Sequence[Any], costs: Sequence[float], jobs: int, label: str = "", parts: int = 10
) -> list[dict[str, Any]]:
    """``fn(job)`` for every job on ``jobs`` processes, the costliest first (an even load), rows in the order
    given; prints progress ``parts`` times. The one runner of the Beta grid and of the families."""
    import multiprocessing as mp

    order = sorted(range(len(work)), key=lambda i: -costs[i])
    rows: list[dict[str, Any] | None] = [None] * len(work)
    started = time.perf_counter()
    step = max(1, len(work) // parts)
    done = 0

    def tick() -> None:
        if done % step == 0:
            print(f"  {label}{done}/{len(work)} cells, {time.perf_counter() - started:.0f} s", flush=True)

    if jobs > 1:
        with mp.get_context("fork").Pool(jobs) as pool:
            for i, row in pool.imap_unordered(_indexed, [(i, fn, work[i]) for i in order]):
                rows[i] = row
                done += 1
                tick()
    else:
        for i in order:
            rows[i] = fn(work[i])
            done += 1
            tick()
    return [r for r in rows if r is not None]


def _indexed(item: tuple[int, Any, Any]) -> tuple[int, dict[str, Any]]:
    i, fn, job = item
    return i, fn(job)


def quantile(xs: Sequence[float], q: float) -> float:
    a = np.asarray([x for x in xs if not math.isnan(x)], dtype=np.float64)
    return float(np.quantile(a, q)) if a.size else math.nan


def binom_limit(sims: int, rate: float = 0.025) -> float:
    return rate + 3 * math.sqrt(rate * (1 - rate) / sims)


def all_peek_worlds() -> dict[str, World]:
    return {c.w.label: c.w for quick in (False, True) for c in peek_cells(quick)}


# ---- summaries ----------------------------------------------------------------------------------------

MISS_LIMIT = 0.03  # worst one-sided miss a cell may show at 2,000 series
COVERAGE_FLOOR = 0.94
FALSE_CONFIRM = 0.025
CP_LIMIT = 0.03
SAVED_TARGET = 0.5


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def summarise_family(family: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per kind: min coverage, worst one-sided miss, cells above 0.03, width ÷ oracle."""
    lines = []
    for kind in ("one_rate", "paired"):
        sub = [r for r in rows if r["kind"] == kind]
        if not sub:
            continue
        cov = np.array([r["coverage"] for r in sub])
        lowest = min(sub, key=lambda r: r["coverage"])
        worst = max(sub, key=lambda r: r["worst_one_sided"])
        above = sum(r["worst_one_sided"] > MISS_LIMIT for r in sub)
        ratios = [r.get("ratio_median", math.nan) for r in sub]
        r90 = [r.get("ratio_p90", math.nan) for r in sub]
        sd = [r.get("sd_ratio", math.nan) for r in sub]
        uworst = max(sub, key=lambda r: r["unguarded_worst_one_sided"])
        ok = cov.min() >= COVERAGE_FLOOR and above == 0
        lines += [
            f"{family} {kind}: {len(sub)} cells × {sub[0]['sims']} series — {_verdict(ok)} "
            f"(coverage ≥ {COVERAGE_FLOOR}, one-sided miss ≤ {MISS_LIMIT})",
            f"  min coverage {cov.min():.4f} ({describe(lowest)}); mean {cov.mean():.4f}; "
            f"cells < {COVERAGE_FLOOR}: {int((cov < COVERAGE_FLOOR).sum())}",
            f"  worst one-sided miss {worst['worst_one_sided']:.4f} ({describe(worst)}: P(true<low) "
            f"{worst['p_true_below_low']:.4f}, P(true>high) {worst['p_true_above_high']:.4f}); "
            f"cells above {MISS_LIMIT}: {above}",
            f"  median width ÷ oracle {quantile(ratios, 0.5):.3f} (cells' median; 10th–90th pct "
            f"{quantile(ratios, 0.1):.3f}–{quantile(ratios, 0.9):.3f}, max {quantile(ratios, 1.0):.3f}); 90th-pct "
            f"width ÷ oracle {quantile(r90, 0.5):.3f}; oracle check sd(est)/oracle {quantile(sd, 0.5):.3f} "
            f"({quantile(sd, 0.0):.3f}–{quantile(sd, 1.0):.3f})"
            + (
                f"; the oracle is 0 in {sum(math.isnan(x) for x in ratios)} cells (the truth on an edge): their "
                f"median width {quantile([r['width_median'] for r in sub if math.isnan(r['ratio_median'])], 0.5):.4f}"
                if any(math.isnan(x) for x in ratios)
                else ""
            ),
            f"  control, the unguarded interval ({'penalised beta' if kind == 'one_rate' else 'square-and-add'} "
            f"alone): worst one-sided miss {uworst['unguarded_worst_one_sided']:.4f} ({describe(uworst)}); "
            f"cells above {MISS_LIMIT}: {sum(r['unguarded_worst_one_sided'] > MISS_LIMIT for r in sub)}",
        ]
    return lines


def _bdescribe(row: dict[str, Any]) -> str:
    return f"{row['question']} {row['world']} n={row['n']} r={row['r']}"


def summarise_boundary(rows: Sequence[dict[str, Any]]) -> list[str]:
    sims = rows[0]["sims"]
    lim = binom_limit(sims, FALSE_CONFIRM)
    lines = [
        f"boundary false confirmations: {len(rows)} cells × {sims} series (target ≤ {FALSE_CONFIRM}; "
        f"{FALSE_CONFIRM} + 3 SE = {lim:.4f} at {sims} series; CP upper ≤ {CP_LIMIT} in the 20,000-series recheck)"
    ]
    for q in QUESTIONS:
        sub = [r for r in rows if r["question"] == q]
        if not sub:
            continue
        worst = max(sub, key=lambda r: r["false_confirmed"])
        uworst = max(sub, key=lambda r: r["unguarded_false_confirmed"])
        over = sum(r["false_confirmed"] > FALSE_CONFIRM for r in sub)
        over3 = sum(r["false_confirmed"] > lim for r in sub)
        worlds = len({r["world"] for r in sub})
        lines += [
            f"  {q:11} {len(sub):3} cells ({worlds} worlds) — {_verdict(over3 == 0)}: "
            f"max {worst['false_confirmed']:.4f} (CP {worst['cp_low']:.4f}–{worst['cp_high']:.4f}; "
            f"{_bdescribe(worst)}); mean {np.mean([r['false_confirmed'] for r in sub]):.4f}; "
            f"cells > {FALSE_CONFIRM}: {over}, > {lim:.4f}: {over3}",
            f"  {'':11} control (unguarded interval): max {uworst['unguarded_false_confirmed']:.4f} "
            f"({_bdescribe(uworst)}); "
            f"cells > {FALSE_CONFIRM}: {sum(r['unguarded_false_confirmed'] > FALSE_CONFIRM for r in sub)}",
        ]
    return lines


def _pdescribe(row: dict[str, Any]) -> str:
    return (
        f"{row['question']} {row['world']} r={row['r']} N={int(row['planned_cases'])} (plan×{row['factor']:g}) "
        f"m={row['margin']:.4g}"
    )


def summarise_peek(rows: Sequence[dict[str, Any]]) -> list[str]:
    sims = rows[0]["sims"]
    lim = binom_limit(sims, FALSE_CONFIRM)
    at = [r for r in rows if r["pos"] == 0]
    far = [r for r in rows if abs(r["pos"]) >= 2]
    lines = [f"peeking (stop_early: 20 looks, stop at the first decided): {len(rows)} cells × {sims} series"]
    if at:
        worst = max(at, key=lambda r: r["confirmed"])
        ok = worst["confirmed"] <= lim
        lines.append(
            f"  at the boundary ({len(at)} cells) — {_verdict(ok)} (≤ {FALSE_CONFIRM}, + 3 SE {lim:.4f}): "
            f"false confirmations max {worst['confirmed']:.4f} (CP upper {worst['confirmed_cp_high']:.4f}; "
            f"{_pdescribe(worst)}), mean {np.mean([r['confirmed'] for r in at]):.4f}"
        )
        ctl = [r for r in at if not math.isnan(r.get("fixed_peek_confirmed", math.nan))]
        if ctl:
            cw = max(ctl, key=lambda r: r["fixed_peek_confirmed"])
            lines.append(
                f"    control, the fixed-n interval read at the same 20 looks: max {cw['fixed_peek_confirmed']:.4f} "
                f"({_pdescribe(cw)}), mean {np.mean([r['fixed_peek_confirmed'] for r in ctl]):.4f}"
            )
        for r in sorted(at, key=lambda r: -r["confirmed"]):
            lines.append(
                f"    {_pdescribe(r)}: confirmed {r['confirmed']:.4f}, refuted {r['refuted']:.4f}, "
                f"saved {r['saved']:.3f}"
            )
    if far:
        ok = all(r["saved"] >= SAVED_TARGET for r in far)
        saved = [r["saved"] for r in far]
        lines.append(
            f"  truth 2 margins past the flip point ({len(far)} cells) — {_verdict(ok)} (saved ≥ {SAVED_TARGET:.0%} "
            f"in every cell): attempts saved median {np.median(saved):.3f} (min {min(saved):.3f}, "
            f"max {max(saved):.3f}); "
            f"right verdict median {np.median([r['right'] for r in far]):.3f}, wrong verdicts max "
            f"{max(r['wrong'] for r in far):.4f}"
        )
        for f in sorted({r["factor"] for r in far}):
            sub = [r for r in far if r["factor"] == f]
            lines.append(
                f"    N = plan × {f:g}: saved median {np.median([r['saved'] for r in sub]):.3f} (min "
                f"{min(r['saved'] for r in sub):.3f}); right verdict median {np.median([r['right'] for r in sub]):.3f} "
                f"(the fixed-n interval at full size decides {np.median([r['fixed_decided'] for r in sub]):.3f})"
            )
        for r in sorted(far, key=lambda r: (r["factor"], r["question"], r["world"], r["pos"])):
            lines.append(
                f"    {_pdescribe(r)} truth {r['pos']:+g} m: saved {r['saved']:.3f}, right {r['right']:.3f}, "
                f"wrong {r['wrong']:.4f}, stopped early {r['stopped_early_share']:.3f}; fixed-n decides "
                f"{r['fixed_decided']:.3f}"
            )
    wr = [r["width_ratio_median"] for r in rows]
    one = [r["width_ratio_median"] for r in rows if r["question"] in ("at_least", "at_most")]
    two = [r["width_ratio_median"] for r in rows if r["question"] in ("compare", "noninferior")]
    lines.append(
        f"  width cost: the sequence at full size ÷ the fixed-n interval, median over series: median over cells "
        f"{np.median(wr):.3f} (range {min(wr):.3f}–{max(wr):.3f}); one rate {quantile(one, 0.5):.3f}, "
        f"paired {quantile(two, 0.5):.3f}"
    )
    return lines


def recheck_lines(rows: Sequence[dict[str, Any]], what: str) -> list[str]:
    """CP intervals of rechecked cells: families (one-sided misses) or boundary (false confirmations)."""
    lines = []
    if what == "boundary":
        worst = max(r["cp_high"] for r in rows)
        lines.append(
            f"boundary recheck: {len(rows)} cells × {rows[0]['sims']} series — "
            f"{_verdict(worst <= CP_LIMIT and all(r['false_confirmed'] <= FALSE_CONFIRM for r in rows))} "
            f"(rate ≤ {FALSE_CONFIRM}, CP upper ≤ {CP_LIMIT}): max CP upper {worst:.4f}"
        )
        for r in rows:
            lines.append(
                f"  {_bdescribe(r)}: false confirmations {r['false_confirmed']:.4f} "
                f"(CP {r['cp_low']:.4f}–{r['cp_high']:.4f})"
            )
        return lines
    ok = all(r[f"{s}_cp_low"] <= FALSE_CONFIRM for r in rows for s in ("p_true_below_low", "p_true_above_high"))
    top = max(max(r["p_true_below_low_cp_high"], r["p_true_above_high_cp_high"]) for r in rows)
    lines.append(
        f"family recheck: {len(rows)} cells × {rows[0]['sims']} series — {_verdict(ok)} (every one-sided "
        f"miss's CP interval reaches ≤ {FALSE_CONFIRM}); largest CP upper {top:.4f}"
    )
    for r in rows:
        lines.append(
            f"  {r['family']} {describe(r)}: coverage {r['coverage']:.4f}; P(truth < low) {r['p_true_below_low']:.4f} "
            f"[{r['p_true_below_low_cp_low']:.4f}–{r['p_true_below_low_cp_high']:.4f}], P(truth > high) "
            f"{r['p_true_above_high']:.4f} [{r['p_true_above_high_cp_low']:.4f}–{r['p_true_above_high_cp_high']:.4f}]"
        )
    return lines


def add_cp(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        for side in ("p_true_below_low", "p_true_above_high"):
            lo, hi = cp(round(row[side] * row["sims"]), row["sims"])
            row[f"{side}_cp_low"], row[f"{side}_cp_high"] = lo, hi


def plot(families: dict[str, list[dict[str, Any]]], boundary: list[dict[str, Any]], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed"
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    for fam, rows in families.items():
        ys = np.sort([r["worst_one_sided"] for r in rows])[::-1]
        axes[0].plot(np.arange(1, len(ys) + 1), ys, label=fam, lw=1.5)
        rs = np.sort([r["ratio_median"] for r in rows if not math.isnan(r["ratio_median"])])
        axes[1].plot(np.linspace(0, 1, len(rs)), rs, label=fam, lw=1.5)
    axes[0].axhline(MISS_LIMIT, color="black", lw=1, ls="--", label=f"{MISS_LIMIT}")
    axes[0].axhline(0.025, color="grey", lw=1, label="0.025")
    axes[0].set(xscale="log", xlabel="cells, sorted", ylabel="worst one-sided miss", title="new coverage families")
    axes[0].legend(fontsize=8)
    axes[1].axhline(1.0, color="black", lw=1)
    axes[1].set(yscale="log", xlabel="share of cells", ylabel="median width ÷ oracle", title="width ÷ oracle")
    axes[1].legend(fontsize=8)
    for q in QUESTIONS:
        ys = np.sort([r["false_confirmed"] for r in boundary if r["question"] == q])[::-1]
        if len(ys):
            axes[2].plot(np.arange(1, len(ys) + 1), ys, label=q, lw=1.5)
    axes[2].axhline(FALSE_CONFIRM, color="black", lw=1, ls="--", label="0.025")
    axes[2].set(xlabel="cells, sorted", ylabel="false confirmations", title="boundary cells")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot: {path}"
