"""Datasets in and out: `aqven dataset import` from CSV and JSONL with field mapping and problems at file:line,
JSONL datasets the loader reads directly (100,000 cases), `aqven dataset export`, and a clear limit for a YAML
file too large, whose hint points at JSONL rather than at aliases."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aqven.cli.main import app
from aqven.project import yaml_source
from aqven.project.loader import load_project
from support.commands import aqven, cli_env
from support.projects import write_files

CSV = """\
id,question,label,tags,tier
refund_late,"My order is late, I want a refund",refund,"shipping, refund",gold
broken_strip,The strip flickers,repair,hardware,
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_files(tmp_path / "p", {"aqven.yaml": "package: imports\n"})


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_a_csv_imports_with_field_mapping_through_the_real_command(root: Path) -> None:
    (root / "rows.csv").write_text(CSV, encoding="utf-8")
    r = aqven(
        "dataset", "import", "rows.csv", "--id", "tickets",
        "--map", "id=name", "--map", "question=input.ticket", "--map", "label=expected_output.label",
        cwd=root,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "imported 2 cases into datasets/tickets.jsonl" in r.stdout
    project = load_project(root)
    assert not [d for d in project.diagnostics if d.severity == "error"], project.diagnostics
    first, second = project.datasets["tickets"].cases
    assert first.name == "refund_late" and first.input == {
        "ticket": "My order is late, I want a refund",
        "tier": "gold",
    }
    assert first.expected_output == {"label": "refund"} and first.tags == ["shipping", "refund"]
    assert second.input == {"ticket": "The strip flickers"}  # an empty cell is left out


def test_a_jsonl_import_keeps_types_and_a_bad_row_names_its_line(root: Path) -> None:
    good = [
        {"name": "a", "input": {"n": 1}, "expected_output": {"ok": True}},
        {"name": "b", "input": {"n": 2}, "context": {"total": "9.90"}},
    ]
    (root / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in good), encoding="utf-8")
    code, out = run("dataset", "import", str(root / "good.jsonl"), "--id", "nums", "--root", str(root))
    assert code == 0, out
    cases = load_project(root).datasets["nums"].cases
    assert [c.input for c in cases] == [{"n": 1}, {"n": 2}] and cases[0].expected_output == {"ok": True}

    bad = root / "bad.jsonl"
    bad.write_text('{"name": "a"}\n\n{"input": {"n": 2}}\n{"name": "a"}\nnot json\n', encoding="utf-8")
    code, out = run("dataset", "import", str(bad), "--id", "broken", "--root", str(root))
    assert code == 1 and not (root / "datasets/broken.jsonl").exists()
    assert f"{bad}:5: error E_DATASET_JSONL" in out, out  # the file cannot be read past a line that is not JSON

    bad.write_text('{"name": "a"}\n\n{"input": {"n": 2}}\n{"name": "a"}\n{"name": "c", "tags": 5}\n')
    code, out = run("dataset", "import", str(bad), "--id", "broken", "--root", str(root))
    assert code == 1 and not (root / "datasets/broken.jsonl").exists()
    assert f"{bad}:3: error E_IMPORT_ROW: name: Field required" in out, out
    assert f"{bad}:4: error E_IMPORT_ROW: case name 'a' is also on line 1" in out
    assert f"{bad}:5: error E_IMPORT_ROW: tags" in out and "hint:" in out

    code, out = run("dataset", "import", str(root / "good.jsonl"), "--id", "nums", "--root", str(root))
    assert code == 1 and "E_DUPLICATE_ID" in out and "--force" in out
    code, out = run("dataset", "import", str(root / "good.jsonl"), "--id", "x", "--map", "a=b", "--root", str(root))
    assert code == 2 and "E_IMPORT_MAPPING" in out


def test_a_broken_line_of_a_jsonl_dataset_is_an_aqven_check_diagnostic(root: Path) -> None:
    write_files(root, {"datasets/d.jsonl": '{"name": "a"}\n{"name": 5}\n{"name": "b"\n'})
    diags = {(d.code, d.file, d.line) for d in load_project(root).diagnostics}
    assert ("E_DATASET_JSONL", "datasets/d.jsonl", 3) in diags, diags
    write_files(root, {"datasets/d.jsonl": '{"name": "a"}\n{"name": "a", "colour": 5}\n'})
    diags = {(d.code, d.file, d.line) for d in load_project(root).diagnostics}
    assert ("E_UNKNOWN_KEY", "datasets/d.jsonl", 2) in diags, diags


def test_export_and_import_round_trip(root: Path, tmp_path: Path) -> None:
    cases = [
        {"name": "a", "input": {"ticket": "hi", "n": 3}, "expected_output": {"ok": True}, "tags": ["x", "y"]},
        {"name": "b", "input": "plain", "node_outputs": {"draft": {"reply": "r"}}},
    ]
    write_files(root, {"datasets/d.yaml": json.dumps({"cases": cases})})  # JSON is YAML
    for suffix in ("jsonl", "yaml", "csv"):
        code, out = run("dataset", "export", "d", "-o", str(tmp_path / f"out.{suffix}"), "--root", str(root))
        assert code == 0, out
    code, out = run("dataset", "import", str(tmp_path / "out.jsonl"), "--id", "again", "--root", str(root))
    assert code == 0, out
    project = load_project(root)
    assert project.datasets["again"].cases == project.datasets["d"].cases
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0] == "name,tags,input.ticket,input.n,expected_output.ok,input,node_outputs.draft"
    assert lines[1] == 'a,"x,y",hi,3,true,,'
    code, out = run("dataset", "export", "nope", "-o", str(tmp_path / "x.jsonl"), "--root", str(root))
    assert code == 1 and "E_DATASET_MISSING" in out and "datasets: again, d" in out


def test_100000_cases_load_from_jsonl(root: Path) -> None:
    lines = "".join(
        json.dumps({"name": f"c{i:06d}", "input": {"ticket": f"ticket {i}"}}) + "\n" for i in range(100_000)
    )
    write_files(root, {"datasets/big.jsonl": lines})
    t0 = time.perf_counter()
    project = load_project(root)
    took = time.perf_counter() - t0
    assert len(project.datasets["big"].cases) == 100_000 and not project.diagnostics
    print(f"100,000 JSONL cases loaded in {took:.2f} s")


def test_a_yaml_file_past_the_limit_is_refused_with_a_hint_at_jsonl(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(yaml_source, "MAX_VALUES", 1000)  # the real limit is 2,000,000 values
    write_files(root, {"datasets/d.yaml": "cases:\n" + "".join(f"  - {{name: c{i}}}\n" for i in range(600))})
    (diag,) = [d for d in load_project(root).diagnostics if d.severity == "error"]
    assert diag.code == "E_DATASET_TOO_LARGE" and "1,000 values" in diag.message
    assert "datasets/<id>.jsonl" in diag.hint and "alias" not in diag.hint


def test_a_problem_s_file_and_line_stay_on_one_line_in_a_narrow_terminal(root: Path) -> None:
    """Tools read `file:line: error CODE` from the output: the console never breaks it, however long the path."""
    deep = root / ("a-folder-with-a-long-name/" * 4)
    deep.mkdir(parents=True)
    bad = deep / "bad.jsonl"
    bad.write_text('{"name": "a"}\nnot json\n', encoding="utf-8")
    r = aqven("dataset", "import", str(bad), "--id", "broken", cwd=root, env=cli_env(COLUMNS="40"))
    assert r.returncode == 1
    assert f"{bad}:2: error E_DATASET_JSONL" in r.stderr, r.stderr
