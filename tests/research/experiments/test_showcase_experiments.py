"""The five experiments of the showcase template (src/aqven/templates/showcase/experiments/).

They are the spec's examples (Experiments, series and findings; How to run experiments and series as an agent),
so their names and contents are asserted here as the spec writes them. Each one loads, checks, assembles and
compiles for every variant, and every variant runs once on a working case through the engine on the
simulators. No network and no key.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from aqven.engine.compile import compile_flow
from aqven.engine.runner import Engine
from aqven.engine.template import placeholders
from aqven.project.init import init_project
from aqven.project.loader import Project, load_project
from aqven.project.schema import CodeNode
from aqven.project.split import side_of
from aqven.research.diagnostics.experiments import check_experiment
from aqven.research.experiments import schema as es
from aqven.research.experiments.loading import load_experiments, selected_cases
from aqven.research.experiments.schema import ExperimentSource
from aqven.research.experiments.variants import variant_patch
from aqven.store.records import RunRequest
from aqven.store.runs import RunStore
from aqven.store.sqlite_db import SqliteDatabase
from support.paths import REPO

TEMPLATE = REPO / "src" / "aqven" / "templates" / "showcase"
PACKAGE = "lumen"

EXPECTED_VARIANTS: dict[str, list[str]] = {
    "reply_noninferior_mistral": ["gpt", "mistral"],
    "panel_judge_prompt": ["as_written", "claims_first", "anchored_scale"],
    "panel_merge_rule": ["majority_and_spread", "majority_only", "always_tie_break"],
    "panel_single_judge": ["panel", "single_judge"],
    "reply_overpromise_risk": ["as_written"],
}
VARIANTS = [(e, v) for e, vs in EXPECTED_VARIANTS.items() for v in vs]
JUDGES = ["deepseek", "qwen", "llama"]


@pytest.fixture(scope="module")
def lumen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_project(tmp_path_factory.mktemp("showcase") / "lumen", PACKAGE)


@pytest.fixture(scope="module")
def loaded(lumen: Path) -> tuple[Project, dict[str, ExperimentSource], list[Any]]:
    project = load_project(lumen)
    experiments, diagnostics = load_experiments(project)
    return project, experiments, diagnostics


@pytest.fixture(scope="module")
def project(loaded: tuple[Project, dict[str, ExperimentSource], list[Any]]) -> Project:
    return loaded[0]


@pytest.fixture(scope="module")
def experiments(loaded: tuple[Project, dict[str, ExperimentSource], list[Any]]) -> dict[str, ExperimentSource]:
    return loaded[1]


def dump(exp: ExperimentSource) -> dict[str, Any]:
    return exp.spec.model_dump(by_alias=True, exclude_none=True)


# ---- loading and checking ------------------------------------------------------------------------------------


def test_exactly_the_five_experiments_load_without_diagnostics(
    project: Project, loaded: tuple[Project, dict[str, ExperimentSource], list[Any]]
) -> None:
    _, experiments, diagnostics = loaded
    assert not project.diagnostics, [d.render() for d in project.diagnostics]
    assert not diagnostics, [d.render() for d in diagnostics]
    assert sorted(experiments) == sorted(EXPECTED_VARIANTS)
    for exp_id, exp in experiments.items():
        assert exp.spec.variant_ids == EXPECTED_VARIANTS[exp_id]
        assert exp.spec.failure_mode.strip() and len(exp.spec.description.split()) >= 20, exp_id
        assert (exp.folder / "experiment.md").is_file(), f"{exp_id} has no experiment.md"


def test_check_experiment_finds_no_errors(project: Project, experiments: dict[str, ExperimentSource]) -> None:
    for exp_id, exp in experiments.items():
        problems = [d for d in check_experiment(project, exp, experiments) if d.severity == "error"]
        assert not problems, (exp_id, [d.render() for d in problems])


@pytest.mark.parametrize(("exp_id", "variant_id"), VARIANTS)
def test_every_variant_assembles_and_compiles(
    project: Project, experiments: dict[str, ExperimentSource], exp_id: str, variant_id: str
) -> None:
    exp = experiments[exp_id]
    patch = variant_patch(project, exp, variant_id)
    flow = compile_flow(project, exp.spec.subject.flow, patch)
    top = flow.top_ids()
    for node_id in (exp.spec.subject.from_, exp.spec.subject.to):
        assert node_id is None or node_id in top


# ---- the spec's values -----------------------------------------------------------------------------------------


def test_reply_noninferior_mistral_is_the_spec_example(experiments: dict[str, ExperimentSource]) -> None:
    d = dump(experiments["reply_noninferior_mistral"])
    assert d["subject"] == {"flow": "support_case", "from": "polish", "to": "polish"}
    assert d["varies"] == {"what": "agent", "nodes": ["revise"]}
    assert [(v["id"], v["nodes"]) for v in d["variants"]] == [("gpt", {}), ("mistral", {"revise": "mistral"})]
    assert d["dataset"] == {"id": "support_case_bulk", "tags": ["refund"]}
    [check] = d["checks"]
    assert check["id"] == "promises" and check["function"] == "checks/promises.py:no_unkeepable_promise"
    assert d["metrics"] == {"promises": {"check": "promises"}}
    q = d["question"]
    assert (q["kind"], q["metric"], q["baseline"], q["margin"]) == ("noninferior", "promises", "gpt", 0.02)
    assert d["repeats"] == 6
    assert d["failure_mode"] == "overpromise"


def test_reply_noninferior_mistral_has_the_held_out_cases_its_repeats_were_chosen_for(
    project: Project, experiments: dict[str, ExperimentSource]
) -> None:
    cases = selected_cases(project, experiments["reply_noninferior_mistral"].spec)
    assert len(cases) == 1448
    assert sum(side_of(project.package, c.name) == "holdout" for c in cases) == 725


def test_panel_judge_prompt_is_the_spec_example(project: Project, experiments: dict[str, ExperimentSource]) -> None:
    exp = experiments["panel_judge_prompt"]
    d = dump(exp)
    assert d["subject"] == {"flow": "judge_panel"}
    assert d["varies"] == {"what": "prompt", "nodes": JUDGES}
    assert [(v["id"], v["nodes"]) for v in d["variants"]] == [
        ("as_written", {}),
        ("claims_first", dict.fromkeys(JUDGES, "claims_first")),
        ("anchored_scale", dict.fromkeys(JUDGES, "anchored_scale")),
    ]
    assert d["dataset"] == {"id": "judge_panel_cases", "tags": []}
    assert_winner_check(d)
    q = d["question"]
    assert (q["kind"], q["baseline"], q["margin"]) == ("compare", "as_written", 0.05)
    # Each prompt reads only what every judge node gets; the tie-break judge is not varied.
    judge_nodes = {n.id: n for n in project.flows["judge_panel"].spec.nodes}
    for name in ("claims_first", "anchored_scale"):
        text = (exp.folder / "prompts" / f"{name}.md").read_text(encoding="utf-8")
        used = set(placeholders(text))
        assert used == {"question", "answer_a", "answer_b"}, name
        for judge in JUDGES:
            assert used <= set(judge_nodes[judge].inputs), (name, judge)
    assert "tie_break" not in d["varies"]["nodes"]


def test_panel_merge_rule_is_the_spec_example(project: Project, experiments: dict[str, ExperimentSource]) -> None:
    exp = experiments["panel_merge_rule"]
    d = dump(exp)
    assert d["subject"] == {"flow": "judge_panel"}
    assert d["varies"] == {"what": "use", "nodes": ["aggregate"]}
    assert [(v["id"], v["nodes"]) for v in d["variants"]] == [
        ("majority_and_spread", {}),
        ("majority_only", {"aggregate": "majority_only"}),
        ("always_tie_break", {"aggregate": "always_tie_break"}),
    ]
    assert d["dataset"]["id"] == "judge_panel_cases"
    assert_winner_check(d)
    q = d["question"]
    assert (q["kind"], q["baseline"]) == ("compare", "majority_and_spread")
    # The alternatives are ordinary code nodes with the original's inputs and output type.
    original = next(n for n in project.flows["judge_panel"].spec.nodes if n.id == "aggregate")
    assert isinstance(original, CodeNode)
    for alt in ("majority_only", "always_tie_break"):
        patch = variant_patch(project, exp, alt)
        node = patch.nodes["aggregate"]
        assert node.folder == exp.folder / "nodes" / alt
        assert isinstance(node.spec, CodeNode) and node.spec.code == f"{alt}.py:{alt}"
        assert node.spec.inputs == original.inputs
        assert node.spec.output == original.output
        assert (node.folder / f"{alt}.py").is_file()


def test_panel_single_judge_is_the_spec_example(project: Project, experiments: dict[str, ExperimentSource]) -> None:
    exp = experiments["panel_single_judge"]
    d = dump(exp)
    assert d["subject"] == {"flow": "winner_pick"}
    assert d["varies"] == {"what": "flow", "nodes": ["panel"]}
    assert [(v["id"], v["nodes"]) for v in d["variants"]] == [
        ("panel", {}),
        ("single_judge", {"panel": "single_judge"}),
    ]
    assert d["dataset"]["id"] == "judge_panel_cases"
    assert_winner_check(d)
    q = d["question"]
    assert (q["kind"], q["baseline"], q["margin"]) == ("noninferior", "panel", 0.05)
    # Both flows are local to the experiment, out of the project's flow list.
    assert sorted(exp.local_flows) == ["single_judge", "winner_pick"]
    assert not set(exp.local_flows) & set(project.flows)
    [slot] = exp.local_flows["winner_pick"].spec.nodes
    assert (slot.id, slot.kind, getattr(slot, "flow", None)) == ("panel", "call", "judge_panel")
    # The two flows in the slot take and return the same types.
    base = compile_flow(project, "winner_pick", variant_patch(project, exp, "panel")).node("panel")
    swap = compile_flow(project, "winner_pick", variant_patch(project, exp, "single_judge")).node("panel")
    assert base is not None and base.called is not None and base.called.id == "judge_panel"
    assert swap is not None and swap.called is not None and swap.called.id == "single_judge"
    assert swap.called.input_schema == base.called.input_schema
    assert swap.called.output_schema == base.called.output_schema


def test_reply_overpromise_risk_is_the_launch_plan_example(
    project: Project, experiments: dict[str, ExperimentSource]
) -> None:
    exp = experiments["reply_overpromise_risk"]
    d = dump(exp)
    assert d["subject"] == {"flow": "support_case", "from": "polish", "to": "polish"}
    assert "varies" not in d
    assert [(v["id"], v["nodes"]) for v in d["variants"]] == [("as_written", {})]
    assert d["dataset"] == {"id": "support_case_cases", "tags": []}
    assert [c["function"] for c in d["checks"]] == ["checks/promises.py:no_unkeepable_promise"]
    q = d["question"]
    assert (q["kind"], q["metric"], q["bound"], q["direction"], q["margin"]) == (
        "threshold", "promises", 0.97, "at_least", 0.01,
    )  # fmt: skip
    assert d["repeats"] == 2
    # The spec's launch plan: `available` 6 working cases under the package lumen.
    available = [c.name for c in selected_cases(project, exp.spec) if side_of(project.package, c.name) == "dev"]
    assert project.package == PACKAGE
    assert len(available) == 6


def assert_winner_check(d: dict[str, Any]) -> None:
    [check] = d["checks"]
    assert (check["builtin"], check["field"]) == ("equals_expected", "winner")
    assert d["metrics"] == {check["id"]: {"check": check["id"]}}
    assert d["question"]["metric"] == check["id"]


def test_the_alternative_merge_rules_do_what_they_say(experiments: dict[str, ExperimentSource]) -> None:
    folder = experiments["panel_merge_rule"].folder / "nodes"
    votes = [{"winner": "A"}, {"winner": "A"}, {"winner": "B"}]
    unanimous = [{"winner": "B"}] * 3
    for alt, split in (("majority_only", False), ("always_tie_break", True)):
        fn = _function(folder / alt / f"{alt}.py", alt)
        assert fn(*votes) == {"majority": "A", "spread": 0.3333, "split": split}
        assert fn(*unanimous) == {"majority": "B", "spread": 0.0, "split": split}


def _function(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_test_exp_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


# ---- one simulated run per variant --------------------------------------------------------------------------


def first_dev_case(project: Project, exp: ExperimentSource) -> Any:
    return next(c for c in selected_cases(project, exp.spec) if side_of(project.package, c.name) == "dev")


@pytest.mark.parametrize(("exp_id", "variant_id"), VARIANTS)
async def test_every_variant_runs_on_a_working_case(
    project: Project,
    experiments: dict[str, ExperimentSource],
    exp_id: str,
    variant_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AQVEN_SIM_LATENCY_SCALE", "0")
    exp = experiments[exp_id]
    case = first_dev_case(project, exp)
    runs = RunStore(SqliteDatabase(tmp_path / "aqven.sqlite"))
    engine = Engine(project, runs, patch_for=lambda req: variant_patch(project, exp, req.variant_id or ""))
    request = RunRequest(
        flow_id=exp.spec.subject.flow,
        input=case.input,
        context=case.context,
        node_outputs=case.node_outputs,
        case_name=case.name,
        dataset_id=exp.spec.dataset.id,
        from_node=exp.spec.subject.from_,
        to_node=exp.spec.subject.to,
        simulate=True,
        seed=1,
        experiment_id=exp_id,
        variant_id=variant_id,
    )
    record = await engine.execute(runs.create(request))
    assert record.status == "done", record.error
    assert record.simulated
    calls = [e.data for e in runs.events(record.id) if e.kind == "model_request"]
    assert calls, "a variant that calls no model"
    agents = {c["agent"] for c in calls}
    output = record.output

    if exp_id.startswith("reply_"):
        assert set(output) == {"reply", "promises"}
        assert agents == {"mistral" if variant_id == "mistral" else "gpt"}  # draft comes from the case
    elif exp_id == "panel_judge_prompt":
        assert set(output) == {"winner", "spread", "tie_break_used"}
        marker = {"as_written": None, "claims_first": "List every factual claim", "anchored_scale": "on this scale"}
        judged = [c["prompt"] for c in calls if c["agent"] in JUDGES]
        tie = [c["prompt"] for c in calls if c["agent"] == "tie_break"]
        assert len(judged) >= 3 and tie
        text = marker[variant_id]
        if text is None:
            assert not any("List every factual claim" in p or "on this scale" in p for p in judged)
        else:
            assert all(text in p for p in judged)
        assert not any(text and text in p for p in tie)  # the tie-break keeps its own prompt
    elif exp_id == "panel_merge_rule":
        aggregate = _node_output(runs, record.id, "aggregate")
        if variant_id == "majority_only":
            assert aggregate["split"] is False and output["tie_break_used"] is False
        elif variant_id == "always_tie_break":
            assert aggregate["split"] is True and output["tie_break_used"] is True
        else:
            assert aggregate["split"] == (aggregate["spread"] > 0)
    elif exp_id == "panel_single_judge":
        assert set(output) == {"winner", "spread", "tie_break_used"}
        if variant_id == "single_judge":
            assert agents == {"tie_break"} and len(calls) == 1
            assert output["spread"] == 0 and output["tie_break_used"] is False
        else:
            assert set(JUDGES) <= agents and "tie_break" in agents


def _node_output(runs: RunStore, run_id: str, node_id: str) -> Any:
    ends = [e for e in runs.events(run_id) if e.node_id == node_id and e.kind == "node_end"]
    assert ends, f"no node_end event for {node_id}: {sorted({e.kind for e in runs.events(run_id)})}"
    return ends[-1].data["output"]


# ---- the docs --------------------------------------------------------------------------------------------------

REFERENCE = REPO / "docs" / "reference" / "experiment-file.md"
HOWTO = REPO / "docs" / "how-to" / "write-an-experiment.md"


def _keys(model: type[BaseModel]) -> set[str]:
    return {(f.alias or name) for name, f in model.model_fields.items()}


def test_the_reference_names_every_key_of_experiment_yaml() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    keys = set()
    for model in (
        es.Experiment, es.Subject, es.Varies, es.Variant, es.DatasetRef, es.CheckSpec, es.JudgeSpec, es.MetricSpec,
        es.Question,
    ):  # fmt: skip
        keys |= _keys(model)
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, f"docs/reference/experiment-file.md does not name: {missing}"
    for builtin in es.BUILTINS:
        assert f"`{builtin}`" in text, builtin
    for what in ("agent", "prompt", "use", "flow"):
        assert re.search(rf"`{what}`", text)


def test_the_how_to_covers_the_steps() -> None:
    text = HOWTO.read_text(encoding="utf-8")
    for word in (
        "failure_mode", "description", "varies", "variants", "dataset", "holdout", "checks", "metrics", "question",
        "threshold", "compare", "noninferior", "look", "bound", "direction", "margin", "baseline", "repeats",
        "aqven check", "experiment.md", "nodes/", "prompts/", "flows/",
    ):  # fmt: skip
        assert word in text, word
    for exp_id in EXPECTED_VARIANTS:
        assert exp_id in text, exp_id
