"""Merge rule: the majority of the three judges decides, and the panel is never split.

It takes the slot of `aggregate` in judge_panel and returns the same three fields (majority, spread, split), so
`decide` reads `$aggregate.out` as before; with `split` always false, decide always takes the majority.
"""

from __future__ import annotations

from typing import Any


def majority_only(deepseek: dict[str, Any], qwen: dict[str, Any], llama: dict[str, Any]) -> dict[str, Any]:
    votes = [str(v["winner"]) for v in (deepseek, qwen, llama)]
    majority = "A" if votes.count("A") * 2 > len(votes) else "B"
    minority = len(votes) - votes.count(majority)
    return {"majority": majority, "spread": round(minority / len(votes), 4), "split": False}
