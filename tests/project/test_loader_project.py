"""Loading a project folder: ids from file names, files remembered, broken files named by what needs them."""

from __future__ import annotations

from pathlib import Path

from aqven.project.loader import load_project
from support.projects import AGENT_YAML, HELPER_FLOW_YAML, write_project


def test_loads_the_base_project(tmp_path: Path) -> None:
    project = load_project(write_project(tmp_path / "p"))
    assert project.diagnostics == []
    assert project.package == "demo_project"
    assert project.file_of("agent", "a") == "agents/a.yaml"
    assert project.file_of("flow", "helper") == "flows/helper/flow.yaml"
    assert project.agents["a"].id == "a" and project.flows["main"].spec.id == "main"


def test_yml_files_and_hidden_folders(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "p",
        {
            "agents/a.yaml": None,
            "agents/b.yml": AGENT_YAML,
            "flows/_draft/flow.yaml": "not: [valid",
            "flows/.hidden/flow.yaml": "not: [valid",
        },
    )
    project = load_project(root)
    assert "b" in project.agents
    assert {d.file for d in project.diagnostics} == set()


def test_a_file_that_fails_is_remembered_as_failed(tmp_path: Path) -> None:
    project = load_project(write_project(tmp_path / "p", {"flows/helper/flow.yaml": "nodes: 3\n"}))
    assert ("flow", "helper") in project.failed
    assert "helper" not in project.flows


def test_missing_folder_reports_the_project_missing(tmp_path: Path) -> None:
    project = load_project(tmp_path / "nowhere")
    assert [d.code for d in project.diagnostics] == ["E_PROJECT_MISSING"]


def test_a_flow_folder_name_that_is_not_an_id(tmp_path: Path) -> None:
    project = load_project(write_project(tmp_path / "p", {"flows/two words/flow.yaml": HELPER_FLOW_YAML}))
    assert [d.code for d in project.diagnostics] == ["E_INVALID_ID"]
    assert "two words" not in project.flows
