"""Merge the three judges' votes: majority, spread and whether the panel is split.

Every alternative merge rule (experiments/panel_merge_rule/nodes/) returns the same three fields, because
decide reads only these: majority (A or B), spread (0..1) and split (true hands the decision to tie_break).
"""

from __future__ import annotations

from typing import Any


def aggregate(deepseek: dict[str, Any], qwen: dict[str, Any], llama: dict[str, Any]) -> dict[str, Any]:
    votes = [str(v["winner"]) for v in (deepseek, qwen, llama)]
    a = votes.count("A")
    majority = "A" if a * 2 > len(votes) else "B"
    minority = len(votes) - votes.count(majority)
    spread = round(minority / len(votes), 4)
    return {"majority": majority, "spread": spread, "split": minority > 0}
