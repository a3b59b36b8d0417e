"""Experiments: their typed schema, loading and variant assembly, the loaded workspace, input hashes."""

from __future__ import annotations

from aqven.research.experiments.files import function_file, rubric_file
from aqven.research.experiments.inputs import (
    attempt_inputs_hash,
    manifest_hash,
    plan_manifest,
    series_manifest,
    without_cases,
)
from aqven.research.experiments.loading import human_labels, load_experiments, metric_check, selected_cases
from aqven.research.experiments.schema import (
    BUILTINS,
    MAX_REPEATS,
    BuiltinName,
    CheckSpec,
    Experiment,
    ExperimentSource,
    Question,
    Subject,
    Varies,
    VariesWhat,
)
from aqven.research.experiments.variants import FACTOR_KIND_HINT, VARIANT_KINDS, Assembly, variant_patch
from aqven.research.experiments.workspace import Workspace

__all__ = [
    "BUILTINS",
    "FACTOR_KIND_HINT",
    "MAX_REPEATS",
    "VARIANT_KINDS",
    "Assembly",
    "BuiltinName",
    "CheckSpec",
    "Experiment",
    "ExperimentSource",
    "Question",
    "Subject",
    "Varies",
    "VariesWhat",
    "Workspace",
    "attempt_inputs_hash",
    "function_file",
    "human_labels",
    "load_experiments",
    "manifest_hash",
    "metric_check",
    "plan_manifest",
    "rubric_file",
    "selected_cases",
    "series_manifest",
    "variant_patch",
    "without_cases",
]
