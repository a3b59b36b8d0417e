"""Finding a case by name across a project's datasets."""

from __future__ import annotations

from collections.abc import Mapping

from aqven.errors import CASE_AMBIGUOUS, CASE_NOT_FOUND, DATASET_NOT_FOUND, NotFoundError, RunInputError
from aqven.project.schema import Case, Dataset


def find_case(datasets: Mapping[str, Dataset], case_name: str, dataset_id: str | None) -> tuple[str, Case]:
    """(dataset id, case) for a case name; CASE_NOT_FOUND when none holds it, CASE_AMBIGUOUS when several do."""
    if dataset_id is not None and dataset_id not in datasets:
        raise NotFoundError(
            f"no dataset {dataset_id!r}", code=DATASET_NOT_FOUND, hint=f"datasets: {', '.join(datasets) or 'none'}"
        )
    scope = {dataset_id: datasets[dataset_id]} if dataset_id is not None else dict(datasets)
    hits = [(d_id, c) for d_id, d in scope.items() for c in d.cases if c.name == case_name]
    if not hits:
        raise NotFoundError(
            f"no case {case_name!r}" + (f" in dataset {dataset_id!r}" if dataset_id else ""),
            code=CASE_NOT_FOUND,
            hint="working (dev) cases are listed by GET /api/datasets/{id} (MCP: get_dataset)",
        )
    if len(hits) > 1:
        raise RunInputError(
            f"case {case_name!r} is in several datasets: {', '.join(h[0] for h in hits)}",
            code=CASE_AMBIGUOUS,
            hint="name the dataset (--dataset, or dataset_id)",
        )
    return hits[0]
