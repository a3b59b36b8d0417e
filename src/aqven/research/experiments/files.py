"""Files an experiment's checks name: a check function's ``file.py`` and a judge's rubric.

Both stay inside the project; a function file is looked up in the experiment folder first, then the project
root, a rubric relative to the experiment folder.
"""

from __future__ import annotations

from pathlib import Path

from aqven.errors import ProjectError
from aqven.project.loader import Project
from aqven.project.paths import inside, is_file, rel
from aqven.project.pycode import parse_ref
from aqven.research.experiments.schema import ExperimentSource


def function_file(project: Project, exp: ExperimentSource, ref: str) -> tuple[Path, str]:
    """The file and function name of ``file.py:fn``: the experiment folder first, then the project root.

    Raises `ProjectError` (`E_PATH_OUTSIDE_PROJECT`, `E_PATH_INVALID`, `E_FILE_MISSING`).
    """
    relative, name = parse_ref(ref)
    refused: ProjectError | None = None
    for base in (exp.folder, project.root):
        try:
            path = inside(project.root, base, relative, file=exp.file)
        except ProjectError as exc:
            refused = refused or exc
            continue
        if is_file(path):
            return path, name
    if refused is not None:
        raise refused
    raise ProjectError(
        f"check function file {relative!r} exists neither in {rel(project.root, exp.folder)}/ nor in the project root",
        code="E_FILE_MISSING",
        file=exp.file,
        hint=f"create {relative} in the project root (shared checks) or in {rel(project.root, exp.folder)}/",
    )


def rubric_file(project: Project, exp: ExperimentSource, rubric: str) -> Path:
    """The rubric's path (relative to the experiment folder); `ProjectError` when outside or missing."""
    path = inside(project.root, exp.folder, rubric, file=exp.file)
    if not is_file(path):
        raise ProjectError(
            f"rubric file {rel(project.root, path)!r} is missing",
            code="E_FILE_MISSING",
            file=exp.file,
            hint=f"create {rel(project.root, path)} (rubrics are relative to the experiment folder)",
        )
    return path
