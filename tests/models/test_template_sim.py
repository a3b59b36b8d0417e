"""The showcase template (src/aqven/templates/showcase): its files, its datasets, and its simulators measured
against the truth in sim/world.py. No network: everything runs on the simulators."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

from aqven.models.simulator import SimReply, SimRequest
from aqven.project.split import side_of
from aqven.project.types import to_json_schema
from support.paths import REPO

TEMPLATE = REPO / "src" / "aqven" / "templates" / "showcase"
AGENTS = {"gpt", "mistral", "deepseek", "qwen", "llama", "tie_break"}
JUDGES = ("deepseek", "qwen", "llama")
RETRY_SEED_STEP = 7919  # how the engine varies the seed between output retries


def load(path: Path) -> ModuleType:
    name = "_test_template_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def read(rel: str) -> Any:
    """A template file's YAML, read once (tests copy what they change)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((TEMPLATE / rel).read_text(encoding="utf-8"), Loader=loader)


@pytest.fixture(scope="module")
def agents() -> ModuleType:
    return load(TEMPLATE / "sim" / "agents.py")


@pytest.fixture(scope="module")
def world(agents: ModuleType) -> ModuleType:
    return agents.world  # the very module the simulators read


@pytest.fixture(scope="module")
def promises() -> ModuleType:
    return load(TEMPLATE / "checks" / "promises.py")


@pytest.fixture(scope="module")
def flows() -> dict[str, Any]:
    return {f: read(f"flows/{f}/flow.yaml") for f in ("support_case", "judge_panel")}


def node(flow: dict[str, Any], node_id: str) -> dict[str, Any]:
    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for n in nodes for x in [n, *walk(n.get("nodes", []))]]

    return next(n for n in walk(flow["nodes"]) if n["id"] == node_id)


@functools.cache
def output_schema(flow_id: str, node_id: str) -> dict[str, Any]:
    return to_json_schema(node(read(f"flows/{flow_id}/flow.yaml"), node_id)["output"])


def call(fn: Any, req: SimRequest, retries: int = 2) -> Any:
    """One llm node call as the engine makes it: a broken reply is asked again with the next seed."""
    for attempt in range(retries + 1):
        reply: SimReply = fn(replace(req, seed=req.seed + RETRY_SEED_STEP * attempt, retry=attempt))
        if reply.kind == "ok":
            return reply.output
    return None


# ---- files --------------------------------------------------------------------------------------------


def test_every_yaml_file_loads() -> None:
    files = sorted(TEMPLATE.rglob("*.yaml"))
    assert len(files) >= 1 + len(AGENTS) + 3 + 2
    for path in files:
        assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), dict), path


def test_project_file() -> None:
    text = (TEMPLATE / "aqven.yaml").read_text(encoding="utf-8")
    assert "package: lumen" in text.splitlines()
    config = yaml.safe_load(text)
    assert config["research"] == {"spend_cap_usd": "1.00"}
    assert config["concurrency"] == 8


def test_project_loads_and_checks_without_diagnostics() -> None:
    from aqven.engine.check import check_project
    from aqven.project.loader import load_project

    project = load_project(TEMPLATE)
    assert project.diagnostics == []
    assert set(project.agents) == AGENTS
    assert set(project.datasets) == {"support_case_cases", "support_case_bulk", "judge_panel_cases"}
    assert set(project.flows) == {"support_case", "judge_panel"}
    _, diagnostics = check_project(TEMPLATE)
    assert diagnostics == []


def test_agents() -> None:
    for agent in AGENTS:
        spec = read(f"agents/{agent}.yaml")
        assert spec["model"].startswith("openrouter:")
        assert spec["simulator"] == f"sim/agents.py:{agent}"
        assert spec["output_mode"] in ("tool", "native", "prompted")


def test_support_case_flow_shape(flows: dict[str, Any]) -> None:
    flow = flows["support_case"]
    assert flow["input"] == {"ticket": "string", "tier": "string"}
    assert flow["output"] == {"reply": "string", "promises": ["string"]}
    top = [n["id"] for n in flow["nodes"]]
    assert top[:2] == ["draft", "polish"]
    polish = node(flow, "polish")
    assert polish["kind"] == "group" and polish["result"] == "$revise.out"
    revise = node(flow, "revise")
    assert revise["agent"] == "gpt"
    assert revise["inputs"]["ticket"] == "$input.ticket"  # the case key of sim/world.py
    assert revise["inputs"]["draft"] == "$draft.out.reply"
    assert revise["inputs"]["order_total"] == "$context.order_total"
    assert node(flow, "draft")["inputs"]["ticket"] == "$input.ticket"


