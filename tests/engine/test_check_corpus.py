"""The projects in tests/broken_projects/: each yields the diagnostics its expected.yaml lists."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from aqven.engine.check import check_project
from support.diagnostics import assert_well_formed
from support.paths import BROKEN_PROJECTS

CORPUS = BROKEN_PROJECTS
PROJECTS = sorted(p for p in CORPUS.iterdir() if p.is_dir())


def test_the_corpus_is_there() -> None:
    assert len(PROJECTS) >= 10


@pytest.mark.parametrize("source", PROJECTS, ids=[p.name for p in PROJECTS])
def test_broken_project_from_the_corpus(tmp_path: Path, source: Path) -> None:
    root = tmp_path / source.name
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("expected.yaml", "__pycache__"))
    expected = yaml.safe_load((source / "expected.yaml").read_text(encoding="utf-8"))["expect"]
    _, diagnostics = check_project(root)
    assert_well_formed(diagnostics)
    assert any(d.severity == "error" for d in diagnostics)
    found = {(d.code, d.file, d.line) for d in diagnostics}
    for item in expected:
        assert (item["code"], item["file"], item["line"]) in found, (item, sorted(found, key=str))
