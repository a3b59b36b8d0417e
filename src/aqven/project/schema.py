"""The typed objects that the project's files load into.

Every model forbids unknown keys, so a typo is a diagnostic, not a silently ignored setting.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from aqven.project.money import cap_field
from aqven.project.providers import PROVIDERS
from aqven.project.pycode import parse_ref

ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]*$"
Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=80)]
RESERVED_NODE_IDS = ("input", "context")  # `$input.x` and `$context.x` are not node outputs


PACKAGE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"  # a Python-style name: it salts the dev/holdout split


def is_package_name(text: str) -> bool:
    return bool(re.match(PACKAGE_PATTERN, text))


def is_identifier(text: str) -> bool:
    return bool(re.match(ID_PATTERN, text)) and len(text) <= 80


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# ---- aqven.yaml -----------------------------------------------------------------------------------


class ResearchConfig(Strict):
    # The grammar and ceiling of every cap (aqven.project.money): no cap above it is ever confirmed or approved.
    spend_cap_usd: Decimal = Decimal("1.00")

    @field_validator("spend_cap_usd", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Decimal:
        return cap_field(v)  # a float in YAML is read through its shortest text, never its binary value


class EngineConfig(Strict):
    provider_retries: Annotated[int, Field(ge=0, le=10)] = 2
    retry_backoff_s: Annotated[float, Field(ge=0, le=60)] = 1.0
    # How long calls to a provider that does not answer (connection refused) are held before they fail.
    outage_hold_s: Annotated[float, Field(ge=0, le=3600)] = 120.0


class ProviderLimits(Strict):
    """Requests and tokens per minute a provider allows this project (the scheduler waits to stay within)."""

    rpm: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    tpm: Annotated[int, Field(ge=1, le=1_000_000_000)] | None = None


class ProjectConfig(Strict):
    package: Annotated[str, Field(pattern=PACKAGE_PATTERN)]
    name: str | None = None
    description: str | None = None
    research: ResearchConfig | None = None
    concurrency: Annotated[int, Field(ge=1, le=512)] = 8
    # Processes a series' attempts run in: 1 = in the server itself; more = that many worker processes of the
    # server (research/series/workers.py), the server still deciding what runs.
    workers: Annotated[int, Field(ge=1, le=64)] = 1
    engine: EngineConfig = EngineConfig()
    providers: dict[str, ProviderLimits] = Field(default_factory=dict)  # provider name -> its rpm / tpm limits

    @field_validator("providers")
    @classmethod
    def _known_providers(cls, v: dict[str, ProviderLimits]) -> dict[str, ProviderLimits]:
        unknown = sorted(set(v) - set(PROVIDERS))
        if unknown:
            msg = f"unknown provider {unknown[0]!r} in providers; known: {', '.join(PROVIDERS)}"
            raise PydanticCustomError("unknown_provider", "{msg}", {"msg": msg})
        return v


# ---- agents/<id>.yaml -----------------------------------------------------------------------------


class AgentSettings(Strict):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: int | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    stall_timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = None


PerMillion = Annotated[Decimal, Field(ge=0, le=Decimal("100000"), allow_inf_nan=False)]


class AgentPrice(Strict):
    """A price the agent file declares for a model nothing else prices: USD per million tokens.

    Cache reads and writes cost the input price unless given. The last source before unknown."""

    input: PerMillion
    output: PerMillion
    cache_read: PerMillion | None = None
    cache_write: PerMillion | None = None

    @field_validator("input", "output", "cache_read", "cache_write", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Any:
        return repr(v) if isinstance(v, float) else v  # money is Decimal: a float is read through its text


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
    price: AgentPrice | None = None
    # A named local server (openai-compatible): its usual base_url and the output modes known to fail on it.
    server: Literal["ollama", "vllm", "llama-cpp", "llama-cpp-python", "lm-studio"] | None = None
    # The most tokens (input + output, every call of every attempt) a series may use while this agent is one of
    # its agents: a bound for a model nothing prices, which pauses the series like the spend cap.
    token_cap: Annotated[int, Field(ge=1, le=10_000_000_000)] | None = None

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        provider, sep, name = v.partition(":")
        if not sep or not name.strip() or not provider:
            msg = f"model must be 'provider:model', for example 'openrouter:openai/gpt-4.1-mini'; got {v!r}"
            raise PydanticCustomError("model_format", "{msg}", {"msg": msg})
        if provider not in PROVIDERS:
            msg = f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}"
            raise PydanticCustomError("unknown_provider", "{msg}", {"msg": msg})
        return v

    @field_validator("simulator")
    @classmethod
    def _simulator(cls, v: str | None) -> str | None:
        if v is not None:
            _ref(v, module_form=True)
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


def _ref(v: str, *, module_form: bool = False) -> None:
    try:
        parse_ref(v, module_form=module_form)
    except ValueError as exc:
        raise PydanticCustomError("function_ref", "{msg}", {"msg": str(exc)}) from None


class NodeBase(Strict):
    id: Identifier
    description: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if v in RESERVED_NODE_IDS:
            raise PydanticCustomError(
                "reserved_id", "{msg}", {"msg": f"{v!r} cannot be a node id: ${v}.x reads the flow's {v}"}
            )
        return v


class LlmNode(NodeBase):
    kind: Literal["llm"]
    agent: Identifier
    prompt: str
    output: Any = "string"


class CodeNode(NodeBase):
    kind: Literal["code"]
    code: str
    output: Any = "any"
    # The node runs in a worker thread; past this it fails with CODE_TIMEOUT (an infrastructure error).
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0

    @field_validator("code")
    @classmethod
    def _code_ref(cls, v: str) -> str:
        _ref(v)
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