def test_judge_panel_flow_shape(flows: dict[str, Any]) -> None:
    flow = flows["judge_panel"]
    ids = [n["id"] for n in flow["nodes"]]
    assert ids == ["deepseek", "qwen", "llama", "aggregate", "tie_break", "decide"]
    for judge in JUDGES:
        n = node(flow, judge)
        assert n["agent"] == judge and n["prompt"] == f"{judge}.md"
        assert all(str(v).startswith("$input.") for v in n["inputs"].values())  # the three run at once
    assert node(flow, "tie_break")["agent"] == "tie_break"
    decide = node(flow, "decide")
    assert decide["inputs"] == {"aggregate": "$aggregate.out", "tie_break": "$tie_break.out"}


def test_prompts_read_only_node_inputs(flows: dict[str, Any]) -> None:
    for flow_id, flow in flows.items():
        children = [c for n in flow["nodes"] for c in n.get("nodes", [])]
        for llm in (n for n in flow["nodes"] + children if n["kind"] == "llm"):
            text = (TEMPLATE / "flows" / flow_id / llm["prompt"]).read_text(encoding="utf-8")
            names = {m.split(".")[0] for m in re.findall(r"\{\{\s*([\w.]+)\s*\}\}", text)}
            assert names and names <= set(llm["inputs"]), (flow_id, llm["id"], names)


def test_policy_code_matches_world(world: ModuleType) -> None:
    policy = load(TEMPLATE / "flows" / "support_case" / "policy.py")
    for tier in ("basic", "plus", "gold", "unknown"):
        for total, days in (("49.90", 9), ("14.90", 31), ("99.90", 61)):
            assert policy.policy_for(tier, total, days) == world.policy(tier, total, days)


# ---- datasets -----------------------------------------------------------------------------------------


def test_dataset_case_names_are_unique() -> None:
    for dataset in ("support_case_cases", "support_case_bulk", "judge_panel_cases"):
        names = [c["name"] for c in read(f"datasets/{dataset}.yaml")["cases"]]
        assert len(names) == len(set(names)), dataset


def check_support_case(case: dict[str, Any]) -> None:
    assert set(case["input"]) == {"ticket", "tier"}
    assert case["input"]["tier"] in ("basic", "plus", "gold")
    assert re.fullmatch(r"\d+\.\d\d", case["context"]["order_total"])  # money is a string
    assert isinstance(case["context"]["days_since_delivery"], int)
    assert isinstance(case["node_outputs"]["draft"]["reply"], str)


def test_hand_written_support_cases() -> None:
    cases = read("datasets/support_case_cases.yaml")["cases"]
    assert 10 <= len(cases) <= 14
    for case in cases:
        check_support_case(case)
    names = [c["name"] for c in cases]
    assert "strip_flicker_credit" in names
    assert sum(side_of("lumen", n) == "dev" for n in names) == 6
    assert any("refund" in c["tags"] for c in cases)


def test_bulk_support_cases() -> None:
    cases = read("datasets/support_case_bulk.yaml")["cases"]
    assert len(cases) >= 400
    for case in cases:
        check_support_case(case)
    refund = [c["name"] for c in cases if "refund" in c["tags"]]
    assert len(refund) >= 400
    assert sum(side_of("lumen", n) == "holdout" for n in refund) >= 200
    assert len({c["input"]["ticket"] for c in cases}) == len(cases)  # the ticket is the case key


def test_judge_panel_cases(world: ModuleType) -> None:
    cases = read("datasets/judge_panel_cases.yaml")["cases"]
    assert 36 <= len(cases) <= 44
    winners = [c["expected_output"]["winner"] for c in cases]
    assert winners.count("A") == winners.count("B")
    for case in cases:
        i = case["input"]
        assert world.panel_truth(i["question"], i["answer_a"], i["answer_b"]) == case["expected_output"]["winner"]


def test_generated_files_are_the_generator_output() -> None:
    gen = load(REPO / "tools" / "gen_showcase_data.py")
    for path, text in gen.build().items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run tools/gen_showcase_data.py"


# ---- the simulators -----------------------------------------------------------------------------------


def revise_request(case: dict[str, Any], agent: str, seed: int, flows: dict[str, Any], policy: Any) -> SimRequest:
    """The request the engine makes for the revise node on a case (prompt left empty: it is not read)."""
    ctx = case["context"]
    inputs = {
        "draft": case["node_outputs"]["draft"]["reply"],
        "ticket": case["input"]["ticket"],
        "tier": case["input"]["tier"],
        "order_total": ctx["order_total"],
        "days_since_delivery": ctx["days_since_delivery"],
        "policy": policy.policy_for(case["input"]["tier"], ctx["order_total"], ctx["days_since_delivery"]),
    }
    schema = output_schema("support_case", "revise")
    return SimRequest(agent, f"openrouter:{agent}", "revise", "", inputs, schema, seed, case["name"])


