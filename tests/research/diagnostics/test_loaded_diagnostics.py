"""What a series' start asks of a loaded workspace (`loaded_diagnostics`) is what `aqven check` finds on disk
(`check_workspace`): the same diagnostics in the same order, for every broken project of the corpus and for a
project whose experiment has cases its subject cannot run, and anew after an unwatched file changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aqven.research.diagnostics.workspace import check_workspace, loaded_diagnostics
from aqven.research.experiments.workspace import Workspace
from support.series_kit import case_names, dataset_yaml, write_tiny

CORPUS = Path(__file__).resolve().parents[2] / "broken_projects"


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.iterdir() if p.is_dir()))
def test_the_broken_corpus_gives_the_same_diagnostics(name: str, tmp_path: Path) -> None:
    root = shutil.copytree(CORPUS / name, tmp_path / name)
    _ws, expected = check_workspace(root)
    ws = Workspace.load(root)
    assert loaded_diagnostics(ws) == expected
    assert loaded_diagnostics(ws) == expected  # again, from what the first call kept


def test_a_series_project_with_unrunnable_cases_and_a_broken_simulator(tiny_env: Path, tmp_path: Path) -> None:
    names = case_names(4, 2)
    bad = dataset_yaml(names) + "  - name: wrong_input\n    input: {text: 3}\n"
    root = write_tiny(tmp_path / "tiny", names, overrides={"datasets/cases.yaml": bad})
    ws = Workspace.load(root)
    _ws, expected = check_workspace(root)
    assert any(d.code == "E_CASE_INPUT" for d in expected)
    assert loaded_diagnostics(ws) == expected
    # The simulators' code is no project file the server watches: it is read again on every call.
    (root / "sim" / "agents.py").write_text("def broken(:\n", encoding="utf-8")
    _ws, expected = check_workspace(root)
    assert loaded_diagnostics(ws) == expected
    assert any(d.code == "E_CODE_IMPORT" or "sim/agents.py" in (d.file or "") for d in expected)
