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


# A look runs its named cases on whichever side they are: one that ran held-out cases read them too.
_LOOK_READ = (
    "SELECT s.id AS id, s.status AS status, s.ended_at AS ended_at, s.created_at AS created_at, NULL AS verdict,"
    " COUNT(DISTINCT a.case_name) AS cases FROM series s JOIN attempts a ON a.series_id = s.id"
    " WHERE s.kind='look' AND a.side='holdout' AND a.status != 'queued' AND a.case_name IN ({marks})"
    " GROUP BY s.id ORDER BY s.created_at, s.id"
)


def _look_reads(store: SeriesStore, cases: list[str]) -> list[Any]:
    if not cases:
        return []
    return store.db.query(_LOOK_READ.format(marks=",".join("?" * len(cases))), tuple(cases))


def held_out_reads(store: SeriesStore, experiment_id: str, cases: list[str] | None = None) -> list[dict[str, Any]]:
    """The experiment's held-out series that read at least one case, and the looks that ran any of `cases` on the
    held-out side, oldest first: id, kind (`series` or `look`), status, cases read, when, and the verdict once
    decided."""
    out = []
    rows = [(r, "series") for r in store.db.query(_READ, (experiment_id,))]
    rows += [(r, "look") for r in _look_reads(store, cases or [])]
    rows.sort(key=lambda rk: (str(rk[0]["created_at"]), str(rk[0]["id"])))
    for r, kind in rows:
        verdict = json.loads(r["verdict"]) if r["verdict"] else None
        out.append(
            {
                "series_id": r["id"],
                **({"kind": "look"} if kind == "look" else {}),
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
    looked = (
        store.db.query(
            f"SELECT DISTINCT a.case_name AS c FROM attempts a JOIN series s ON a.series_id = s.id WHERE s.kind='look'"
            f" AND a.side='holdout' AND a.status != 'queued' AND a.case_name IN ({','.join('?' * len(cases))})",
            tuple(cases),
        )
        if cases
        else []
    )
    read |= {r["c"] for r in looked}
    return sum(c in read for c in cases)


def rereads(store: SeriesStore, experiment_id: str, cases: list[str], *, exclude: str | None = None) -> dict[str, Any]:
    """What the launch plan of a held-out series says about earlier reads of its cases."""
    earlier = [r for r in held_out_reads(store, experiment_id, cases) if r["series_id"] != exclude]
    read = cases_read_before(store, experiment_id, cases, exclude=exclude) if earlier else 0
    text = None
    if earlier:
        text = (
            f"{_who(earlier)} read {read} of these held-out cases ({len(cases)}): this series reads them again,"
            " and FINDINGS.md lists every read"
        )
    return {"earlier_series": len(earlier), "read_cases": read, "cases": len(cases), "text": text}


def _who(earlier: list[dict[str, Any]]) -> str:
    looks = sum(r.get("kind") == "look" for r in earlier)
    series = len(earlier) - looks
    said = [f"{series} earlier held-out series of this experiment"] if series else []
    said += [f"{looks} look{'' if looks == 1 else 's'} on held-out cases"] if looks else []
    return " and ".join(said)


def planned_cases(ws: Workspace, experiment_id: str, on: str, cases: int | None) -> list[str]:
    """The cases a series of the experiment on `on` asked for `cases` takes (the first N of its half)."""
    spec = ws.experiment(experiment_id).spec
    names = [c.name for c in selected_cases(ws.project, spec) if ws.project.side(c.name) == on]
    return names[:cases] if cases is not None else names
