"""Simulated calls: a tiny project simulator answers through pydantic-ai's FunctionModel."""

from __future__ import annotations

import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from aqven.models.call import ModelCall, call_model
from aqven.models.outcomes import KEY_ENV_VARS, ModelCallError
from aqven.project.schema import AgentSpec
from support.paths import FIXTURES

FIXTURE = FIXTURES / "openrouter_models.json"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reply": {"type": "string"}, "seed": {"type": "integer"}, "retry": {"type": "integer"}},
    "required": ["reply"],
}

SIMULATOR = """
import asyncio

import aqven
from aqven.models.simulator import SimReply, SimRequest
from sim import world


def answer(req: SimRequest) -> SimReply:
    behaviour = req.inputs.get("behaviour", "ok")
    ok = {"reply": world.GREETING, "seed": req.seed, "retry": req.retry}
    if behaviour == "ok":
        return SimReply(output=ok, input_tokens=100, output_tokens=50)
    if behaviour == "flaky":  # breaks the schema on the first attempt only
        kind = "schema_mismatch" if req.retry == 0 else "ok"
        return SimReply(output=ok if kind == "ok" else {"reply": 42}, kind=kind, input_tokens=10, output_tokens=5)
    if behaviour in ("refusal", "invalid_json", "schema_mismatch"):
        return SimReply(kind=behaviour, input_tokens=10, output_tokens=5)
    if behaviour == "slow":
        return SimReply(output=ok, latency_s=5.0)
    if behaviour == "crash":
        raise RuntimeError("the simulator broke")
    if behaviour == "text":
        return SimReply(output="a plain answer")
    if behaviour == "list":
        return ["a", "b"]  # a bare value is SimReply(output=value)
    if behaviour == "random":
        return SimReply(output={"reply": str(req.rng().random())})
    raise ValueError(behaviour)


async def answer_async(req: SimRequest) -> SimReply:
    await asyncio.sleep(0)
    return answer(req)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("simproject")
    (root / "aqven.yaml").write_text("package: simproject\n")
    (root / "sim").mkdir()
    (root / "sim" / "__init__.py").write_text("")
    (root / "sim" / "world.py").write_text('GREETING = "hello from the simulator"\n')
    (root / "sim" / "agents.py").write_text(textwrap.dedent(SIMULATOR))
    return root


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_ENV_VARS:
        monkeypatch.delenv(var, raising=False)  # simulated mode needs no key and no network
    monkeypatch.setenv("AQVEN_PRICES_FILE", str(FIXTURE))
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")


def agent(**kw: Any) -> AgentSpec:
    data: dict[str, Any] = {
        "id": "writer",
        "model": "openrouter:openai/gpt-4o-mini",
        "simulator": "sim/agents.py:answer",
        "output_retries": 1,
        "settings": {"timeout_s": 1.0},
    }
    data.update(kw)
    return AgentSpec.model_validate(data)


def sim_call(project: Path, a: AgentSpec, behaviour: str, schema: dict[str, Any] | None = None, **kw: Any) -> ModelCall:
    return ModelCall(
        agent=a,
        prompt="Say hi",
        output_schema=schema or SCHEMA,
        simulate=True,
        seed=1000,
        node_id="draft",
        project_root=project,
        inputs={"behaviour": behaviour},
        case_name="case_1",
        **kw,
    )


async def sim_fails(c: ModelCall, events: list[tuple[str, dict[str, Any]]] | None = None) -> ModelCallError:
    with pytest.raises(ModelCallError) as info:
        await call_model(c, on_event=(lambda k, p: events.append((k, p))) if events is not None else None)
    return info.value


@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
async def test_simulated_answer_in_every_output_mode(project: Path, mode: str) -> None:
    result = await call_model(sim_call(project, agent(output_mode=mode), "ok"))
    assert result.output == {"reply": "hello from the simulator", "seed": 1000, "retry": 0}
    assert result.simulated and result.model_name == "openai/gpt-4o-mini" and result.provider == "openrouter"
    assert (result.input_tokens, result.output_tokens, result.requests) == (100, 50, 1)


async def test_simulated_call_is_priced_like_the_real_model(project: Path) -> None:
    result = await call_model(sim_call(project, agent(), "ok"))
    assert result.cost_source == "openrouter_list"
    assert result.cost_usd == Decimal("0.00000015") * 100 + Decimal("0.0000006") * 50


async def test_async_simulator_and_dotted_reference(project: Path) -> None:
    result = await call_model(sim_call(project, agent(simulator="sim.agents:answer_async"), "ok"))
    assert result.output["reply"] == "hello from the simulator"


async def test_retry_gets_a_new_attempt_index_and_seed(project: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    result = await call_model(sim_call(project, agent(), "flaky"), on_event=lambda k, p: events.append((k, p)))
    assert result.output["retry"] == 1 and result.output["seed"] == 1000 + 7919
    assert result.output_retries == 1 and result.requests == 2
    assert [(k, p["reason"], p["simulated"]) for k, p in events] == [("output_retry", "schema_mismatch", True)]


async def test_engine_retry_changes_the_seed(project: Path) -> None:
    first = await call_model(sim_call(project, agent(), "random"))
    again = await call_model(sim_call(project, agent(), "random"))
    other = await call_model(sim_call(project, agent(), "random", retry=1))
    assert first.output == again.output != other.output


@pytest.mark.parametrize("mode", ["tool", "native", "prompted"])
@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        ("invalid_json", "MODEL_INVALID_JSON"),
        ("schema_mismatch", "MODEL_SCHEMA_MISMATCH"),
        ("refusal", "MODEL_REFUSAL"),
    ],
)
async def test_simulated_model_failures(project: Path, mode: str, behaviour: str, code: str) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    err = await sim_fails(sim_call(project, agent(output_mode=mode, output_retries=2), behaviour), events)
    assert err.code == code and err.outcome == "model_failure" and err.simulated
    if behaviour != "refusal":
        assert err.output_retries == 2 and len(events) == 2 and err.requests == 3
        assert err.input_tokens == 30 and err.cost_source == "openrouter_list" and err.cost_usd is not None


async def test_string_and_wrapped_outputs(project: Path) -> None:
    text = await call_model(sim_call(project, agent(), "text", {"type": "string"}))
    assert text.output == "a plain answer"
    listed = await call_model(sim_call(project, agent(), "list", {"type": "array", "items": {"type": "string"}}))
    assert listed.output == ["a", "b"]


async def test_simulated_latency_beyond_the_timeout(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "1")
    err = await sim_fails(sim_call(project, agent(settings={"timeout_s": 0.2}), "slow"))
    assert err.code == "MODEL_TIMEOUT" and err.outcome == "infra"


async def test_latency_is_scaled(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0.02")
    result = await call_model(sim_call(project, agent(), "slow"))
    assert 90 <= result.latency_ms < 900


async def test_agent_without_simulator(project: Path) -> None:
    err = await sim_fails(sim_call(project, agent(simulator=None), "ok"))
    assert err.code == "SIMULATOR_MISSING" and err.outcome == "infra" and "writer" in err.message


async def test_simulator_that_raises_is_a_code_error(project: Path) -> None:
    err = await sim_fails(sim_call(project, agent(), "crash"))
    assert err.code == "CODE_ERROR" and err.outcome == "infra"
    assert "RuntimeError" in err.message and "the simulator broke" in err.message


@pytest.mark.parametrize(
    "ref", ["../outside.py:answer", "/etc/passwd.py:answer", "sim/agents.py:nope", "sim/none.py:x"]
)
async def test_bad_simulator_reference(project: Path, ref: str) -> None:
    err = await sim_fails(sim_call(project, agent(simulator=ref), "ok"))
    assert err.code == "CODE_ERROR" and err.outcome == "infra"
