"""The built-in checks' registry (research/checks/builtin.py): one entry per name the schema accepts."""

from __future__ import annotations

from typing import get_args

import pytest

from aqven.research.checks.builtin import ATTEMPT_BUILTINS, BUILTIN_CHECKS, BUILTIN_PARAMS, builtin
from aqven.research.experiments.schema import BUILTINS, BuiltinName, CheckSpec


def test_registry_is_the_schema_list() -> None:
    assert set(BUILTIN_CHECKS) == set(get_args(BuiltinName)) == set(BUILTINS)
    for name, spec in BUILTIN_CHECKS.items():
        assert spec.name == name
        assert spec.params <= set(CheckSpec.model_fields), f"{name} reads a parameter CheckSpec lacks"
        assert BUILTIN_PARAMS[name] == spec.params


def test_attempt_builtins_are_scored_on_failed_runs() -> None:
    assert {"cost_at_most", "latency_at_most", "no_refusal"} == ATTEMPT_BUILTINS


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        builtin("regex", params={"pattern"})(BUILTIN_CHECKS["regex"].score)
    assert BUILTIN_CHECKS["regex"].params == {"field", "pattern", "case_sensitive"}
