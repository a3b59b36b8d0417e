"""The typed objects that the project's files load into.

Every model forbids unknown keys, so a typo is a diagnostic, not a silently ignored setting.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]*$"
Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=80)]
PROVIDERS = ("openrouter", "openai", "anthropic", "mistral", "groq", "openai-compatible")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# ---- aqven.yaml -----------------------------------------------------------------------------------


class ResearchConfig(Strict):
    spend_cap_usd: Decimal = Decimal("1.00")

    @field_validator("spend_cap_usd", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Any:
        if isinstance(v, float):
            # Money is Decimal: a float in YAML is read through its shortest text, never its binary value.
            return Decimal(repr(v))
        return v

    @field_validator("spend_cap_usd")
    @classmethod
    def _positive(cls, v: Decimal) -> Decimal:
        if v <= 0:
            raise ValueError("spend_cap_usd must be above 0")
        return v


class EngineConfig(Strict):
    provider_retries: Annotated[int, Field(ge=0, le=10)] = 2
    retry_backoff_s: Annotated[float, Field(ge=0, le=60)] = 1.0


class ProjectConfig(Strict):
    package: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    name: str | None = None
    description: str | None = None
    research: ResearchConfig | None = None
    concurrency: Annotated[int, Field(ge=1, le=512)] = 8
    engine: EngineConfig = EngineConfig()


# ---- agents/<id>.yaml -----------------------------------------------------------------------------


class AgentSettings(Strict):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: int | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    stall_timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = None


class AgentSpec(Strict):
    id: str = ""
    model: str
    description: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    settings: AgentSettings = AgentSettings()
    output_mode: Literal["tool", "native", "prompted"] = "tool"
    output_retries: Annotated[int, Field(ge=0, le=10)] = 1
    system_prompt: str | None = None
    simulator: str | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        provider, sep, name = v.partition(":")
        if not sep or not name:
            raise ValueError(f"model must be 'provider:model', for example 'openrouter:openai/gpt-4.1-mini'; got {v!r}")
        if provider not in PROVIDERS:
            raise ValueError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
        return v

    @property
    def provider(self) -> str:
        return self.model.partition(":")[0]

    @property
    def model_name(self) -> str:
        return self.model.partition(":")[2]


# ---- datasets/<id>.yaml ---------------------------------------------------------------------------


class Case(Strict):
    name: Annotated[str, Field(min_length=1, max_length=200)]
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    node_outputs: dict[str, Any] = Field(default_factory=dict)
    expected_output: Any = None
    tags: list[str] = Field(default_factory=list)


class Dataset(Strict):
    id: str = ""
    description: str | None = None
    cases: list[Case]


# ---- flows/<id>/flow.yaml -------------------------------------------------------------------------


class NodeBase(Strict):
    id: Identifier
    description: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)


class LlmNode(NodeBase):
    kind: Literal["llm"]
    agent: Identifier
    prompt: str
    output: Any = "string"


class CodeNode(NodeBase):
    kind: Literal["code"]
    code: str
    output: Any = "any"

    @field_validator("code")
    @classmethod
    def _ref(cls, v: str) -> str:
        if not re.match(r"^[^:]+\.py:[A-Za-z_][A-Za-z0-9_]*$", v):
            raise ValueError(f"code must be 'file.py:function'; got {v!r}")
        return v


class CallNode(NodeBase):
    kind: Literal["call"]
    flow: Identifier


class HumanNode(NodeBase):
    kind: Literal["human"]
    question: str
    output: Any = "string"


class GroupNode(NodeBase):
    kind: Literal["group"]
    nodes: list[Node]
    result: str | None = None


Node = Annotated[LlmNode | CodeNode | CallNode | HumanNode | GroupNode, Field(discriminator="kind")]
GroupNode.model_rebuild()


class FlowSpec(Strict):
    id: str = ""
    description: str | None = None
    input: Any = "any"
    output: Any = "any"
    nodes: Annotated[list[Node], Field(min_length=1)]
    result: str | None = None


def walk_nodes(nodes: list[Node]) -> list[Node]:
    """Every node of a node list, children of groups included, in file order."""
    out: list[Node] = []
    for node in nodes:
        out.append(node)
        if isinstance(node, GroupNode):
            out.extend(walk_nodes(node.nodes))
    return out
