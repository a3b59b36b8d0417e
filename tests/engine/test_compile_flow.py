"""Compiling flows: dependencies, scopes, literal `$$`, and one ProjectError for a flow that cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from aqven.engine.compile import compile_flow
from aqven.errors import ProjectError
from aqven.project.bindings import resolve
from aqven.project.loader import load_project
from support.projects import HELPER_FLOW_YAML, MAIN_FLOW_YAML, write_project


def test_dependencies_of_the_base_flow(tmp_path: Path) -> None:
    flow = compile_flow(load_project(write_project(tmp_path / "p")), "main")
    deps = {n.id: n.deps for n in flow.walk()}
    assert deps["enrich"] == {"classify"}
    assert deps["panel"] == {"classify"}  # its children read classify; the group waits for it as one step
    assert deps["merge"] == {"judge_1", "judge_2"}
    assert deps["draft"] == {"enrich"}
    assert deps["review"] == {"draft", "panel"}
    assert flow.top_ids() == ["classify", "enrich", "panel", "draft", "review", "finish"]
    assert flow.node("draft") is not None and flow.node("draft").called is not None  # type: ignore[union-attr]


def test_a_group_result_that_reads_a_sibling_waits_for_it(tmp_path: Path) -> None:
    text = MAIN_FLOW_YAML.replace("    result: $merge.out\n", "    result: $enrich.out.priority\n")
    flow = compile_flow(load_project(write_project(tmp_path / "p", {"flows/main/flow.yaml": text})), "main")
    panel = flow.node("panel")
    assert panel is not None and "enrich" in panel.deps


def test_a_broken_flow_raises_one_error_with_every_diagnostic(tmp_path: Path) -> None:
    text = MAIN_FLOW_YAML.replace("agent: a\n", "agent: nobody\n").replace("$classify.out.label\n", "$nope.out\n")
    project = load_project(write_project(tmp_path / "p", {"flows/main/flow.yaml": text}))
    with pytest.raises(ProjectError) as info:
        compile_flow(project, "main")
    codes = {d["code"] for d in info.value.details["diagnostics"]}
    assert {"E_UNKNOWN_AGENT", "E_UNKNOWN_NODE"} <= codes
    assert info.value.code in codes and info.value.file == "flows/main/flow.yaml"


def test_compiling_an_unknown_flow_raises(tmp_path: Path) -> None:
    with pytest.raises(ProjectError) as info:
        compile_flow(load_project(write_project(tmp_path / "p")), "nope")
    assert info.value.code == "E_UNKNOWN_FLOW"


def test_literal_dollar_and_array_index_and_dashed_ids(tmp_path: Path) -> None:
    helper = HELPER_FLOW_YAML.replace("id: shout", "id: sh-out").replace(
        "    output: string\n",
        "    output: string\n  - id: price\n    kind: code\n    code: helper.py:price\n"
        '    inputs: {text: "$$5.00", first: $list.out.0, loud: $sh-out.out}\n    output: string\n'
        "  - id: list\n    kind: code\n    code: helper.py:items\n    inputs: {}\n    output: [string]\n",
    )
    code = (
        "def shout(text):\n    return text.upper()\n\n\ndef price(**kw):\n    return kw['text']\n\n\n"
        "def items():\n    return ['a']\n"
    )
    root = write_project(
        tmp_path / "p", {"flows/helper/flow.yaml": helper + "result: $price.out\n", "flows/helper/helper.py": code}
    )
    flow = compile_flow(load_project(root), "helper")
    price = flow.node("price")
    assert price is not None and price.deps == {"list", "sh-out"}
    assert resolve(price.inputs["text"], {"input": {}, "context": {}, "nodes": {}}) == "$5.00"


def test_a_call_cycle_is_named_once_per_place(tmp_path: Path) -> None:
    helper = HELPER_FLOW_YAML + "  - id: again\n    kind: call\n    flow: helper\n    inputs: {text: $input.text}\n"
    project = load_project(write_project(tmp_path / "p", {"flows/helper/flow.yaml": helper}))
    with pytest.raises(ProjectError) as info:
        compile_flow(project, "main")
    cycles = [d for d in info.value.details["diagnostics"] if d["code"] == "E_CALL_CYCLE"]
    assert [d["message"] for d in cycles] == ["flows call each other in a cycle: helper -> helper"]
