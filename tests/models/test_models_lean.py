"""The lean call path against pydantic-ai's Agent: the same cases on both paths give the same outcomes.

Three levels: the request parameters each path hands the model; hand-made response sequences (edge shapes
included) through a FunctionModel, compared as outcome and message history; and whole calls through real
HTTP to the fake provider and through a project simulator, compared as CallResult / ModelCallError and,
for HTTP, as the request bodies the server received.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import messages as m
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from aqven.models.call import CallPath, ModelCall, _run_agent, call_model, model_settings
from aqven.models.classify import classify, retry_events
from aqven.models.lean import lean_plan, run_lean
from aqven.models.outcomes import KEY_ENV_VARS, ModelCallError
from aqven.models.outputs import plan_output
from aqven.models.wire import WireState
from aqven.project.schema import AgentSpec
from support.fake_provider import FakeProvider, FakeReply
from support.paths import FIXTURES

pytestmark = pytest.mark.usefixtures("closed_model_clients")


OBJ: dict[str, Any] = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
TEXT: dict[str, Any] = {"type": "string", "maxLength": 20}
LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
PATHS: tuple[CallPath, CallPath] = ("agent", "lean")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in KEY_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(FIXTURES / "openrouter_models.json"))
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")


def spec(**kw: Any) -> AgentSpec:
    data: dict[str, Any] = {
        "id": "writer",
        "model": "openrouter:openai/gpt-4o-mini",
        "system_prompt": "Be brief.",
        "output_retries": 1,
        "settings": {"timeout_s": 2.0},
    }
    data.update(kw)
    return AgentSpec.model_validate(data)


# ---- 1. request parameters ------------------------------------------------------------------------


class Recorder(WrapperModel):
    """Records what each request hands the model."""

    def __init__(self, wrapped: Model) -> None:
        super().__init__(wrapped)
        self.seen: list[tuple[list[m.ModelMessage], ModelSettings | None, ModelRequestParameters]] = []

    async def request(
        self, messages: list[m.ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
    ) -> m.ModelResponse:
        self.seen.append((list(messages), settings, params))
        return await super().request(messages, settings, params)


def scripted(replies: list[Callable[[AgentInfo], m.ModelResponse]]) -> FunctionModel:
    left = list(replies)

    def respond(_messages: list[m.ModelMessage], info: AgentInfo) -> m.ModelResponse:
        return left.pop(0)(info)

    return FunctionModel(respond, model_name="gpt-test")


def tool(args: str) -> Callable[[AgentInfo], m.ModelResponse]:
    return lambda info: m.ModelResponse(parts=[m.ToolCallPart(info.output_tools[0].name, args)])


def text(content: str, finish: Any = None) -> Callable[[AgentInfo], m.ModelResponse]:
    return lambda _info: m.ModelResponse(parts=[m.TextPart(content)], finish_reason=finish)


def shaped(*parts: m.ModelResponsePart, finish: Any = None, **kw: Any) -> Callable[[AgentInfo], m.ModelResponse]:
    return lambda _info: m.ModelResponse(parts=list(parts), finish_reason=finish, **kw)


@pytest.mark.parametrize("schema", [OBJ, TEXT, LIST], ids=["object", "string", "wrapped"])
@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
async def test_the_model_gets_the_same_request_parameters(mode: str, schema: dict[str, Any]) -> None:
    a = spec(output_mode=mode)
    plan = plan_output(schema)
    answer = "hi" if schema is TEXT else json.dumps(plan.wrap({"reply": "hi"} if schema is OBJ else ["x"]))
    reply = tool(answer) if mode == "tool" and schema is not TEXT else text(answer)
    seen = []
    for path in PATHS:
        rec = Recorder(scripted([reply]))
        if path == "agent":
            out = await _run_agent(rec, plan, call_for(a, schema), [])
        else:
            lean = lean_plan(plan, a.output_mode, a.system_prompt)
            out = await run_lean(rec, lean, plan, "Say hi", model_settings(a), 1, [])
        assert plan.validate(plan.unwrap(out)) is None
        [(msgs, settings, params)] = rec.seen
        seen.append((params, settings, [(type(x).__name__, getattr(x, "instructions", None)) for x in msgs]))
    (p_agent, s_agent, m_agent), (p_lean, s_lean, m_lean) = seen
    for name in (
        "output_mode",
        "output_tools",
        "output_object",
        "prompted_output_template",
        "allow_text_output",
        "allow_image_output",
        "function_tools",
        "native_tools",
    ):
        assert getattr(p_lean, name) == getattr(p_agent, name), name
    assert [p.content for p in p_lean.instruction_parts or []] == [p.content for p in p_agent.instruction_parts or []]
    assert s_lean == s_agent and m_lean == m_agent


# ---- 2. response sequences through a FunctionModel ---------------------------------------------------

BROKEN = '{"reply": "unterm'
CASES: dict[str, tuple[str, dict[str, Any], list[Callable[[AgentInfo], m.ModelResponse]]]] = {
    "tool ok": ("tool", OBJ, [tool('{"reply": "hi"}')]),
    "tool broken then ok": ("tool", OBJ, [tool(BROKEN), tool('{"reply": "hi"}')]),
    "tool broken twice": ("tool", OBJ, [tool(BROKEN), tool(BROKEN)]),
    "tool mismatch twice": ("tool", OBJ, [tool('{"reply": 3}'), tool('{"reply": 4}')]),
    "tool array then mismatch": ("tool", OBJ, [tool("[]"), tool('{"x": 1}')]),
    "tool text then call": ("tool", OBJ, [text("hello"), tool('{"reply": "hi"}')]),
    "tool empty twice": ("tool", OBJ, [shaped(), shaped()]),
    "tool text and call": (
        "tool",
        OBJ,
        [shaped(m.TextPart("calling"), m.ToolCallPart("final_result", '{"reply": "a"}'))],
    ),
    "tool unknown name then ok": ("tool", OBJ, [shaped(m.ToolCallPart("nope", "{}")), tool('{"reply": "hi"}')]),
    "tool cut off": ("tool", OBJ, [shaped(m.ToolCallPart("final_result", BROKEN), finish="length")] * 2),
    "empty cut off": ("tool", OBJ, [shaped(finish="length")]),
    "thinking only cut off": ("native", OBJ, [shaped(m.ThinkingPart("hmm"), finish="length")]),
    "refusal": ("tool", OBJ, [shaped(finish="content_filter", provider_details={"refusal": "no"})]),
    "native ok": ("native", OBJ, [text('{"reply": "hi"}')]),
    "native fenced": ("native", OBJ, [text('```json\n{"reply": "hi"}\n```')]),
    "native broken then mismatch": ("native", OBJ, [text(BROKEN), text('{"reply": 4}')]),
    "native cut off mid json": ("native", OBJ, [text(BROKEN, finish="length")]),
    "native empty then ok": ("native", OBJ, [text(""), text('{"reply": "hi"}')]),
    "prompted ok": ("prompted", OBJ, [text('{"reply": "hi"}')]),
    "prompted mismatch twice": ("prompted", OBJ, [text('{"reply": 1}'), text("[1]")]),
    "string ok": ("tool", TEXT, [text("hello")]),
    "string empty twice": ("tool", TEXT, [text(""), text("")]),
    "string too long then ok": ("native", TEXT, [text("x" * 30), text("short")]),
    "wrapped ok": ("tool", LIST, [tool('{"value": ["a"]}')]),
    "wrapped mismatch then ok": ("native", LIST, [text('{"value": [1]}'), text('{"value": ["b"]}')]),
}


def normalised(messages: list[m.ModelMessage]) -> list[Any]:
    """The history without timestamps, ids and run bookkeeping; retry parts with their cause and content."""
    out: list[Any] = []
    for msg in messages:
        if isinstance(msg, m.ModelRequest) and not msg.parts:
            continue  # the agent's closing, interrupted request
        parts = []
        for p in msg.parts:
            if isinstance(p, m.ToolReturnPart) and p.outcome != "retried":
                continue  # the agent's "Final result processed." receipt
            row: tuple[Any, ...] = (type(p).__name__,)
            if isinstance(p, m.RetryFeedbackPart | m.ToolReturnPart):
                row += (p.retry.cause if p.retry else None, json.dumps(p.content, default=str, sort_keys=True))
            elif isinstance(p, m.UserPromptPart | m.TextPart):
                row += (p.content,)
            parts.append(row)
        if parts:
            out.append((type(msg).__name__, parts))
    return out


async def run_path(path: CallPath, mode: str, schema: dict[str, Any], replies: list[Any]) -> tuple[Any, list[Any]]:
    a = spec(output_mode=mode)
    plan = plan_output(schema)
    model = scripted(replies)
    messages: list[m.ModelMessage] = []
    try:
        if path == "agent":
            raw = await _run_agent(model, plan, call_for(a, schema), messages)
        else:
            lean = lean_plan(plan, a.output_mode, a.system_prompt)
            raw = await run_lean(model, lean, plan, "Say hi", model_settings(a), a.output_retries, messages)
        outcome: Any = ("ok", plan.unwrap(raw))
    except Exception as exc:  # both paths must raise what classify reads the same way
        f = classify(exc, state=WireState(), agent=a, messages=messages, simulated=False)
        outcome = ("failed", type(exc).__name__, f.code, f.message, f.retryable)
    return (outcome, retry_events(messages)), normalised(messages)


@pytest.mark.parametrize("case", list(CASES))
async def test_response_sequences_end_the_same_on_both_paths(case: str) -> None:
    mode, schema, replies = CASES[case]
    agent_side = await run_path("agent", mode, schema, replies)
    lean_side = await run_path("lean", mode, schema, replies)
    assert lean_side == agent_side


def test_the_cases_cover_success_retry_and_every_failure_kind() -> None:
    import asyncio

    kinds = set()
    for mode, schema, replies in CASES.values():
        (outcome, _events), _ = asyncio.run(run_path("lean", mode, schema, replies))
        kinds.add(outcome[0] if outcome[0] == "ok" else outcome[2])
    assert kinds >= {"ok", "MODEL_INVALID_JSON", "MODEL_SCHEMA_MISMATCH", "MODEL_RETRIES_EXHAUSTED", "MODEL_REFUSAL"}


# ---- 3. whole calls: the fake provider over HTTP, and a simulator ---------------------------------------


def call_for(
    a: AgentSpec, schema: dict[str, Any], *, simulate: bool = False, root: Path = Path("."), **kw: Any
) -> ModelCall:
    return ModelCall(
        agent=a,
        prompt="Say hi",
        output_schema=schema,
        simulate=simulate,
        seed=1000,
        node_id="draft",
        project_root=root,
        **kw,
    )


async def outcome_of(c: ModelCall, path: CallPath) -> Any:
    events: list[tuple[str, dict[str, Any]]] = []
    try:
        r = await call_model(c, on_event=lambda k, p: events.append((k, p)), path=path)
        got: Any = ("ok", r.output, r.model_name, r.input_tokens, r.output_tokens, r.requests, r.cost_usd)
        got += (r.cost_source, r.output_retries, r.simulated)
    except ModelCallError as e:
        got = ("failed", e.code, e.message, e.retryable, e.retry_after, e.provider_status, e.hint, e.requests)
        got += (e.input_tokens, e.output_tokens, e.cost_usd, e.cost_source, e.output_retries, e.model_name)
    return got, events


HTTP_CASES: dict[str, tuple[str, dict[str, Any], list[FakeReply]]] = {
    "ok with cost": ("tool", OBJ, [FakeReply(cost="0.0012")]),
    "native ok": ("native", OBJ, [FakeReply()]),
    "prompted ok": ("prompted", OBJ, [FakeReply()]),
    "string": ("tool", TEXT, [FakeReply(output="plain")]),
    "wrapped": ("native", LIST, [FakeReply(output={"value": ["a"]})]),
    "retry then ok, partly reported cost": ("tool", OBJ, [FakeReply("invalid_json", cost="0.001"), FakeReply()]),
    "invalid json exhausts": ("native", OBJ, [FakeReply("invalid_json")] * 2),
    "mismatch exhausts": ("tool", OBJ, [FakeReply(output={"reply": 5}), FakeReply(output={"x": 1})]),
    "refusal": ("tool", OBJ, [FakeReply("refusal")]),
    "content filter": ("native", OBJ, [FakeReply("content_filter")]),
    "429": ("tool", OBJ, [FakeReply("429", retry_after="7")]),
    "500": ("tool", OBJ, [FakeReply("500")]),
    "bad body": ("tool", OBJ, [FakeReply("bad_body")]),
    "schema rejected": ("native", OBJ, [FakeReply("schema_rejected")]),
    "slow": ("tool", OBJ, [FakeReply("slow", delay_s=4)]),
}


@pytest.fixture
def fp(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        monkeypatch.setenv("AQVEN_OPENROUTER_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-test0123456789abcdef")
        yield server


@pytest.mark.parametrize("case", list(HTTP_CASES))
async def test_fake_provider_calls_end_the_same_on_both_paths(fp: FakeProvider, case: str) -> None:
    mode, schema, replies = HTTP_CASES[case]
    a = spec(output_mode=mode, settings={"timeout_s": 2.0, "temperature": 0.2, "max_tokens": 300})
    sides = []
    for path in PATHS:
        fp.script(list(replies))
        before = len(fp.chat_requests())
        sides.append((await outcome_of(call_for(a, schema), path), [r.body for r in fp.chat_requests()[before:]]))
    (agent_outcome, agent_bodies), (lean_outcome, lean_bodies) = sides
    assert lean_outcome == agent_outcome
    assert lean_bodies == agent_bodies  # byte for byte the same requests on the wire, retries included


SIMULATOR = """
from aqven.models.simulator import SimReply, SimRequest


