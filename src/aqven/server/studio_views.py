"""Studio's decision reads: an attempt's checks, a series' case grid, the diff of two series, latency and cost.

Plain functions over the project database returning typed models; `routes_studio.py` only registers them.
Held-out cases stay hidden by the one rule (`research/holdout.py`): an attempt is shown only for a run that
`visible_run` lets through, the grid and the diff read working (dev) attempts only, and the distributions of a
held-out series wait until it ended (while it runs its numbers move only at coarse steps, see `series_view`).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from aqven.errors import AqvenError
from aqven.research.experiments.inputs import without_cases
from aqven.research.holdout import reads_held_out, sealed_now
from aqven.research.stats.two_counts import LEVEL, change_p, least_p
from aqven.server.deps import service_of
from aqven.server.operations.finish import (  # what finishing costs: an operation (the chat's tool asks it too)
    FinishEstimate,
    finish,
)
from aqven.server.service import ProjectService
from aqven.store.series_records import SeriesRow
from aqven.store.series_tally import COUNTED

MAX_GRID_CASES = 500  # a grid page; a working side larger than this pages
QUOTE = re.compile(r"[\"“]([^\"”]{3,400})[\"”]")  # the text a check quotes from the output it failed


class CheckView(BaseModel):
    """One check's result on one attempt, as the check wrote it."""

    check_id: str
    passed: bool | None
    score: float | None
    reason: str
    error: dict[str, str] | None = None
    quotes: list[str]  # passages of the output the reason quotes: Studio highlights them in the reply


class AttemptView(BaseModel):
    """The attempt of a series a run was: what the checks said of it, and what the case expected."""

    series_id: str
    experiment_id: str | None
    variant_id: str
    case_name: str
    dataset_id: str
    repeat: int
    status: str
    outcome: str | None
    counted: bool
    error_code: str | None
    error_message: str | None
    checks: list[CheckView]
    expected_output: Any = None


class AttemptOut(BaseModel):
    attempt: AttemptView | None  # None for a run started by hand


def attempt_of_run(svc: ProjectService, run_id: str) -> AttemptOut:
    """The attempt a run was (HOLDOUT_HIDDEN for a run of a held-out case, like its trace)."""
    record = svc.visible_run(run_id)
    if not record.series_id:
        return AttemptOut(attempt=None)
    row = svc.db.query_one(
        "SELECT a.series_id, s.experiment_id, a.variant_id, a.case_name, a.dataset_id, a.rep, a.status, a.outcome,"
        " a.error_code, a.error_message, a.checks, a.side FROM attempts a JOIN series s ON s.id = a.series_id"
        " WHERE a.series_id=? AND a.run_id=?",
        (record.series_id, run_id),
    )
    if row is None or row["side"] != "dev":  # a re-run's old run, or (never shown) a held-out attempt
        return AttemptOut(attempt=None)
    checks = [
        CheckView(
            check_id=str(c.get("check_id")),
            passed=c.get("passed"),
            score=c.get("score"),
            reason=str(c.get("reason") or ""),
            error=c.get("error"),
            quotes=quotes_of(c),
        )
        for c in _json_list(row["checks"])
    ]
    expected = None
    try:
        expected = svc.find_case(row["case_name"], row["dataset_id"])[1].expected_output
    except AqvenError:  # the case left the dataset since: the attempt still shows what its checks said
        expected = None
    return AttemptOut(
        attempt=AttemptView(
            series_id=row["series_id"],
            experiment_id=row["experiment_id"],
            variant_id=row["variant_id"],
            case_name=row["case_name"],
            dataset_id=row["dataset_id"],
            repeat=row["rep"],
            status=row["status"],
            outcome=row["outcome"],
            counted=row["outcome"] in COUNTED,
            error_code=row["error_code"],
            error_message=row["error_message"],
            checks=checks,
            expected_output=expected,
        )
    )


def quotes_of(check: dict[str, Any]) -> list[str]:
    """The passages of the output a failed check's reason quotes (none for a check that passed)."""
    return QUOTE.findall(str(check.get("reason") or "")) if check.get("passed") is False else []


