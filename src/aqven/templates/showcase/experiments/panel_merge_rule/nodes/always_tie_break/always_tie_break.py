"""Merge rule: the tie-break judge decides every pair.

It takes the slot of `aggregate` in judge_panel and returns the same three fields (majority, spread, split), so
`decide` reads `$aggregate.out` as before; with `split` always true, decide always takes the tie-break's pick.
"""

from __future__ import annotations

from typing import Any


def always_tie_break(deepseek: dict[str, Any], qwen: dict[str, Any], llama: dict[str, Any]) -> dict[str, Any]:
    votes = [str(v["winner"]) for v in (deepseek, qwen, llama)]
    majority = "A" if votes.count("A") * 2 > len(votes) else "B"
    minority = len(votes) - votes.count(majority)
    return {"majority": majority, "spread": round(minority / len(votes), 4), "split": True}