def answer(req: SimRequest) -> SimReply:
    b = req.inputs["behaviour"]
    ok = {"reply": f"seed {req.seed} retry {req.retry}"}
    if b == "ok":
        return SimReply(output=ok, input_tokens=100, output_tokens=50)
    if b == "flaky":
        return SimReply(output=ok if req.retry else {"reply": 1}, kind="ok" if req.retry else "schema_mismatch")
    if b in ("refusal", "invalid_json", "schema_mismatch"):
        return SimReply(kind=b, input_tokens=10, output_tokens=5)
    if b == "text":
        return SimReply(output="plain")
    if b == "list":
        return ["a", "b"]
    raise RuntimeError("the simulator broke")
"""


@pytest.fixture(scope="module")
def sim_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("leanproject")
    (root / "aqven.yaml").write_text("package: leanproject\n")
    (root / "sim.py").write_text(textwrap.dedent(SIMULATOR))
    return root


@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
@pytest.mark.parametrize(
    ("behaviour", "schema"),
    [
        ("ok", OBJ),
        ("flaky", OBJ),
        ("refusal", OBJ),
        ("invalid_json", OBJ),
        ("schema_mismatch", OBJ),
        ("text", TEXT),
        ("schema_mismatch", TEXT),
        ("list", LIST),
        ("crash", OBJ),
    ],
)
async def test_simulated_calls_end_the_same_on_both_paths(
    sim_root: Path, mode: str, behaviour: str, schema: dict[str, Any]
) -> None:
    a = spec(output_mode=mode, simulator="sim.py:answer")
    c = call_for(a, schema, simulate=True, root=sim_root, inputs={"behaviour": behaviour}, case_name="c1")
    agent_side = await outcome_of(c, "agent")
    lean_side = await outcome_of(c, "lean")
    assert lean_side == agent_side


async def test_default_path_is_lean_and_the_variable_picks_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    from aqven.models import call as call_module

    monkeypatch.delenv("AQVEN_CALL_PATH", raising=False)
    assert call_module.default_path() == "lean"
    monkeypatch.setenv("AQVEN_CALL_PATH", "agent")
    assert call_module.default_path() == "agent"