def judge_request(case: dict[str, Any], agent: str, seed: int, flows: dict[str, Any]) -> SimRequest:
    schema = output_schema("judge_panel", "deepseek")
    return SimRequest(agent, f"openrouter:{agent}", agent, "", dict(case["input"]), schema, seed, case["name"])


@pytest.fixture(scope="module")
def bulk_refund() -> list[dict[str, Any]]:
    return [c for c in read("datasets/support_case_bulk.yaml")["cases"] if "refund" in c["tags"]]


@pytest.fixture(scope="module")
def policy() -> ModuleType:
    return load(TEMPLATE / "flows" / "support_case" / "policy.py")


def test_simulators_are_deterministic_per_seed(
    agents: ModuleType, flows: dict[str, Any], policy: ModuleType, bulk_refund: list[dict[str, Any]]
) -> None:
    support = bulk_refund[0]
    panel = read("datasets/judge_panel_cases.yaml")["cases"][0]
    for agent in AGENTS:
        fn = getattr(agents, agent)
        for make in (
            lambda s, a=agent: revise_request(support, a, s, flows, policy),
            lambda s, a=agent: judge_request(panel, a, s, flows),
        ):
            assert fn(make(7)) == fn(make(7))
            outputs = {repr(fn(make(seed)).output) for seed in range(40)}
            assert len(outputs) > 1, agent


def test_simulator_replies_match_their_schema_and_are_plausible(
    agents: ModuleType, flows: dict[str, Any], policy: ModuleType, bulk_refund: list[dict[str, Any]]
) -> None:
    from aqven.engine.template import render

    prompt_text = (TEMPLATE / "flows" / "support_case" / "revise.md").read_text(encoding="utf-8")
    kinds: set[str] = set()
    for seed, case in enumerate(bulk_refund[:200]):
        for agent in ("gpt", "mistral"):
            req = revise_request(case, agent, seed, flows, policy)
            req = replace(req, prompt=render(prompt_text, req.inputs))
            reply = getattr(agents, agent)(req)
            kinds.add(reply.kind)
            assert reply.kind in ("ok", "invalid_json")
            if reply.kind == "ok":
                jsonschema.validate(reply.output, req.output_schema)
            assert reply.input_tokens == len(req.prompt) // 4 + 60
            assert 20 <= reply.output_tokens <= 600
            assert 0.3 <= reply.latency_s <= 2.5
    assert "ok" in kinds

    # Any other schema (a tone judge in a check, say) gets a value of that schema.
    schema = to_json_schema(
        {"passed": "boolean", "score": "number", "label": {"type": "string", "enum": ["x", "y"]}, "notes": ["string"]}
    )
    req = SimRequest("llama", "openrouter:llama", "tone", "Rate the tone.", {"reply": "Hi"}, schema, 3)
    out = call(agents.llama, req)
    jsonschema.validate(out, schema)


def test_draft_simulator_answers_the_draft_node(agents: ModuleType, flows: dict[str, Any]) -> None:
    case = read("datasets/support_case_cases.yaml")["cases"][0]
    schema = to_json_schema(node(flows["support_case"], "draft")["output"])
    inputs = {"ticket": case["input"]["ticket"], "tier": "gold", "order_total": "49.90", "days_since_delivery": 9}
    out = call(agents.gpt, SimRequest("gpt", "openrouter:openai/gpt-4.1-mini", "draft", "", inputs, schema, 5))
    jsonschema.validate(out, schema)
    assert out["reply"].startswith("Hi Dana,")


def test_check_passes_exactly_when_the_simulator_kept_its_promises(
    agents: ModuleType,
    world: ModuleType,
    promises: ModuleType,
    flows: dict[str, Any],
    policy: ModuleType,
    bulk_refund: list[dict[str, Any]],
) -> None:
    assert promises.UNKEEPABLE == world.UNKEEPABLE
    sign_off = load(TEMPLATE / "flows" / "support_case" / "sign_off.py")
    hand = read("datasets/support_case_cases.yaml")["cases"]
    seen = {True: 0, False: 0}
    for seed in range(3000):
        case = (bulk_refund + hand)[seed % (len(bulk_refund) + len(hand))]
        req = revise_request(case, "gpt" if seed % 2 else "llama", seed, flows, policy)
        output, overpromised = agents.support_reply(req, req.agent_id)
        final = sign_off.sign_off(output["reply"], output["promises"], case["input"]["tier"])
        for out in (output, final):
            ok, reason = promises.no_unkeepable_promise(out, None)
            assert ok is (not overpromised), (reason, out)
        seen[overpromised] += 1
    assert seen[True] > 20 and seen[False] > 2000
    for sentences in world.OVERPROMISES.values():
        for sentence in sentences:
            assert not promises.no_unkeepable_promise({"reply": sentence, "promises": []})[0], sentence


