"""A loaded project with its experiments: what the server, `aqven check` and series work on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aqven.engine.variant import FlowPatch
from aqven.errors import EXPERIMENT_NOT_FOUND, NotFoundError
from aqven.project.diagnostics import Diagnostic
from aqven.project.loader import Project, load_project
from aqven.project.schema import Case
from aqven.research.experiments.loading import load_experiments
from aqven.research.experiments.schema import ExperimentSource
from aqven.research.experiments.variants import variant_patch
from aqven.store.records import RunRequest


@dataclass
class Workspace:
    project: Project
    experiments: dict[str, ExperimentSource]
    load_diagnostics: list[Diagnostic] = field(default_factory=list)
    _cases: dict[str, dict[str, Case]] = field(default_factory=dict)
    _case_bytes: dict[tuple[str, str], bytes] = field(default_factory=dict, repr=False)
    # Per series: its inputs' manifest as this loaded workspace has it, and the hash of its code files' last
    # look (research/experiments/inputs.py attempt_inputs_hash).
    inputs_hashes: dict[str, Any] = field(default_factory=dict)
    # What `aqven check` finds in the loaded files alone: (project checks, experiment checks), found once
    # (research/diagnostics/workspace.py loaded_diagnostics).
    checked: tuple[list[Diagnostic], list[Diagnostic]] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def load(cls, root: Path) -> Workspace:
        return cls.of(load_project(root))

    @classmethod
    def of(cls, project: Project) -> Workspace:
        """The workspace of an already loaded project (its experiments are read now)."""
        experiments, diagnostics = load_experiments(project)
        return cls(project=project, experiments=experiments, load_diagnostics=diagnostics)

    def experiment(self, experiment_id: str) -> ExperimentSource:
        exp = self.experiments.get(experiment_id)
        if exp is None:
            raise NotFoundError(
                f"no experiment {experiment_id!r}",
                code=EXPERIMENT_NOT_FOUND,
                hint=f"experiments: {', '.join(sorted(self.experiments)) or 'none'}",
            )
        return exp

    def case(self, dataset_id: str, name: str) -> Case | None:
        """A case by name, through an index built once per loaded workspace."""
        index = self._cases.get(dataset_id)
        if index is None:
            dataset = self.project.datasets.get(dataset_id)
            index = {c.name: c for c in dataset.cases} if dataset else {}
            self._cases[dataset_id] = index
        return index.get(name)

    def case_bytes(self, dataset_id: str, name: str) -> bytes:
        """A case's content as the hash of a series' inputs reads it (research/experiments/inputs.py), serialised
        once per loaded workspace (the cases are immutable once loaded)."""
        key = (dataset_id, name)
        data = self._case_bytes.get(key)
        if data is None:
            case = self.case(dataset_id, name)
            body: Any = None if case is None else case.model_dump(mode="json")
            data = self._case_bytes[key] = json.dumps([name, body], sort_keys=True, default=str).encode()
        return data

    def patch_for(self, request: RunRequest) -> FlowPatch | None:
        """The variant's patch of a series attempt's run (None for a plain run)."""
        if request.experiment_id is None or request.variant_id is None:
            return None
        return variant_patch(self.project, self.experiment(request.experiment_id), request.variant_id)
