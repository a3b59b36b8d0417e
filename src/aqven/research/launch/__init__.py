"""Launch plans: what a series will run, how precise it can be, under which cap."""

from __future__ import annotations

from aqven.research.launch.caps import check_ceiling, confirm_project_cap, confirmed_project_cap, parse_cap
from aqven.research.launch.history import DevEstimates, dev_estimates, estimates_from_cells, intra_case_correlation
from aqven.research.launch.plan import Side, launch_plan, project_cap, project_cap_state, validate_counts

__all__ = [
    "DevEstimates",
    "Side",
    "check_ceiling",
    "confirm_project_cap",
    "confirmed_project_cap",
    "dev_estimates",
    "estimates_from_cells",
    "intra_case_correlation",
    "launch_plan",
    "parse_cap",
    "project_cap",
    "project_cap_state",
    "validate_counts",
]
