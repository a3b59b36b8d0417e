"""The launch plan: what a series will run, how precise it can be, and under which cap. No dollars."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from aqven.errors import AqvenError
from aqven.project.local import spend_cap
from aqven.research import launch_math
from aqven.research.experiment_schema import MAX_REPEATS
from aqven.research.experiments import ExperimentSource, selected_cases
from aqven.research.workspace import Workspace

Side = Literal["dev", "holdout"]


def project_cap(ws: Workspace) -> tuple[Decimal, str]:
    research = ws.project.config.research
    return spend_cap(ws.project.root, research.spend_cap_usd if research else None)


def parse_cap(cap_usd: Any) -> Decimal | None:
    if cap_usd is None:
        return None
    try:
        cap = Decimal(str(cap_usd))
    except ArithmeticError:
        cap = Decimal(-1)
    if not cap.is_finite() or cap <= 0:
        raise AqvenError(
            f"cap_usd must be an amount above 0, not {cap_usd!r}",
            code="VALIDATION_ERROR",
            hint='give dollars as a string, e.g. "2.00"',
            http_status=422,
        )
    return cap


def available_cases(ws: Workspace, exp: ExperimentSource, on: Side) -> list[str]:
    """Names of the experiment's cases on `on`, in file order."""
    return [c.name for c in selected_cases(ws.project, exp.spec) if ws.project.side(c.name) == on]


def validate_counts(cases: int | None, repeats: int | None) -> None:
    if cases is not None and cases < 1:
        raise AqvenError(
            "cases must be at least 1", code="VALIDATION_ERROR", hint="ask for 1 or more cases", http_status=422
        )
    if repeats is not None and not 1 <= repeats <= MAX_REPEATS:
        raise AqvenError(
            f"repeats must be between 1 and {MAX_REPEATS}",
            code="VALIDATION_ERROR",
            hint="more repeats of the same cases help less than more cases",
            http_status=422,
        )


def launch_plan(
    ws: Workspace,
    exp: ExperimentSource,
    *,
    on: Side = "dev",
    cases: int | None = None,
    repeats: int | None = None,
    cap_usd: Any = None,
) -> dict[str, Any]:
    validate_counts(cases, repeats)
    spec = exp.spec
    available = available_cases(ws, exp, on)
    n = min(cases, len(available)) if cases is not None else len(available)
    r = repeats if repeats is not None else spec.repeats
    q = spec.question
    k = len(spec.variants)
    pcap, source = project_cap(ws)
    cap = parse_cap(cap_usd)
    plan: dict[str, Any] = {
        "on": on,
        "cases": n,
        "repeats": r,
        "variants": k,
        "attempts": n * r * k,
        "available": len(available),
    }
    paired = q.kind in ("compare", "noninferior")
    if q.kind == "look" or n == 0:
        plan.update({"half_width": None, "margin": q.margin, "recommended": None, "below_recommended": False})
    else:
        p0 = launch_math.planning_rate(q.bound if q.kind == "threshold" else None)
        if paired:
            half = launch_math.expected_half_width_difference(p0, n, r)
        else:
            half = launch_math.expected_half_width(p0, n, r)
        plan["half_width"] = half
        plan["margin"] = q.margin
        if q.margin > 0:
            need = (
                launch_math.recommended_cases_difference(p0, r, q.margin)
                if paired
                else launch_math.recommended_cases(p0, r, q.margin)
            )
            short = need > len(available)
            plan["recommended"] = {
                "cases": need,
                "repeats": r,
                "reason": "short_of_cases" if short else "enough_cases",
                "text": (
                    f"about {need} cases are needed for a half-width within the {q.margin:g} margin, "
                    f"but only {len(available)} are available"
                )
                if short
                else (
                    f"about {need} cases give a half-width within the {q.margin:g} margin; "
                    f"{len(available)} are available"
                ),
            }
            plan["below_recommended"] = n < need
        else:
            plan["recommended"] = None
            plan["below_recommended"] = False
    plan.update(
        {
            "needs_approval": cap is not None and cap > pcap,
            "project_cap_usd": str(pcap),
            "project_cap_source": source,
            "cap_usd": str(cap if cap is not None else pcap),
        }
    )
    return plan
