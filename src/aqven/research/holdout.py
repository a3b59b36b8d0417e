"""Held-out cases are never shown one by one: the one place that decides what of them is hidden.

A run or an attempt is held out when it *ran* on the held-out side: the side is stored with it when it is created
(`runs.side`, `attempts.side`), and every surface decides from that, never from today's split, so an edit of
`package:` in aqven.yaml (the split's salt) shows no run of an earlier held-out series. REST
(`server/routes_runs.py`, `server/service.py`), the MCP tools (`server/mcp_server.py`), Studio and its event
streams, the Studio chat tools and the series code (`series_start.py`, `series_end.py`) all ask here:

* a held-out run is not listed (only counted) and reading it, its events or a node is `HOLDOUT_HIDDEN` (403);
* a run stored without a side (written before sides were stored) that ran a named case counts as held out;
* a run of a held-out case is not started (`HOLDOUT_HIDDEN`): held-out cases run only inside a series;
* `NOT_RUNNABLE` problems name held-out cases only by a label (`<held-out case 1>`) and count them;
* the error of a failed series gives the run and case only when its first failing attempt is on dev;
* a look runs its named cases on whichever side they are (the spec), and a look that ran a held-out case is a
  held-out read: it shows its working cases only, and of its held-out attempts nothing that tells how one ended,
  ever (not even once it ended, since a look has no verdict that makes its aggregates public): their counts by
  outcome or status and their spend, tokens and spend curve move only at coarse steps of its held-out attempts
  (`reads_held_out`), and the launch plan and every finding of an experiment on those cases list it as a read;
* while a held-out series runs, everything that tells how one of its attempts ended moves only at its coarse
  steps (every 10% of its attempts, at least 20): its numbers, its counts of attempts and runs by outcome or status
  on every surface, and its spend, tokens and spend curve. The step stores them (`step_record`); surfaces show
  them through `shown_spend`, `shown_attempt_count`, `sealed_run_count` and `SEALED_RUN_SQL`. Once it ended, exact
  figures show, as its verdict does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from aqven.errors import HOLDOUT_HIDDEN, AqvenError
from aqven.project.split import side_of
from aqven.store.db import Database
from aqven.store.runs import RUN_OUTCOME_SQL
from aqven.store.series_records import SeriesRow

HINT = "held-out cases are never shown one by one; run the series on dev to inspect cases"
#: Error codes whose messages AQVEN writes without anything of the case (shown even for a held-out attempt).
PLAIN_MESSAGES = frozenset(
    {
        "PROVIDER_KEY_MISSING",
        "PROVIDER_RATE_LIMITED",
        "MODEL_TIMEOUT",
        "MODEL_STREAM_STALLED",
        "SIMULATOR_MISSING",
        "SERIES_INTERNAL_ERROR",  # written by the series runner without any case (research/series_runner._fail)
    }
)
#: ... and the NOT_RUNNABLE problems whose messages name nodes and files, never the case's content.
PLAIN_PROBLEMS = PLAIN_MESSAGES | {"NODE_OUTPUTS_MISSING", "RANGE_INVALID", "NO_CASES"}
HIDDEN_MESSAGE = "(the message of a held-out attempt is not shown: it may quote the case)"


class HoldoutHidden(AqvenError):
    """Something of a held-out case was asked for one by one."""

    code = HOLDOUT_HIDDEN
    http_status = 403


def run_held_out(side: object, case_name: object) -> bool:
    """True for a run stored as held out, and for a run stored without a side that ran a named case (written
    before sides were stored: it may have been held out). A run without a case (a plain input) is never held out."""
    if side == "holdout":
        return True
    if side == "dev":
        return False
    return isinstance(case_name, str) and bool(case_name)


#: The SQL form of `run_held_out` on the runs table (listings filter with it, so they page and count in SQL).
#: Never NULL (COALESCE): `NOT` of an unknown would leave out a run without a side and a case, which is shown.
HELD_OUT_RUN_SQL = "(COALESCE(side, '') = 'holdout' OR (side IS NULL AND COALESCE(case_name, '') != ''))"


def is_held_out(package: str | None, case_name: object) -> bool:
    """True for a named case on the held-out side of today's split; with no known package every named case
    counts as held out. Only for what has not run yet (a run about to start); a stored run or attempt decides
    from its own side (`run_held_out`)."""
    if not isinstance(case_name, str) or not case_name:
        return False
    return package is None or side_of(package, case_name) == "holdout"


def check_run(run_id: str, side: object, case_name: object) -> None:
    """Raise `HOLDOUT_HIDDEN` when run `run_id` ran on the held-out side (its stored side)."""
    if run_held_out(side, case_name):
        raise HoldoutHidden(
            f"run {run_id} ran a held-out case: its case, inputs, outputs and trace are not shown",
            hint=HINT + "; a series' numbers (GET /api/series/{id}, MCP series_get) count held-out attempts",
        )


def check_case(package: str | None, case_name: object) -> None:
    """Raise `HOLDOUT_HIDDEN` for a run asked for on a held-out case (it would show the case one by one)."""
    if is_held_out(package, case_name):
        raise HoldoutHidden(
            "that case is held out: a run of it alone would show a held-out case",
            hint="run working (dev) cases (GET /api/datasets/{id}, MCP get_dataset, lists them); held-out cases "
            "run only inside a series",
        )


def _replace_names(text: Any, labels: dict[str, str]) -> Any:
    if not isinstance(text, str):
        return text
    for name in sorted(labels, key=len, reverse=True):
        text = text.replace(name, labels[name])
    return text


def hide_problems(
    held_out: Callable[[object], bool], problems: Iterable[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """NOT_RUNNABLE problems (one per case and variant) with each case `held_out` is true for (the side the
    series would run it on) replaced by a label (`<held-out case 1>`) and its message hidden unless AQVEN wrote
    it without the case; and how many held-out cases there were."""
    problems = list(problems)
    hidden = [p["case"] for p in problems if held_out(p.get("case"))]
    labels = {name: f"<held-out case {i}>" for i, name in enumerate(dict.fromkeys(hidden), start=1)}
    if not labels:
        return problems, 0
    out: list[dict[str, Any]] = []
    for p in problems:
        case = p.get("case")
        if isinstance(case, str) and case in labels:
            shown = p.get("code") in PLAIN_PROBLEMS or str(p.get("code", "")).startswith("E_")
            p = {k: _replace_names(v, labels) for k, v in p.items()}
            p["case"] = labels[case]
            if not shown:
                p["message"] = HIDDEN_MESSAGE
        out.append(p)
    return out, len(labels)


def series_error(
    *, code: str | None, message: str | None, run_id: str | None, case: str, side: str, variant: str
) -> dict[str, Any]:
    """The `error` of a failed series from its first failing attempt: its run, case and message only when
    that attempt is on dev (a held-out attempt's message only when AQVEN wrote it without the case)."""
    dev = side == "dev"
    return {
        "code": code,
        "message": message if dev or code in PLAIN_MESSAGES else HIDDEN_MESSAGE,
        "run_id": run_id if dev else None,
        "case": case if dev else None,
        "variant": variant,
    }


def series_error_view(error: Any) -> Any:
    """A stored series `error` as it may be shown: one written before `series_error` existed that came from a
    held-out attempt (no case) loses its run and, unless plain, its message."""
    if not isinstance(error, dict) or error.get("case") is not None:
        return error
    if not (error.get("run_id") or error.get("message")):
        return error
    message = error.get("message") if error.get("code") in PLAIN_MESSAGES else HIDDEN_MESSAGE
    return {**error, "run_id": None, "message": message}


# ---- a held-out series that still runs: what moves only at its coarse steps ----

# While a held-out series runs, its numbers move only at coarse steps: every 10% of its attempts, and never with
# fewer than 20 new attempts, so the change between two reads never belongs to one attempt.
COARSE_PARTS = 10  # a step is a tenth of the attempts ...
COARSE_MIN = 20  # ... and at least 20 attempts
_SEALED_SERIES = "SELECT id FROM series WHERE kind='experiment' AND on_side='holdout' AND ended_at IS NULL"
_LOOKS = "SELECT id FROM series WHERE kind='look'"
#: The SQL condition on the runs table: the run is an attempt of a held-out series that still runs, or a held-out
#: attempt of a look. Counts of runs leave these out and add `sealed_run_count` (as of each one's last step).
SEALED_RUN_SQL = f"COALESCE(series_id IN ({_SEALED_SERIES}) OR (side = 'holdout' AND series_id IN ({_LOOKS})), FALSE)"
#: The same condition on the attempts table (it has `series_id` and `side` too).
SEALED_ATTEMPT_SQL = SEALED_RUN_SQL


def coarse_step(attempts: int) -> int:
    """How many attempts must finish between two refreshes of a held-out series' numbers."""
    return max(COARSE_MIN, -(-attempts // COARSE_PARTS))


def is_sealed(s: SeriesRow) -> bool:
    """A series whose numbers are shown only at coarse steps while it runs: an experiment on held-out cases."""
    return s.kind == "experiment" and s.on == "holdout"


def sealed_now(s: SeriesRow) -> bool:
    """A held-out series that has not ended: only its coarse steps may be shown."""
    return is_sealed(s) and s.ended_at is None


def reads_held_out(s: SeriesRow) -> bool:
    """A look that ran a held-out case: its held-out attempts show only at coarse steps, for good."""
    return s.kind == "look" and any(side != "dev" for side in s.plan.sides.values())


def sealed_side(s: SeriesRow) -> str | None:
    """Which attempts of a series only its coarse steps may show now: "all" (a held-out series that still runs),
    "holdout" (a look's held-out attempts), or None (everything shows)."""
    if sealed_now(s):
        return "all"
    return "holdout" if reads_held_out(s) else None


def held_out_attempts(s: SeriesRow) -> int:
    """How many attempts of a look run on held-out cases (its plan says it, so the count tells nothing)."""
    return sum(side != "dev" for side in s.plan.sides.values()) * len(s.plan.variants) * s.plan.repeats


def step_record(db: Database, series_id: str, side: str | None = None) -> dict[str, Any]:
    """What a coarse step freezes beside the numbers: the series' attempts and runs (on `side` only, when given)
    counted by every column a listing filters them on (as groups with their count `n`)."""
    on_side = "" if side is None else " AND side = ?"
    params = (series_id,) if side is None else (series_id, side)
    with db.reading() as conn:
        attempts = conn.execute(
            "SELECT variant_id, status, NULLIF(outcome, '') AS outcome, SUM(n) AS n FROM series_cells"
            f" WHERE series_id=?{on_side} GROUP BY 1, 2, 3 HAVING SUM(n) > 0",
            params,
        ).fetchall()
        runs = conn.execute(
            f"SELECT flow_id, status, {RUN_OUTCOME_SQL} AS outcome, COUNT(*) AS n FROM runs WHERE series_id=?"
            f"{on_side} GROUP BY 1, 2, 3",
            params,
        ).fetchall()
    return {"attempt_groups": [dict(r) for r in attempts], "run_groups": [dict(r) for r in runs]}


def _count(groups: Iterable[Mapping[str, Any]], filters: Mapping[str, Any]) -> int:
    """The groups' count that match every filter given (None: not filtered)."""
    return sum(int(g["n"]) for g in groups if all(v is None or g.get(k) == v for k, v in filters.items()))


def shown_attempt_count(s: SeriesRow, **filters: str | None) -> int:
    """How many sealed attempts (`sealed_side`) of a series match `filters` (variant_id, status, outcome), as of
    its last coarse step; before the first step every one counts as queued."""
    view = s.sealed_view or {}
    groups = view.get("attempt_groups")
    if groups is None:
        cases = len(s.plan.cases) if sealed_side(s) == "all" else sum(v != "dev" for v in s.plan.sides.values())
        per_variant = cases * s.plan.repeats
        groups = [{"variant_id": v, "status": "queued", "outcome": None, "n": per_variant} for v in s.plan.variants]
    return _count(groups, filters)


def sealed_run_groups(db: Database, series_id: str | None = None) -> list[dict[str, Any]]:
    """The sealed runs (`SEALED_RUN_SQL`) of every series (or of `series_id` only), grouped as of each one's last
    coarse step (flow_id, status, outcome, n)."""
    sealed = f"{_SEALED_SERIES} UNION {_LOOKS}"
    sql = sealed if series_id is None else f"SELECT id FROM ({sealed}) AS sealed WHERE id=?"
    params = () if series_id is None else (series_id,)
    out: list[dict[str, Any]] = []
    rows = db.query(
        f"SELECT id, kind, sealed_view, {db.json_field('plan', 'flow_id')} AS flow_id,"
        " (SELECT COUNT(*) FROM attempts a WHERE a.series_id = series.id AND a.side = 'holdout') AS held"
        f" FROM series WHERE id IN ({sql})",
        params,
    )
    for row in rows:
        view = json.loads(row["sealed_view"]) if row["sealed_view"] else {}
        groups = view.get("run_groups")
        if groups is None and row["kind"] == "look" and row["held"]:
            # Before its first step a look's held-out attempts are counted, as its plan has them, by no status.
            groups = [{"flow_id": row["flow_id"], "status": None, "outcome": None, "n": int(row["held"])}]
        out.extend(groups or [])
    return out


def sealed_run_count(db: Database, *, series_id: str | None = None, **filters: str | None) -> int:
    """How many runs of running held-out series match `filters` (flow_id, status, outcome), as of their steps."""
    return _count(sealed_run_groups(db, series_id), filters)


def shown_spend(
    s: SeriesRow, usd: Decimal, unpriced: int, tokens: int | None, *, working: tuple[Decimal, int] | None = None
) -> tuple[Decimal, int, int | None]:
    """(dollars, unpriced attempts, tokens) of a series as they may be shown: exact, except for its sealed attempts
    (`sealed_side`), whose figures are those of its last coarse step (0 before the first), never rounded: an
    output retry doubles an attempt's cost, so a figure that moved per attempt would tell which one failed. A look
    shows its working attempts' exact spend (`working`: dollars, unpriced) plus its held-out ones' as of the step.
    The cap itself holds on the exact spend (the runner's tally); only what is shown waits for the step."""
    side = sealed_side(s)
    if side is None:
        return usd, unpriced, tokens
    step = (s.sealed_view or {}).get("spend") or {}
    shown_tokens = int(step.get("tokens_used", 0)) if tokens is not None else None
    dollars, priced = Decimal(str(step.get("usd", "0"))), int(step.get("unpriced_attempts", 0))
    if side == "holdout" and working is not None:
        dollars, priced = dollars + working[0], priced + working[1]
    return dollars, priced, shown_tokens


def shown_curve(s: SeriesRow) -> list[dict[str, Any]] | None:
    """The spend curve of a series with sealed attempts: one point per coarse step reached (None: not such a
    series)."""
    if sealed_side(s) is None:
        return None
    return list((s.sealed_view or {}).get("curve") or [])