def _json_list(raw: str | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    data = json.loads(raw)
    return [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []


# ---- the case grid (dev only) ----

SNIPPET = 240  # characters of an output a cell shows


class OutputSample(BaseModel):
    """A short window of one attempt's output (a failing attempt's first), with the passages its failed checks quote:
    Studio highlights them as the attempt view does."""

    run_id: str
    repeat: int
    outcome: str | None
    error_code: str | None
    field: str | None  # the output's field the text is from (None: the output is one text, or shown as JSON)
    text: str  # whitespace folded to single spaces; empty when the run gave no output (a model failure)
    cut_before: bool
    cut_after: bool
    quotes: list[str]  # whitespace folded as in `text`


class GridCell(BaseModel):
    attempts: int
    done: int
    counted: int
    passes: float
    fails: int  # failed checks and model failures
    failed_checks: list[str]
    run_ids: list[str]  # the failing attempts' runs first, at most 6
    sample: OutputSample | None = None  # one attempt's output, a failing one first (None before any ran)


class GridRow(BaseModel):
    case: str
    failing: bool
    cells: dict[str, GridCell]


class CaseGrid(BaseModel):
    series_id: str
    variants: list[str]
    rows: list[GridRow]
    total: int  # working cases that match (all, or only those with a failure)
    failing: int  # working cases with at least one failure
    held_out_cases: int  # counted, never listed
    page: int
    pages: int


def _pick(r: Any) -> dict[str, Any]:
    return {
        "run_id": r["run_id"],
        "repeat": r["rep"],
        "outcome": r["outcome"],
        "error_code": r["error_code"],
        "quotes": [q for c in _json_list(r["checks"]) for q in quotes_of(c)],
    }


def _dev_cells(svc: ProjectService, series_id: str) -> dict[str, dict[str, dict[str, Any]]]:
    """case -> variant -> tally of its working attempts (and the attempt whose output the cell shows: `pick`)."""
    rows = svc.db.query(
        "SELECT case_name, variant_id, rep, status, outcome, value, checks, run_id, error_code FROM attempts"
        " WHERE series_id=? AND side='dev' ORDER BY idx",
        (series_id,),
    )
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        cell = out.setdefault(r["case_name"], {}).setdefault(
            r["variant_id"],
            {
                "attempts": 0,
                "done": 0,
                "counted": 0,
                "passes": 0.0,
                "fails": 0,
                "failed": set(),
                "bad": [],
                "ok": [],
                "pick": None,
            },
        )
        cell["attempts"] += 1
        if r["status"] == "done":
            cell["done"] += 1
        if r["status"] == "done" and r["outcome"] in COUNTED:
            cell["counted"] += 1
            cell["passes"] += float(r["value"] or 0.0)
        if r["outcome"] in ("fail", "model_failure"):
            cell["fails"] += 1
            cell["failed"].update(c.get("check_id") for c in _json_list(r["checks"]) if c.get("passed") is False)
        if r["run_id"]:
            bad = r["outcome"] not in (None, "pass")
            (cell["bad"] if bad else cell["ok"]).append(r["run_id"])
            pick = cell["pick"]
            if r["status"] == "done" and (pick is None or (bad and pick["outcome"] in (None, "pass"))):
                cell["pick"] = _pick(r)  # the first failing attempt, else the first that ended
    return out


def _fold(text: str) -> str:
    return " ".join(text.split())


def output_snippet(
    output: Any, quotes: list[str], width: int = SNIPPET
) -> tuple[str | None, str, bool, bool, list[str]]:
    """(field, text, cut before, cut after, quotes in it): a window of `output` about `width` characters long around
    the first passage a failed check quotes, else its start; from the text field that holds a quote, else the
    longest text field, else the output as JSON."""
    folded = [q for q in dict.fromkeys(_fold(q) for q in quotes) if len(q) >= 3]
    if output is None:
        return None, "", False, False, []
    if isinstance(output, str):
        texts: list[tuple[str | None, str]] = [(None, output)]
    elif isinstance(output, dict):
        texts = [(str(k), v) for k, v in output.items() if isinstance(v, str) and v.strip()]
    else:
        texts = []
    if not texts:
        texts = [(None, json.dumps(output, ensure_ascii=False))]
    texts = [(k, _fold(t)) for k, t in texts]
    quoted = [(k, t) for k, t in texts if any(q in t for q in folded)]
    field, text = quoted[0] if quoted else max(texts, key=lambda kt: len(kt[1]))
    at = min((text.find(q) for q in folded if q in text), default=-1)
    if at < 0:
        start, end = 0, width
    else:
        first = next(q for q in folded if text.find(q) == at)
        start = max(0, at - width // 4)
        end = max(start + width, at + len(first))
        if start and end > len(text):  # near the end: show a whole window
            start = max(0, len(text) - max(width, end - start))
    end = min(end, len(text))
    window = text[start:end]
    return field, window, start > 0, end < len(text), [q for q in folded if q in window]


def _samples(svc: ProjectService, picks: list[dict[str, Any]]) -> dict[str, OutputSample]:
    """run id -> the sample of its output, for the picked attempts (read in one query per 500 runs)."""
    outputs: dict[str, Any] = {}
    ids = list(dict.fromkeys(p["run_id"] for p in picks))
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for r in svc.db.query(f"SELECT id, output FROM runs WHERE id IN ({marks})", tuple(chunk)):
            outputs[r["id"]] = json.loads(r["output"]) if r["output"] else None
    out = {}
    for p in picks:
        field, text, before, after, quotes = output_snippet(outputs.get(p["run_id"]), p["quotes"])
        out[p["run_id"]] = OutputSample(
            run_id=p["run_id"],
            repeat=p["repeat"],
            outcome=p["outcome"],
            error_code=p["error_code"],
            field=field,
            text=text,
            cut_before=before,
            cut_after=after,
            quotes=quotes,
        )
    return out


def case_grid(
    svc: ProjectService, series_id: str, *, failures_only: bool = False, page: int = 1, per_page: int = 100
) -> CaseGrid:
    """Working cases × variants, each cell's tally and a snippet of one attempt's output, failing cases first."""
    s = svc.series.store.get(series_id)
    cells = _dev_cells(svc, series_id)
    dev = [c for c in s.plan.cases if s.plan.sides.get(c) == "dev"]
    rows = []
    for case in dev:
        by_variant = cells.get(case, {})
        grid = {
            v: GridCell(
                attempts=c["attempts"],
                done=c["done"],
                counted=c["counted"],
                passes=round(c["passes"], 6),
                fails=c["fails"],
                failed_checks=sorted(x for x in c["failed"] if x),
                run_ids=(c["bad"] + c["ok"])[:6],
            )
            for v, c in by_variant.items()
        }
        rows.append(GridRow(case=case, failing=any(c.fails for c in grid.values()), cells=grid))
    failing = sum(r.failing for r in rows)
    if failures_only:
        rows = [r for r in rows if r.failing]
    rows.sort(key=lambda r: not r.failing)  # stable: failing first, then the plan's order
    per_page = min(per_page, MAX_GRID_CASES)
    pages = max(1, -(-len(rows) // per_page))
    shown = rows[(page - 1) * per_page : page * per_page]
    picks = {
        (r.case, v): cells[r.case][v]["pick"] for r in shown for v in r.cells if cells[r.case][v]["pick"] is not None
    }
    samples = _samples(svc, list(picks.values()))
    for (case, v), pick in picks.items():
        row = next(r for r in shown if r.case == case)
        row.cells[v].sample = samples[pick["run_id"]]
    return CaseGrid(
        series_id=series_id,
        variants=list(s.plan.variants),
        rows=shown,
        total=len(rows),
        failing=failing,
        held_out_cases=len(s.plan.cases) - len(dev),
        page=page,
        pages=pages,
    )


# ---- two series of one experiment, case by case (dev only) ----

Change = Literal["better", "worse", "within_chance", "same", "only_in_a", "only_in_b"]
MAX_DIFF_ROWS = 500


class DiffRow(BaseModel):
    case: str
    variant: str
    a_rate: float | None
    b_rate: float | None
    a_counted: int
    b_counted: int
    a_passes: float
    b_passes: float
    p_value: float | None  # Fisher's exact test of the two cells' counts (two-sided); None: one cell is empty
    change: Change  # better or worse only beyond chance (p < 0.05); a smaller move is within_chance
    a_sample: OutputSample | None = None
    b_sample: OutputSample | None = None


class InputsChange(BaseModel):
    """Whether the project's files a series runs on changed between two series (their manifests at their start)."""

    same: bool  # the same files, the same cases, and neither series saw a file change while it ran
    changed: list[str]
    added: list[str]
    removed: list[str]
    cases_differ: bool  # the series ran on different working cases (or their content changed)
    changed_during: list[str]  # the series whose attempts ran on more than one version of the files


class SeriesDiff(BaseModel):
    a: str
    b: str
    experiment_id: str | None
    counts: dict[str, int]
    rows: list[DiffRow]  # worse, better, within chance, in one series only, same; a page of them
    total: int
    page: int
    pages: int
    level: float  # a change is beyond chance below this p-value (two-sided)
    repeats: list[int]  # the repeats per cell of a and of b
    least_p: float | None  # the smallest p-value a change of one cell can reach at those repeats
    inputs: InputsChange


def inputs_change(svc: ProjectService, a: SeriesRow, b: SeriesRow) -> InputsChange:
    """Compare the manifests the two series started on, and each series' attempts' hashes with its own."""
    fa, fb = without_cases(a.inputs), without_cases(b.inputs)
    changed = sorted(f for f in fa if f in fb and fa[f] != fb[f])
    removed = sorted(f for f in fa if f not in fb)
    added = sorted(f for f in fb if f not in fa)
    cases_differ = {k: v for k, v in a.inputs.items() if k not in fa} != {
        k: v for k, v in b.inputs.items() if k not in fb
    }
    during = []
    for s in (a, b):
        row = svc.db.query_one(
            "SELECT COUNT(DISTINCT inputs_hash) AS n, SUM(CASE WHEN inputs_hash != ? THEN 1 ELSE 0 END) AS other"
            " FROM attempts WHERE series_id=? AND inputs_hash IS NOT NULL",
            (s.inputs_hash, s.id),
        )
        if row is not None and ((row["n"] or 0) > 1 or (row["other"] or 0) > 0):
            during.append(s.id)
    same = not (changed or added or removed or cases_differ or during)
    return InputsChange(
        same=same,
        changed=changed,
        added=added,
        removed=removed,
        cases_differ=cases_differ,
        changed_during=during,
    )


def series_diff(svc: ProjectService, a: str, b: str, *, page: int = 1, per_page: int = 100) -> SeriesDiff:
    """Per working case and variant: the pass rate in series `a` and in series `b`, whether the move is beyond
    chance at their repeats (Fisher's exact test), a snippet of one output of each, and whether the files changed."""
    sa, sb = svc.series.store.get(a), svc.series.store.get(b)
    if sa.experiment_id is None or sa.experiment_id != sb.experiment_id:
        raise AqvenError(
            f"series {a} and {b} are not of one experiment",
            code="SERIES_NOT_COMPARABLE",
            hint="compare two series of the same experiment (its series are listed on the experiment page)",
            http_status=422,
        )
    ca, cb = _dev_cells(svc, a), _dev_cells(svc, b)
    rows = []
    picks: dict[tuple[str, str], tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
    least: float | None = None
    for case in sorted(set(ca) | set(cb)):
        for v in sorted(set(ca.get(case, {})) | set(cb.get(case, {}))):
            x, y = ca.get(case, {}).get(v), cb.get(case, {}).get(v)
            ra = x["passes"] / x["counted"] if x and x["counted"] else None
            rb = y["passes"] / y["counted"] if y and y["counted"] else None
            change: Change
            p: float | None = None
            if ra is None and rb is None:
                continue
            if ra is None:
                change = "only_in_b"
            elif rb is None:
                change = "only_in_a"
            else:
                assert x is not None and y is not None
                p = change_p(round(x["passes"]), x["counted"], round(y["passes"]), y["counted"])
                floor = least_p(x["counted"], y["counted"])
                least = floor if least is None else min(least, floor)
                if abs(rb - ra) <= 1e-9:
                    change = "same"
                elif p >= LEVEL:
                    change = "within_chance"
                else:
                    change = "better" if rb > ra else "worse"
            picks[(case, v)] = (x["pick"] if x else None, y["pick"] if y else None)
            rows.append(
                DiffRow(
                    case=case,
                    variant=v,
                    a_rate=None if ra is None else round(ra, 6),
                    b_rate=None if rb is None else round(rb, 6),
                    a_counted=x["counted"] if x else 0,
                    b_counted=y["counted"] if y else 0,
                    a_passes=round(x["passes"], 6) if x else 0.0,
                    b_passes=round(y["passes"], 6) if y else 0.0,
                    p_value=None if p is None else round(p, 6),
                    change=change,
                )
            )
    order = {"worse": 0, "better": 1, "within_chance": 2, "only_in_a": 3, "only_in_b": 4, "same": 5}
    rows.sort(key=lambda r: (order[r.change], r.p_value if r.p_value is not None else 1.0))
    counts = {k: sum(r.change == k for r in rows) for k in order}
    per_page = min(per_page, MAX_DIFF_ROWS)
    pages = max(1, -(-len(rows) // per_page))
    shown = rows[(page - 1) * per_page : page * per_page]
    wanted = [pk for r in shown for pk in picks[(r.case, r.variant)] if pk is not None]
    samples = _samples(svc, wanted)
    for r in shown:
        pa, pb = picks[(r.case, r.variant)]
        r.a_sample = samples[pa["run_id"]] if pa else None
        r.b_sample = samples[pb["run_id"]] if pb else None
    return SeriesDiff(
        a=a,
        b=b,
        experiment_id=sa.experiment_id,
        counts=counts,
        rows=shown,
        total=len(rows),
        page=page,
        pages=pages,
        level=LEVEL,
        repeats=[sa.plan.repeats, sb.plan.repeats],
        least_p=None if least is None else round(least, 6),
        inputs=inputs_change(svc, sa, sb),
    )


# ---- latency and cost per attempt ----


class Spread(BaseModel):
    n: int
    p50: float | None
    p95: float | None


class VariantDistribution(BaseModel):
    variant: str
    latency_ms: Spread
    cost_usd: Spread  # dollars as numbers here: a percentile for display, not an amount to add up


class Distributions(BaseModel):
    series_id: str
    variants: list[VariantDistribution]
    sealed: bool  # a held-out series still running: shown once it ended


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def distributions(svc: ProjectService, series_id: str) -> Distributions:
    s = svc.series.store.get(series_id)
    if sealed_now(s):
        return Distributions(series_id=series_id, variants=[], sealed=True)
    # A look shows its working attempts only: a held-out one's latency or cost tells how it went.
    working = " AND side='dev'" if reads_held_out(s) else ""
    rows = svc.db.query(
        f"SELECT variant_id, cost_usd, started_at, ended_at FROM attempts WHERE series_id=? AND status='done'{working}",
        (series_id,),
    )
    lat: dict[str, list[float]] = {v: [] for v in s.plan.variants}
    cost: dict[str, list[float]] = {v: [] for v in s.plan.variants}
    for r in rows:
        if r["started_at"] and r["ended_at"]:
            ms = (datetime.fromisoformat(r["ended_at"]) - datetime.fromisoformat(r["started_at"])).total_seconds()
            lat.setdefault(r["variant_id"], []).append(ms * 1000)
        if r["cost_usd"] is not None:
            cost.setdefault(r["variant_id"], []).append(float(Decimal(r["cost_usd"])))

    def spread(xs: list[float]) -> Spread:
        return Spread(n=len(xs), p50=percentile(xs, 0.5), p95=percentile(xs, 0.95))

    return Distributions(
        series_id=series_id,
        variants=[VariantDistribution(variant=v, latency_ms=spread(lat[v]), cost_usd=spread(cost[v])) for v in lat],
        sealed=False,
    )


# ---- routes (included by routes_studio) ----

router = APIRouter(tags=["studio"])


@router.get("/api/studio/runs/{run_id}/attempt")
def get_attempt(run_id: str, svc: ProjectService = Depends(service_of)) -> AttemptOut:
    """The attempt of a series this run was: each check's result and reason, and the expected output."""
    return attempt_of_run(svc, run_id)


@router.get("/api/studio/series/{series_id}/grid")
def get_grid(
    series_id: str,
    failures_only: bool = False,
    page: int = Query(1, ge=1, le=1_000_000),
    per_page: int = Query(100, ge=1, le=MAX_GRID_CASES),
    svc: ProjectService = Depends(service_of),
) -> CaseGrid:
    """Working cases × variants with each cell's tally (held-out cases only counted)."""
    return case_grid(svc, series_id, failures_only=failures_only, page=page, per_page=per_page)


@router.get("/api/studio/series/{series_id}/diff/{other_id}")
def get_diff(
    series_id: str,
    other_id: str,
    page: int = Query(1, ge=1, le=1_000_000),
    per_page: int = Query(100, ge=1, le=MAX_DIFF_ROWS),
    svc: ProjectService = Depends(service_of),
) -> SeriesDiff:
    """Two series of one experiment, working case by case: better or worse beyond chance, within chance, same;
    both outputs; whether the files changed."""
    return series_diff(svc, series_id, other_id, page=page, per_page=per_page)


@router.get("/api/studio/series/{series_id}/distributions")
def get_distributions(series_id: str, svc: ProjectService = Depends(service_of)) -> Distributions:
    """Latency and cost per attempt, p50 and p95 per variant."""
    return distributions(svc, series_id)


@router.get("/api/studio/series/{series_id}/finish")
async def get_finish(series_id: str, svc: ProjectService = Depends(service_of)) -> FinishEstimate:
    """What finishing would cost at the cost per attempt so far, a cap that lets it finish, what the default
    (double) cap buys, and what finishing can decide."""
    return await finish(svc, series_id)
