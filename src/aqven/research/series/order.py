"""The order a series runs in: its cases shuffled by a seed kept with the series, run case by case.

One mechanism serves two needs. A held-out series must not run in an order an agent can derive (from the
dataset file and the documented split), or the change between two snapshots would belong to a known case:
the seed is drawn from the operating system at the start, stored in the series row and never returned by any
API. And a series that may stop early needs the cases in a random order whose every finished prefix is a
random sample: all variants × repeats of one case run together (one case block), so the longest fully
finished prefix of the order is a random sample of the series' cases.

Attempt indexes are given in run order (case block by case block), so the scheduler, which starts the
lowest queued index first, runs the blocks in the drawn order; `SeriesStore.case_order` reads it back.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Sequence
from typing import Any


def draw_seed() -> int:
    """A fresh secret seed (63 bits, so it fits SQLite's INTEGER)."""
    return secrets.randbits(63)


def case_order(cases: Sequence[str], seed: int) -> list[str]:
    """The cases in the order a series with this order seed runs them (a permutation fixed by the seed)."""
    order = list(cases)
    random.Random(seed).shuffle(order)
    return order


def attempt_seed(key: str, case: str, rep: int, salt: int) -> int:
    """The same for every variant of one case and repeat (paired); `salt` is the series' own seed, so another
    series draws other answers, and a series started again with the same seed reproduces its attempts."""
    return int(hashlib.sha256(f"{key}\0{case}\0{rep}\0{salt}".encode()).hexdigest()[:12], 16)


def seed_key(experiment_id: str | None, flow_id: str) -> str:
    """What a series' simulator seeds are drawn for: its experiment, or the flow a look runs."""
    return experiment_id or f"look:{flow_id}"


def attempt_keys(
    order: Sequence[str], *, repeats: int, variants: Sequence[str], start: int, stop: int
) -> list[tuple[int, str, int, str]]:
    """(idx, case, rep, variant) of the attempts start..stop-1 of a series whose cases run in `order`: the
    attempts `attempt_plan` lists, computed from the index alone, so a series' rows can be written in chunks."""
    per_case = repeats * len(variants)
    out: list[tuple[int, str, int, str]] = []
    for idx in range(start, min(stop, per_case * len(order))):
        block, within = divmod(idx, per_case)
        rep, v = divmod(within, len(variants))
        out.append((idx, order[block], rep, variants[v]))
    return out


def attempt_plan(
    cases: Sequence[str],
    *,
    order_seed: int,
    repeats: int,
    variants: Sequence[str],
    seed_of: Any,
) -> list[dict[str, Any]]:
    """(idx, case, rep, variant, seed) of every attempt, idx in run order: case block by case block, and within
    a block repeat by repeat, every variant of a repeat side by side (paired: `seed_of(case, rep)` is the same
    for every variant)."""
    out: list[dict[str, Any]] = []
    for case in case_order(cases, order_seed):
        for rep in range(repeats):
            seed = seed_of(case, rep)
            for variant in variants:
                out.append({"idx": len(out), "case_name": case, "rep": rep, "variant_id": variant, "seed": seed})
    return out
