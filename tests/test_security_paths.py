"""Paths in project files cannot leave the project: `..`, absolute paths and symlinks that point outside.

Decision (docs/reliability.md): a file a project file names by path — a prompt, a code node's module, a check
function, a simulator — must resolve, symlinks followed, to a file inside the project. A symlink to a file
inside the project is fine; a symlink that leaves it (a prompt that links to /etc/hostname) is refused with
E_PATH_OUTSIDE_PROJECT by `aqven check`, and no run or series reads it.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from soak_faults import write_project

from aqven.research.workspace import check_workspace

FLOW = "flows/answer/flow.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    write_project(root, cases=3, simulator="seeded")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the project, outside it, with copies of the project's files."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.md").write_text("OUTSIDE-SECRET {{ question }}\n")
    return out


def errors(root: Path) -> list[tuple[str, str | None]]:
    _ws, diagnostics = check_workspace(root)
    return [(d.code, d.file) for d in diagnostics if d.severity == "error"]


def replace(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    "prompt",
    ["../../../../../../../../etc/passwd", "../../../outside/secret.md", "/etc/passwd", "//etc/passwd"],
)
def test_prompt_path_leaving_the_project(project: Path, outside: Path, prompt: str) -> None:
    replace(project, FLOW, "prompt: reply.md", f"prompt: {prompt}")
    assert ("E_PATH_OUTSIDE_PROJECT", FLOW) in errors(project)


def test_dotdot_that_stays_inside_is_an_ordinary_missing_file(project: Path) -> None:
    # flows/answer/../../etc/passwd is <project>/etc/passwd: inside, and missing
    replace(project, FLOW, "prompt: reply.md", "prompt: ../../etc/passwd")
    found = errors(project)
    assert ("E_FILE_MISSING", FLOW) in found and all(c != "E_PATH_OUTSIDE_PROJECT" for c, _f in found)


def _link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def _prompt_to_hostname(root: Path, out: Path) -> None:
    _link(root / "flows/answer/reply.md", Path("/etc/hostname"))


def _prompt_to_outside(root: Path, out: Path) -> None:
    _link(root / "flows/answer/reply.md", out / "secret.md")


def _check_function(root: Path, out: Path) -> None:
    shutil.copy(root / "checks/right.py", out / "right.py")
    _link(root / "checks/right.py", out / "right.py")


def _simulator(root: Path, out: Path) -> None:
    shutil.copy(root / "sim/writer.py", out / "writer.py")
    _link(root / "sim/writer.py", out / "writer.py")


def _prompt_folder(root: Path, out: Path) -> None:
    (out / "prompts").mkdir()
    (out / "prompts/reply.md").write_text("x {{ question }}")
    (root / "flows/answer/p").symlink_to(out / "prompts")
    replace(root, FLOW, "prompt: reply.md", "prompt: p/reply.md")


SYMLINKS: dict[str, tuple[str, Callable[[Path, Path], None]]] = {
    "prompt-to-etc-hostname": (FLOW, _prompt_to_hostname),
    "prompt-to-outside": (FLOW, _prompt_to_outside),
    "check-function": ("experiments/answers_right/experiment.yaml", _check_function),
    "simulator": ("agents/writer.yaml", _simulator),
    "prompt-folder": (FLOW, _prompt_folder),
}


@pytest.mark.parametrize("case", sorted(SYMLINKS))
def test_symlink_leaving_the_project_is_refused(project: Path, outside: Path, case: str) -> None:
    file, make = SYMLINKS[case]
    make(project, outside)
    assert ("E_PATH_OUTSIDE_PROJECT", file) in errors(project)


def test_symlink_inside_the_project_is_allowed(project: Path) -> None:
    (project / "prompts").mkdir()
    (project / "prompts/shared.md").write_text("Answer the question [[{{ question }}]] with one word.\n")
    _link(project / "flows/answer/reply.md", project / "prompts/shared.md")
    assert errors(project) == []


def test_a_run_never_reads_a_symlinked_prompt(project: Path) -> None:
    """The server refuses the run before anything runs, and nothing of the target reaches a response."""
    from fastapi.testclient import TestClient

    from aqven.server.app import create_app

    secret = Path("/etc/hostname").read_text().strip()
    _link(project / "flows/answer/reply.md", Path("/etc/hostname"))
    with TestClient(create_app(project)) as client:
        run = client.post(
            "/api/runs", json={"flow_id": "answer", "input": {"question": "q"}, "simulate": True, "wait": True}
        )
        series = client.post("/api/series", json={"experiment_id": "answers_right", "simulate": True})
    assert run.status_code >= 400 and series.status_code == 422, (run.text, series.text)
    assert series.json()["error"]["code"] == "NOT_RUNNABLE"
    assert "E_PATH_OUTSIDE_PROJECT" in run.text + series.text
    if len(secret) >= 4:
        assert secret not in run.text and secret not in series.text


@pytest.mark.xfail(
    strict=True,
    reason="loader.py _yaml_files/load_project: a symlinked datasets/*.yaml (or agents/, flows/<id>/, "
    "experiments/<id>/) that points outside the project is loaded without a diagnostic",
)
def test_symlinked_dataset_file_outside_the_project_is_refused(project: Path, outside: Path) -> None:
    shutil.copy(project / "datasets/questions.yaml", outside / "other.yaml")
    (project / "datasets/other.yaml").symlink_to(outside / "other.yaml")
    assert any(code == "E_PATH_OUTSIDE_PROJECT" for code, _f in errors(project))
