"""What every `aqven` command that acts on a project shares: its folder, and how it fails."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

from aqven.cli.render import show_error
from aqven.errors import AqvenError


def fail(err: AqvenError, code: int = 2) -> NoReturn:
    from aqven.cli.hints import for_the_cli

    show_error(for_the_cli(err).to_dict())
    raise typer.Exit(code)


def project_root(root: Path | None) -> Path:
    from aqven.project.paths import find_root

    found = (root.resolve() if (root / "aqven.yaml").is_file() else None) if root else find_root(Path.cwd())
    if found is None:
        fail(
            AqvenError(
                "no AQVEN project here (no aqven.yaml in this folder or above)",
                code="PROJECT_NOT_FOUND",
                hint="cd into a project, pass --root, or create one with `aqven init DIR`",
            )
        )
    return found
