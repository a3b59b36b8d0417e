"""`aqven dataset import`, `export` and `cases`: datasets in and out of a project, and their working cases; no
server needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from aqven.cli.render import console, err_console
from aqven.errors import ProjectError

if TYPE_CHECKING:
    from aqven.project.diagnostics import Diagnostic

dataset_app = typer.Typer(
    no_args_is_help=True, help="Datasets in and out: import CSV / JSONL, export; list a dataset's working cases."
)
FORMATS = ("jsonl", "yaml", "csv")
RootOption = Annotated[Path | None, typer.Option(help="the project folder (default: found from here)")]


def _problem(code: str, message: str, hint: str, file: str | None = None) -> Diagnostic:
    from aqven.project.diagnostics import Diagnostic

    return Diagnostic(code=code, severity="error", file=file, message=message, hint=hint)


def _fail(*problems: Diagnostic, code: int = 1) -> NoReturn:
    for p in problems:
        err_console.print(p.render(), markup=False)
    raise typer.Exit(code)


def _root(root: Path | None) -> Path:
    from aqven.project.paths import find_root

    found = (root.resolve() if (root / "aqven.yaml").is_file() else None) if root else find_root(Path.cwd())
    if found is None:
        message = "no AQVEN project here (no aqven.yaml in this folder or above)"
        _fail(_problem("E_PROJECT_MISSING", message, "cd into a project, or pass --root"), code=2)
    return found


def _yaml_text(cases: list[dict[str, object]]) -> str:
    import yaml

    return yaml.safe_dump({"cases": cases}, sort_keys=False, allow_unicode=True)


@dataset_app.command("import")
def import_cmd(
    source: Annotated[Path | None, typer.Argument(help="a .csv or .jsonl file, one case a row")] = None,
    *,
    dataset_id: Annotated[str, typer.Option("--id", help="the dataset id: writes datasets/<id>.jsonl")],
    hf: Annotated[
        str | None, typer.Option("--hf", help="a Hugging Face dataset (owner/name) instead of a file")
    ] = None,
    split: Annotated[str | None, typer.Option("--split", help="with --hf: the split (train, test, …)")] = None,
    revision: Annotated[str | None, typer.Option("--revision", help="with --hf: a branch, tag or commit")] = None,
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", help="COLUMN=TARGET, e.g. question=input.ticket, label=expected_output.label, id=name"),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="jsonl (any size) or yaml")] = "jsonl",
    force: Annotated[bool, typer.Option("--force", help="replace a dataset of that id")] = False,
    root: RootOption = None,
) -> None:
    """Import a CSV or JSONL file, or a split of a Hugging Face dataset, as a dataset, with field mapping;
    problems name the file and line."""
    # Imported here: the CLI starts without loading the project layer for commands that do not need it.
    from aqven.project.dataset_files import case_json, import_rows, parse_mapping, write_jsonl
    from aqven.project.loader import load_project
    from aqven.project.paths import rel
    from aqven.project.schema import is_identifier

    project_root = _root(root)
    if not is_identifier(dataset_id):
        hint = "ids use letters, digits, _ and -, and start with a letter or _"
        _fail(_problem("E_INVALID_ID", f"{dataset_id!r} is not a valid id", hint), code=2)
    if (source is None) == (hf is None):
        hint = "aqven dataset import FILE --id ID, or aqven dataset import --hf OWNER/NAME --id ID"
        _fail(_problem("E_IMPORT_FORMAT", "give either a file or --hf, not both or neither", hint), code=2)
    name = source.name if source is not None else str(hf)
    if fmt not in ("jsonl", "yaml") or (source is not None and source.suffix.lower() not in (".csv", ".jsonl")):
        hint = "import a .csv or .jsonl file, --format jsonl or yaml"
        _fail(_problem("E_IMPORT_FORMAT", f"cannot import {name} as {fmt}", hint), code=2)
    try:
        mapping = parse_mapping(map_ or [])
    except ProjectError as exc:
        _fail(_problem(exc.code, exc.message, exc.hint), code=2)
    folder = project_root / "datasets"
    existing = [p for p in (folder / f"{dataset_id}{ext}" for ext in (".yaml", ".yml", ".jsonl")) if p.exists()]
    if existing and not force:
        hint = "pass --force to replace it, or another --id"
        _fail(_problem("E_DUPLICATE_ID", f"dataset {dataset_id!r} exists", hint, rel(project_root, existing[0])))
    if source is not None:
        got = import_rows(source, str(source), mapping)
    else:
        try:
            from aqven.cli.dataset_hf import import_hf

            got = import_hf(str(hf), split, revision, mapping)
        except ProjectError as exc:
            _fail(_problem(exc.code, exc.message, exc.hint), code=1)
    if got.problems:
        _fail(*got.problems)
    if not got.cases:
        _fail(_problem("E_IMPORT_ROW", "no rows to import", "the file has no rows under its header", name))
    folder.mkdir(parents=True, exist_ok=True)
    for old in existing:
        old.unlink()
    dest = folder / f"{dataset_id}.{fmt}"
    if fmt == "jsonl":
        write_jsonl(got.cases, dest)
    else:
        dest.write_text(_yaml_text([case_json(c) for c in got.cases]), encoding="utf-8")
    # What aqven check says of the new file: the loader reads it as it will for every series.
    file = rel(project_root, dest)
    mine = [d for d in load_project(project_root).diagnostics if d.file == file]
    for d in mine:
        (err_console if d.severity == "error" else console).print(d.render(), markup=False)
    console.print(f"imported {len(got.cases)} cases into {file}")
    raise typer.Exit(1 if any(d.severity == "error" for d in mine) else 0)


@dataset_app.command("export")
def export_cmd(
    dataset_id: Annotated[str, typer.Argument(help="the dataset to export")],
    out: Annotated[Path, typer.Option("-o", "--out", help="the file to write (.jsonl, .csv or .yaml)")],
    root: RootOption = None,
) -> None:
    """Export a dataset to JSONL, CSV or YAML (by the file's suffix), every case, in file order."""
    from aqven.project.dataset_files import case_json, write_csv, write_jsonl
    from aqven.project.loader import load_project

    project = load_project(_root(root))
    dataset = project.datasets.get(dataset_id)
    if dataset is None:
        problems = [d for d in project.diagnostics if d.file and Path(d.file).stem == dataset_id]
        hint = f"datasets: {', '.join(sorted(project.datasets)) or 'none'}"
        _fail(*(problems or [_problem("E_DATASET_MISSING", f"no dataset {dataset_id!r}", hint)]))
    suffix = out.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        _fail(_problem("E_IMPORT_FORMAT", f"cannot export to {out.name}", "name a .jsonl, .csv or .yaml file"), code=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == "jsonl":
        write_jsonl(dataset.cases, out)
    elif suffix == "csv":
        write_csv(dataset.cases, out)
    else:
        out.write_text(_yaml_text([json.loads(json.dumps(case_json(c))) for c in dataset.cases]), encoding="utf-8")
    console.print(f"exported {len(dataset.cases)} cases of {dataset_id} to {out}")


@dataset_app.command("cases")
def cases_cmd(
    dataset_id: Annotated[str | None, typer.Argument(help="the dataset (default: every dataset)")] = None,
    root: RootOption = None,
) -> None:
    """List a dataset's working (dev) cases by name, in file order; held-out cases are only counted."""
    from aqven.project.loader import load_project

    project = load_project(_root(root))
    if dataset_id is not None and dataset_id not in project.datasets:
        hint = f"datasets: {', '.join(sorted(project.datasets)) or 'none'}"
        _fail(_problem("E_DATASET_MISSING", f"no dataset {dataset_id!r}", hint))
    for did in [dataset_id] if dataset_id is not None else sorted(project.datasets):
        cases = project.datasets[did].cases
        dev = [c.name for c in cases if project.side(c.name) == "dev"]
        console.print(
            f"{did}: {len(dev)} working (dev) case(s); {len(cases) - len(dev)} held-out case(s), not listed",
            markup=False,
        )
        for name in dev:
            console.print(f"  {name}", markup=False)