def test_pass_rates_match_the_known_truth(
    agents: ModuleType,
    world: ModuleType,
    promises: ModuleType,
    flows: dict[str, Any],
    policy: ModuleType,
    bulk_refund: list[dict[str, Any]],
) -> None:
    keys = [world.case_key_from_inputs(c["input"]) for c in bulk_refund]
    truth = {a: sum(world.true_pass_rate(a, k) for k in keys) / len(keys) for a in ("gpt", "mistral")}
    assert truth["gpt"] == pytest.approx(0.975, abs=0.001)
    assert truth["mistral"] == pytest.approx(0.972, abs=0.001)
    assert truth["mistral"] - truth["gpt"] == pytest.approx(-0.003, abs=0.001)  # non-inferior at margin 0.02

    repeats = 45  # 448 cases x 45 = 20,160 draws per agent, every case equally often
    for agent in ("gpt", "mistral"):
        fn = getattr(agents, agent)
        passed = 0
        for r in range(repeats):
            for i, case in enumerate(bulk_refund):
                seed = int(hashlib.sha256(f"{i}:{r}".encode()).hexdigest()[:12], 16)  # paired: same for both
                out = call(fn, revise_request(case, agent, seed, flows, policy))
                passed += out is not None and promises.no_unkeepable_promise(out, None)[0]
        estimate = passed / (repeats * len(bulk_refund))
        assert estimate == pytest.approx(truth[agent], abs=0.01), agent


def test_hand_written_tickets_are_harder_for_gpt(world: ModuleType) -> None:
    cases = read("datasets/support_case_cases.yaml")["cases"]
    rates = [world.true_pass_rate("gpt", world.case_key_from_inputs(c["input"])) for c in cases]
    assert sum(r < 0.97 for r in rates) >= 4
    assert sum(rates) / len(rates) < 0.965


def test_judge_accuracies_match_their_declared_values(
    agents: ModuleType, world: ModuleType, flows: dict[str, Any]
) -> None:
    cases = read("datasets/judge_panel_cases.yaml")["cases"]
    assert world.declared_accuracy("deepseek") == 0.85
    assert world.declared_accuracy("qwen") == 0.80
    assert world.declared_accuracy("llama") == pytest.approx(0.70)
    assert world.declared_accuracy("tie_break") == 0.90
    repeats = 200
    for agent in (*JUDGES, "tie_break"):
        right = {"A": 0, "B": 0}
        for r in range(repeats):
            for i, case in enumerate(cases):
                out = call(getattr(agents, agent), judge_request(case, agent, 1000 * r + i, flows))
                truth = case["expected_output"]["winner"]
                right[truth] += out is not None and out["winner"] == truth
        n_side = repeats * len(cases) / 2
        assert (right["A"] + right["B"]) / (2 * n_side) == pytest.approx(world.declared_accuracy(agent), abs=0.02)
        for side in ("A", "B"):
            assert right[side] / n_side == pytest.approx(world.judge_accuracy(agent, side), abs=0.03), (agent, side)


def test_the_tie_break_makes_the_panel_better(agents: ModuleType, world: ModuleType, flows: dict[str, Any]) -> None:
    folder = TEMPLATE / "flows" / "judge_panel"
    aggregate, decide = load(folder / "aggregate.py").aggregate, load(folder / "decide.py").decide
    cases = read("datasets/judge_panel_cases.yaml")["cases"]
    right = {"majority_and_spread": 0, "majority_only": 0, "always_tie_break": 0}
    total = 0
    for r in range(150):
        for i, case in enumerate(cases):
            votes = {
                j: call(getattr(agents, j), judge_request(case, j, 7000 * r + 31 * i + k, flows))
                for k, j in enumerate(JUDGES)
            }
            tie = call(agents.tie_break, judge_request(case, "tie_break", 7000 * r + 31 * i + 5, flows))
            agg = aggregate(**votes)
            assert set(agg) == {"majority", "spread", "split"} and agg["split"] == (agg["spread"] > 0)
            rules = {
                "majority_and_spread": agg,
                "majority_only": {**agg, "split": False},
                "always_tie_break": {**agg, "split": True},
            }
            for rule, merged in rules.items():
                out = decide(merged, tie)
                assert out["tie_break_used"] is merged["split"]
                right[rule] += out["winner"] == case["expected_output"]["winner"]
            total += 1
    share = {rule: n / total for rule, n in right.items()}
    # With independent judges: 0.94 (split -> tie-break), 0.88 (majority only), 0.90 (always tie-break).
    assert share["majority_and_spread"] == pytest.approx(0.94, abs=0.02)
    assert share["majority_and_spread"] > share["always_tie_break"] > share["majority_only"]
