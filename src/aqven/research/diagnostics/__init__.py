"""`aqven check` for research files: experiments, their cases, and findings."""

from __future__ import annotations

from aqven.research.diagnostics.cases import CASE_CODES
from aqven.research.diagnostics.experiments import check_experiment
from aqven.research.diagnostics.workspace import check_workspace

__all__ = ["CASE_CODES", "check_experiment", "check_workspace"]
