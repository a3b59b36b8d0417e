"""`aqven init`: write the showcase project under a package name."""

from __future__ import annotations

import re
import shutil
from importlib.resources import as_file, files
from pathlib import Path

from aqven.errors import INIT_BAD_PACKAGE, INIT_TARGET_EXISTS, AqvenError

TEMPLATE = "showcase"
PACKAGE_LINE = re.compile(r"^package:\s*lumen\s*$", re.MULTILINE)


def default_package(target: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", target.resolve().name).strip("_") or "project"
    return name if not name[0].isdigit() else f"p_{name}"


def init_project(target: Path, package: str | None = None) -> Path:
    package = package or default_package(target)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", package):
        raise AqvenError(
            f"package name {package!r} is not a Python identifier",
            code=INIT_BAD_PACKAGE,
            hint="use letters, digits and _, starting with a letter, e.g. --package lumen",
        )
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise AqvenError(
            f"{target} exists and is not empty",
            code=INIT_TARGET_EXISTS,
            hint="choose a new folder name, or empty the folder first",
        )
    with as_file(files("aqven") / "templates" / TEMPLATE) as source:
        shutil.copytree(
            source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".aqven")
        )
    config = target / "aqven.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(PACKAGE_LINE.sub(f"package: {package}", text, count=1), encoding="utf-8")
    return target
