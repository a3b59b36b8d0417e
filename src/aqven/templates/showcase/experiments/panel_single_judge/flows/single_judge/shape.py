"""Shape one judge's pick like judge_panel's output: {winner, spread, tie_break_used}."""

from __future__ import annotations

from typing import Any


def shape(judge: dict[str, Any]) -> dict[str, Any]:
    # One judge has no one to disagree with: the spread is 0 and no tie-break was needed.
    return {"winner": judge["winner"], "spread": 0.0, "tie_break_used": False}
