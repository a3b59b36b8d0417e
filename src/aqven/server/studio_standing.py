"""What each experiment stands on, first: its newest held-out finding that verifies, with its interval, how many
cases, when, whether its files changed since, and one line of cost per variant ("mistral: not worse, 78% cheaper").

Research rows and the Experiment page lead with this; explorations come after. Only findings that verify here
stand (`research/findings/verify.py`): a made-up or unverifiable finding never heads a page.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from aqven.errors import AqvenError
from aqven.project.money import shown_usd
from aqven.research.findings.verify import verified_findings
from aqven.research.stats.questions import QUESTION_KINDS
from aqven.server.deps import service_of
from aqven.server.routes_studio import freshness
from aqven.server.service import ProjectService
from aqven.store.series_tally import read_tally

router = APIRouter(tags=["studio"])
_VERDICTS = ("confirmed", "refuted", "inconclusive")


class VariantCost(BaseModel):
    variant: str
    spend_usd: str
    line: str  # "mistral: not worse, 78% cheaper" (or "gpt: the baseline, $1.69")


class Standing(BaseModel):
    experiment_id: str
    series_id: str
    file: str
    verdict: str
    text: str
    estimate: float | None
    low: float | None
    high: float | None
    level: float | None
    cases: int | None
    ended_at: str | None
    simulated: bool
    fresh: bool
    changed: list[str]
    costs: list[VariantCost]


def _deciding(data: dict[str, Any]) -> dict[str, Any]:
    """The interval a verdict stands on: the (first) paired difference, else the first variant's rate."""
    comparisons = data.get("comparisons") or []
    if comparisons and isinstance(comparisons[0], dict):
        first: dict[str, Any] = comparisons[0]
        return first
    cells = data.get("cells") or []
    return cells[0] if cells and isinstance(cells[0], dict) else {}


def _costs(svc: ProjectService, data: dict[str, Any]) -> list[VariantCost]:
    """Each variant's spend in the series, and for a paired question each variant's verdict and saving against the
    baseline in a few words."""
    try:
        tally = read_tally(svc.db, str(data["series_id"]))
    except (AqvenError, KeyError):
        return []
    question = data.get("question") or {}
    spec = QUESTION_KINDS.get(str(question.get("kind")))
    baseline = question.get("baseline")
    verdict = (data.get("verdict") or {}).get("verdict")
    words = spec.short[_VERDICTS.index(verdict)] if spec and verdict in _VERDICTS else ""
    spends = {name: t.spend for name, t in tally.variants.items()}
    base = spends.get(baseline) if baseline else None
    out = []
    for name, spend in spends.items():
        if spec and spec.paired and base is not None and name != baseline:
            change = ""
            if base > 0:
                ratio = (spend - base) / base
                pct = abs(ratio * 100).quantize(Decimal("1"))
                change = f", {pct}% {'cheaper' if ratio < 0 else 'dearer'}" if pct else ", the same cost"
            line = f"{name}: {words}{change}"
        elif spec and spec.paired and name == baseline:
            line = f"{name}: the baseline, {shown_usd(spend)}"
        else:
            line = f"{name}: {words}, {shown_usd(spend)}" if words else f"{name}: {shown_usd(spend)}"
        out.append(VariantCost(variant=name, spend_usd=str(spend), line=line))
    return out


def standing(svc: ProjectService) -> list[Standing]:
    """Each experiment's newest finding that verifies here (none for an experiment without one)."""
    newest: dict[str, tuple[str, Any, dict[str, Any]]] = {}
    for path, data, result in verified_findings(svc.root, svc.db):
        if not data or not result.verifies:
            continue
        exp = str(data.get("experiment_id"))
        ended = str((data.get("scope") or {}).get("ended_at") or "")
        if exp not in newest or ended > newest[exp][0]:
            newest[exp] = (ended, path, data)
    out = []
    for exp, (_ended, path, data) in sorted(newest.items()):
        scope = data.get("scope") or {}
        deciding = _deciding(data)
        fresh = freshness(svc, data)
        out.append(
            Standing(
                experiment_id=exp,
                series_id=str(data.get("series_id")),
                file=str(path.relative_to(svc.root)),
                verdict=str((data.get("verdict") or {}).get("verdict")),
                text=str((data.get("verdict") or {}).get("text")),
                estimate=deciding.get("estimate"),
                low=deciding.get("low"),
                high=deciding.get("high"),
                level=deciding.get("level", 0.95),
                cases=scope.get("cases"),
                ended_at=scope.get("ended_at"),
                simulated=bool(scope.get("simulated")),
                fresh=bool(fresh.get("matches")),
                changed=[*fresh.get("changed", []), *fresh.get("added", []), *fresh.get("removed", [])],
                costs=_costs(svc, data),
            )
        )
    return out


@router.get("/api/studio/standing")
def get_standing(svc: ProjectService = Depends(service_of)) -> list[Standing]:
    """Each experiment's standing finding, verdict first (Research and the Experiment page lead with it)."""
    return standing(svc)
