"""The contract between a project's simulators and the engine."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class SimRequest:
    agent_id: str
    model: str  # the real model it stands in for, "provider:model"
    node_id: str
    prompt: str  # the rendered prompt text
    inputs: dict[str, Any]  # the node's bound inputs
    output_schema: dict[str, Any]
    seed: int  # differs per attempt, node and retry; same for paired variants of one case/repeat
    case_name: str | None = None
    retry: int = 0

    def rng(self) -> random.Random:
        return random.Random(self.seed)


@dataclass
class SimReply:
    output: Any = None  # structured output matching output_schema (or a str for string outputs)
    kind: Literal["ok", "refusal", "invalid_json", "schema_mismatch"] = "ok"
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0  # the engine sleeps latency_s * AQVEN_SIM_LATENCY_SCALE
    text: str | None = None  # raw text for refusal/invalid_json
