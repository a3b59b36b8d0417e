"""Paths in project files cannot leave the project: `..`, absolute paths and symlinks that point outside.

Decision (docs/reliability.md): a file a project file names by path — a prompt, a code node's module, a check
function, a simulator — must resolve, symlinks followed, to a file inside the project. A symlink to a file
inside the project is fine; a symlink that leaves it (a prompt that links to /etc/hostname) is refused with
E_PATH_OUTSIDE_PROJECT by `aqven check`, and no run or series reads it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from aqven.research.diagnostics.workspace import check_workspace
from support.commands import api_client
from support.fault_soak import write_project

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

    from aqven.server.app import create_app

    secret = Path("/etc/hostname").read_text().strip()
    _link(project / "flows/answer/reply.md", Path("/etc/hostname"))
    with api_client(create_app(project)) as client:
        run = client.post(
            "/api/runs", json={"flow_id": "answer", "input": {"question": "q"}, "simulate": True, "wait": True}
        )
        series = client.post("/api/series", json={"experiment_id": "answers_right", "simulate": True})
    assert run.status_code >= 400 and series.status_code == 422, (run.text, series.text)
    assert series.json()["error"]["code"] == "NOT_RUNNABLE"
    assert "E_PATH_OUTSIDE_PROJECT" in run.text + series.text
    if len(secret) >= 4:
        assert secret not in run.text and secret not in series.text


def _outside_copy(root: Path, out: Path, rel: str) -> Path:
    """A copy of the project file `rel` outside the project, with a marker no project file holds."""
    target = out / Path(rel).name
    target.write_text((root / rel).read_text().replace("description:", "description: OUTSIDE-SECRET", 1))
    return target


def _moved_outside(root: Path, out: Path, rel: str, *, keep: bool = False) -> Path:
    """Move (or copy) the project folder `rel` outside the project, marking every YAML file in it."""
    target = out / rel.replace("/", "_")
    (shutil.copytree if keep else shutil.move)(root / rel, target)
    for path in target.rglob("*.yaml"):
        path.write_text(path.read_text().replace("description:", "description: OUTSIDE-SECRET", 1))
    return target


def _dataset_file(root: Path, out: Path) -> None:
    (root / "datasets/other.yaml").symlink_to(_outside_copy(root, out, "datasets/questions.yaml"))


def _dataset_folder(root: Path, out: Path) -> None:
    (root / "datasets").symlink_to(_moved_outside(root, out, "datasets"))


def _agent_file(root: Path, out: Path) -> None:
    _link(root / "agents/writer.yaml", _outside_copy(root, out, "agents/writer.yaml"))


def _agents_folder(root: Path, out: Path) -> None:
    (root / "agents").symlink_to(_moved_outside(root, out, "agents"))


def _flow_file(root: Path, out: Path) -> None:
    _link(root / FLOW, _outside_copy(root, out, FLOW))


def _flow_folder(root: Path, out: Path) -> None:
    (root / "flows/answer2").symlink_to(_moved_outside(root, out, "flows/answer", keep=True))


def _experiment_file(root: Path, out: Path) -> None:
    exp = "experiments/answers_right/experiment.yaml"
    _link(root / exp, _outside_copy(root, out, exp))


def _experiment_folder(root: Path, out: Path) -> None:
    (root / "experiments/other_exp").symlink_to(_moved_outside(root, out, "experiments/answers_right", keep=True))


def _local_flow_folder(root: Path, out: Path) -> None:
    (root / "experiments/answers_right/flows").mkdir()
    (root / "experiments/answers_right/flows/local").symlink_to(_moved_outside(root, out, "flows/answer", keep=True))


def _project_config(root: Path, out: Path) -> None:
    _link(root / "aqven.yaml", _outside_copy(root, out, "aqven.yaml"))


LISTED: dict[str, tuple[str, Callable[[Path, Path], None]]] = {
    "dataset-file": ("datasets/other.yaml", _dataset_file),
    "datasets-folder": ("datasets", _dataset_folder),
    "agent-file": ("agents/writer.yaml", _agent_file),
    "agents-folder": ("agents", _agents_folder),
    "flow-file": (FLOW, _flow_file),
    "flow-folder": ("flows/answer2", _flow_folder),
    "experiment-file": ("experiments/answers_right/experiment.yaml", _experiment_file),
    "experiment-folder": ("experiments/other_exp", _experiment_folder),
    "local-flow-folder": ("experiments/answers_right/flows/local", _local_flow_folder),
    "aqven-yaml": ("aqven.yaml", _project_config),
}


def test_symlinked_dataset_file_outside_the_project_is_refused(project: Path, outside: Path) -> None:
    shutil.copy(project / "datasets/questions.yaml", outside / "other.yaml")
    (project / "datasets/other.yaml").symlink_to(outside / "other.yaml")
    assert any(code == "E_PATH_OUTSIDE_PROJECT" for code, _f in errors(project))


@pytest.mark.parametrize("case", sorted(LISTED))
def test_listed_file_or_folder_linking_outside_is_refused_and_never_read(
    project: Path, outside: Path, case: str
) -> None:
    """Files found by listing (agents/, datasets/, flows/<id>/, experiments/<id>/, aqven.yaml) and the folders
    they are listed from: a link that leaves the project is E_PATH_OUTSIDE_PROJECT on the link's own name,
    with a hint, and nothing of the target is loaded."""
    from aqven.project.loader import load_project

    file, make = LISTED[case]
    make(project, outside)
    ws, diagnostics = check_workspace(project)
    found = [d for d in diagnostics if d.code == "E_PATH_OUTSIDE_PROJECT"]
    assert [d.file for d in found] == [file], [d.render() for d in diagnostics]
    assert found[0].severity == "error" and found[0].hint
    assert "OUTSIDE-SECRET" not in repr(ws.project) + repr(ws.experiments) + repr(diagnostics)
    assert str(outside) not in repr(diagnostics)
    assert "OUTSIDE-SECRET" not in repr(load_project(project))


def test_a_listed_link_that_stays_inside_is_allowed(project: Path) -> None:
    (project / "shared").mkdir()
    shutil.move(project / "datasets/questions.yaml", project / "shared/questions.yaml")
    (project / "datasets/questions.yaml").symlink_to(project / "shared/questions.yaml")
    shutil.move(project / "flows/answer", project / "shared/answer")
    (project / "flows/answer").symlink_to(project / "shared/answer")
    assert errors(project) == []


def test_a_refused_dataset_is_named_as_not_loaded_where_it_is_used(project: Path, outside: Path) -> None:
    exp = "experiments/answers_right/experiment.yaml"
    replace(project, exp, "dataset: {id: questions}", "dataset: {id: other}")
    _dataset_file(project, outside)
    found = errors(project)
    assert ("E_PATH_OUTSIDE_PROJECT", "datasets/other.yaml") in found
    assert ("E_UNKNOWN_DATASET", exp) in found


def test_a_series_never_reads_a_symlinked_dataset(project: Path, outside: Path) -> None:
    """The server refuses a series on a dataset that links outside (NOT_RUNNABLE), and shows none of it."""

    from aqven.server.app import create_app

    _dataset_folder(project, outside)
    with api_client(create_app(project)) as client:
        series = client.post("/api/series", json={"experiment_id": "answers_right", "simulate": True})
        datasets = client.get("/api/datasets")
        check = client.get("/api/check")
    assert series.status_code == 422 and series.json()["error"]["code"] == "NOT_RUNNABLE"
    assert datasets.json() == []
    assert "E_PATH_OUTSIDE_PROJECT" in check.text
    for resp in (series, datasets, check):
        assert "OUTSIDE-SECRET" not in resp.text and str(outside) not in resp.text


def test_findings_that_link_outside_are_refused_and_never_shown(project: Path, outside: Path) -> None:
    """A finding file or FINDINGS.md that links outside: `aqven check` says E_PATH_OUTSIDE_PROJECT, and neither
    GET /api/findings (MCP list_findings, read_findings_md) nor the check shows the target."""

    from aqven.server.app import create_app

    (outside / "finding.yaml").write_text("experiment_id: OUTSIDE-SECRET\nseries_id: OUTSIDE-SECRET\n")
    (outside / "FINDINGS.md").write_text("# OUTSIDE-SECRET\n")
    findings = project / "experiments/answers_right/findings"
    findings.mkdir()
    (findings / "ser_x.yaml").symlink_to(outside / "finding.yaml")
    (project / "FINDINGS.md").symlink_to(outside / "FINDINGS.md")
    _ws, diagnostics = check_workspace(project)
    found = {(d.code, d.file) for d in diagnostics}
    assert ("E_PATH_OUTSIDE_PROJECT", "experiments/answers_right/findings/ser_x.yaml") in found
    assert ("E_PATH_OUTSIDE_PROJECT", "FINDINGS.md") in found
    assert "OUTSIDE-SECRET" not in repr(diagnostics)
    with api_client(create_app(project)) as client:
        listed = client.get("/api/findings")
    assert listed.status_code == 200 and "OUTSIDE-SECRET" not in listed.text
    assert (outside / "FINDINGS.md").read_text() == "# OUTSIDE-SECRET\n"  # the target is never written either


def test_the_inputs_manifest_never_reads_a_file_outside(project: Path, outside: Path) -> None:
    from aqven.research.experiments.inputs import series_manifest
    from aqven.research.experiments.workspace import Workspace

    (outside / "notes.txt").write_text("OUTSIDE-SECRET")
    (project / "flows/answer/notes.txt").symlink_to(outside / "notes.txt")
    (project / "flows/answer/local.txt").write_text("inside")
    ws = Workspace.load(project)
    variants = ws.experiment("answers_right").spec.variant_ids
    manifest = series_manifest(ws, flow_id="answer", variants=variants, experiment_id="answers_right", simulated=True)
    assert "flows/answer/local.txt" in manifest
    assert not [f for f in manifest if "notes" in f or f.startswith("/")]


def test_a_refused_flow_file_is_named_as_not_loaded_where_it_is_used(project: Path, outside: Path) -> None:
    from aqven.engine.compile import FlowCompiler

    _flow_file(project, outside)
    ws, _diagnostics = check_workspace(project)
    assert ("flow", "answer") in ws.project.failed and ws.project.file_of("flow", "answer") == FLOW
    compiler = FlowCompiler(ws.project, load_code=False)
    assert compiler.compile("answer") is None
    [unknown] = compiler.diagnostics
    assert unknown.code == "E_UNKNOWN_FLOW" and "did not load" in unknown.message and FLOW in unknown.hint
