"""Held-out reads: every series of an experiment on held-out cases reads them, and re-reading is visible.

Held-out cases are read once per question. Series on 1, 2, 3, … held-out cases, or a cancelled one, would
otherwise tell each case's result through the aggregates without anyone seeing that it happened. So the
launch plan and `series_start` say how many of the cases a new held-out series takes earlier held-out series
of its experiment already read, and every finding carries the list of the experiment's held-out reads (finished,
cancelled, failed; on how many cases), which FINDINGS.md shows in full.
"""

from __future__ import annotations

import json
from typing import Any

from aqven.research.experiments.loading import selected_cases
from aqven.research.experiments.workspace import Workspace
from aqven.store.series import SeriesStore

# The attempts that read a case: started (a running attempt has read it already), whatever their end.
_READ = (
    "SELECT s.id AS id, s.status AS status, s.ended_at AS ended_at, s.created_at AS created_at, s.verdict AS verdict,"
    " COUNT(DISTINCT a.case_name) AS cases FROM series s JOIN attempts a ON a.series_id = s.id"
    " WHERE s.experiment_id=? AND s.kind='experiment' AND s.on_side='holdout' AND a.status != 'queued'"
    " GROUP BY s.id ORDER BY s.created_at, s.id"
)


def held_out_reads(store: SeriesStore, experiment_id: str) -> list[dict[str, Any]]:
    """The experiment's held-out series that read at least one case, oldest first: id, status, cases read,
    when, and the verdict once decided."""
    out = []
    for r in store.db.query(_READ, (experiment_id,)):
        verdict = json.loads(r["verdict"]) if r["verdict"] else None
        out.append(
            {
                "series_id": r["id"],
                "status": r["status"],
                "cases": int(r["cases"]),
                "started_at": r["created_at"],
                "ended_at": r["ended_at"],
                "verdict": (verdict or {}).get("verdict"),
            }
        )
    return out


def cases_read_before(store: SeriesStore, experiment_id: str, cases: list[str], *, exclude: str | None = None) -> int:
    """How many of `cases` earlier held-out series of the experiment read (ran an attempt on)."""
    rows = store.db.query(
        "SELECT DISTINCT a.case_name AS c FROM attempts a JOIN series s ON a.series_id = s.id WHERE s.experiment_id=?"
        " AND s.kind='experiment' AND s.on_side='holdout' AND a.status != 'queued' AND s.id != ?",
        (experiment_id, exclude or ""),
    )
    read = {r["c"] for r in rows}
    return sum(c in read for c in cases)


def rereads(store: SeriesStore, experiment_id: str, cases: list[str], *, exclude: str | None = None) -> dict[str, Any]:
    """What the launch plan of a held-out series says about earlier reads of its cases."""
    earlier = [r for r in held_out_reads(store, experiment_id) if r["series_id"] != exclude]
    read = cases_read_before(store, experiment_id, cases, exclude=exclude) if earlier else 0
    text = None
    if earlier:
        text = (
            f"{len(earlier)} earlier held-out series of this experiment read {read} of these held-out cases"
            f" ({len(cases)}): this series reads them again, and FINDINGS.md lists every read"
        )
    return {"earlier_series": len(earlier), "read_cases": read, "cases": len(cases), "text": text}


def planned_cases(ws: Workspace, experiment_id: str, on: str, cases: int | None) -> list[str]:
    """The cases a series of the experiment on `on` asked for `cases` takes (the first N of its half)."""
    spec = ws.experiment(experiment_id).spec
    names = [c.name for c in selected_cases(ws.project, spec) if ws.project.side(c.name) == on]
    return names[:cases] if cases is not None else names
