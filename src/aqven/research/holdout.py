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
* the error of a failed series gives the run and case only when its first failing attempt is on dev.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from aqven.errors import HOLDOUT_HIDDEN, AqvenError
from aqven.project.split import side_of

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
