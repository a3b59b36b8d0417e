"""The documented GitHub Actions workflow is valid YAML whose aqven commands use real flags, and `aqven check
--github` annotations point at the file and line of each diagnostic."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from aqven.cli.gate import github_annotation
from aqven.cli.main import app
from aqven.cli.series_group import RUN
from aqven.project.diagnostics import Diagnostic

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/how-to/run-in-ci.md"


def workflow() -> dict[str, object]:
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block, "run-in-ci.md has a yaml block"
    data: dict[str, object] = yaml.safe_load(block.group(1))
    return data


def test_the_documented_workflow_runs_check_and_a_gated_dev_series_on_pull_requests() -> None:
    wf = workflow()
    assert "pull_request" in wf[True]  # type: ignore[operator,index]  # YAML 1.1 reads the key `on` as True
    steps = wf["jobs"]["aqven"]["steps"]  # type: ignore[index]
    commands = [" ".join(str(s["run"]).split()) for s in steps if "run" in s]
    assert any(c.startswith("aqven check") for c in commands)
    series = next(c for c in commands if c.startswith("aqven series"))
    assert "--fail-on refuted,inconclusive,invalid" in series and "--on holdout" not in series
    group: Any = typer.main.get_command(app)
    for line in commands:
        if not line.startswith("aqven "):
            continue
        words = shlex.split(line)
        command = group.commands[words[1]]
        subs = getattr(command, "commands", None)
        if subs is not None:  # `aqven series`: a sub-command (list, follow), or the one that runs an experiment
            command = subs[words[2] if words[2] in subs else RUN]
        known = {o for p in command.params for o in getattr(p, "opts", [])}
        flags = {w.split("=")[0] for w in words[2:] if w.startswith("--")}
        assert flags <= known, (line, flags - known)


@pytest.mark.parametrize(
    ("diag", "expected"),
    [
        (
            Diagnostic(code="E_BINDING", severity="error", file="flows/a/flow.yaml", line=7, message="no x", hint="h"),
            "::error file=proj/flows/a/flow.yaml,line=7,title=E_BINDING::no x%0Ahint: h",
        ),
        (
            Diagnostic(code="W_FINDINGS_STALE", severity="warning", message="50% off: a, b"),
            "::warning title=W_FINDINGS_STALE::50%25 off: a, b",
        ),
    ],
)
def test_check_annotations_name_the_file_and_line_from_the_repository(
    diag: Diagnostic, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    assert github_annotation(diag, tmp_path / "proj") == expected
