"""The variant kinds' table (research/experiments/variants.py): one entry per ``varies.what`` the schema takes."""

from __future__ import annotations

from typing import get_args

from aqven.research.experiments.schema import Varies, VariesWhat
from aqven.research.experiments.variants import VARIANT_KINDS


def test_one_entry_per_varies_what() -> None:
    assert set(VARIANT_KINDS) == set(get_args(VariesWhat)) == set(get_args(Varies.model_fields["what"].annotation))
    assert {k: v.node_kind for k, v in VARIANT_KINDS.items()} == {
        "agent": "llm",
        "prompt": "llm",
        "use": None,
        "flow": "call",
    }
    assert [k for k, v in VARIANT_KINDS.items() if v.same_types] == ["flow"]
