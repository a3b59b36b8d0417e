"""The panel's final pick: the majority when the judges agree, the tie-break judge's when they are split."""

from __future__ import annotations

from typing import Any


def decide(aggregate: dict[str, Any], tie_break: dict[str, Any]) -> dict[str, Any]:
    split = bool(aggregate["split"])
    winner = tie_break["winner"] if split else aggregate["majority"]
    return {"winner": winner, "spread": aggregate["spread"], "tie_break_used": split}
