"""Datasets in and out: a JSONL dataset format the loader reads directly, and import from CSV / JSONL.

`datasets/<id>.jsonl` holds one case a line, `{"name": ..., "input": ..., "context": ..., "node_outputs": ...,
"expected_output": ..., "tags": [...]}`, and loads like `datasets/<id>.yaml` (the same keys, diagnostics naming
the line of the case). It is the format for large datasets: a line is parsed on its own, with no YAML alias
expansion to guard against, up to `MAX_CASES` cases.

`import_rows` maps the rows of a CSV or JSONL file onto cases. A column goes where its name says (`name`,
`tags`, `input.x`, `context.x`, `expected_output.x`, `node_outputs.node.x`, or `input` / `expected_output` as a
whole); every other column becomes `input.<column>`; `--map COLUMN=TARGET` moves a column elsewhere. Problems name
the source file, its line, a code and a hint, like `aqven check`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from aqven.errors import ProjectError
from aqven.project.diagnostics import Diagnostic
from aqven.project.schema import Case
from aqven.project.yaml_source import YamlDoc

MAX_CASES = 1_000_000
SECTIONS = ("input", "context", "expected_output", "node_outputs")
TARGETS = ("name", "tags", *SECTIONS)


def _fail(message: str, file: str, line: int, hint: str, code: str = "E_DATASET_JSONL") -> ProjectError:
    return ProjectError(message, code=code, file=file, line=line, hint=hint)


def parse_jsonl(text: str, file: str) -> YamlDoc:
    """A JSONL dataset as a document `{"cases": [...]}` with the line of every case and of its keys."""
    cases: list[Any] = []
    lines: dict[tuple[str | int, ...], int] = {(): 1, ("cases",): 1}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(cases) >= MAX_CASES:
            raise _fail(
                f"the dataset has more than {MAX_CASES:,} cases",
                file,
                number,
                "split it into several datasets (one file each), or select cases by tags",
                code="E_DATASET_TOO_LARGE",
            )
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise _fail(f"line {number} is not JSON: {exc}", file, number, "write one JSON object per line") from None
        if not isinstance(value, dict):
            raise _fail(
                f"line {number} is not a JSON object",
                file,
                number,
                'write one case a line: {"name": ..., "input": ...}',
            )
        i = len(cases)
        lines[("cases", i)] = number
        for key in value:
            lines[("cases", i, key)] = number
        cases.append(value)
    return YamlDoc(file=file, data={"cases": cases}, lines=lines)


def read_jsonl(path: Path, file: str) -> YamlDoc:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise ProjectError(
            f"cannot read file: {getattr(exc, 'strerror', None) or exc}",
            code="E_FILE_UNREADABLE",
            file=file,
            hint="save it as UTF-8 text and check its permissions",
        ) from None
    return parse_jsonl(text, file)


# ---- import -------------------------------------------------------------------------------------------


@dataclass
class Imported:
    """The cases an import made, and its problems (each names the source file and line)."""

    cases: list[Case] = field(default_factory=list)
    problems: list[Diagnostic] = field(default_factory=list)


def parse_mapping(items: list[str]) -> dict[str, str]:
    """`COLUMN=TARGET` pairs; a target is `name`, `tags`, or a section, optionally dotted (`input.ticket`)."""
    out: dict[str, str] = {}
    for item in items:
        column, sep, target = item.partition("=")
        if not sep or not column or target.split(".")[0] not in TARGETS or target.startswith("name."):
            raise ProjectError(
                f"--map {item!r} is not COLUMN=TARGET",
                code="E_IMPORT_MAPPING",
                hint=f"the target is one of {', '.join(TARGETS)}, optionally with .field (input.ticket)",
            )
        out[column] = target
    return out


def read_rows(path: Path, file: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a CSV file (values as text) or a JSONL file (values as they are)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, ValueError) as exc:
        raise ProjectError(
            f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}",
            code="E_FILE_UNREADABLE",
            file=file,
            hint="give a UTF-8 .csv or .jsonl file",
        ) from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for row in reader:
            extra = row.pop(None, None)  # type: ignore[call-overload]
            if extra:
                raise _fail(
                    f"line {reader.line_num} has more values than the header has columns",
                    file,
                    reader.line_num,
                    "quote values that contain commas",
                    code="E_IMPORT_ROW",
                )
            yield reader.line_num, {k: v for k, v in row.items() if k is not None}
        return
    doc = parse_jsonl(text, file)
    for i, value in enumerate(doc.data["cases"]):
        yield doc.lines[("cases", i)], value


def _place(case: dict[str, Any], target: str, value: Any) -> None:
    head, _, rest = target.partition(".")
    if not rest:
        case[head] = value
        return
    node = case.setdefault(head, {})
    if not isinstance(node, dict):
        raise ValueError(f"{head} is given as a whole and by field")
    *parents, leaf = rest.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def named_by(columns: Iterable[str], mapping: dict[str, str]) -> bool:
    """True when one of `columns` gives the case's name under `mapping`."""
    return any(_target(c, mapping) == "name" for c in columns)


def _target(column: str, mapping: dict[str, str]) -> str:
    if column in mapping:
        return mapping[column]
    if column.split(".")[0] in TARGETS:
        return column
    return f"input.{column}"


def import_rows(
    path: Path,
    file: str,
    mapping: dict[str, str] | None = None,
    *,
    rows: Iterable[tuple[int, dict[str, Any]]] | None = None,
) -> Imported:
    """The cases of a CSV or JSONL file (or of `rows`, (line, row) pairs read elsewhere, when given) under the
    column mapping; one problem per row that makes no case."""
    mapping = mapping or {}
    out = Imported()
    seen: dict[str, int] = {}
    csv_file = path.suffix.lower() == ".csv"
    try:
        for line, row in read_rows(path, file) if rows is None else rows:
            if len(out.cases) >= MAX_CASES:
                out.problems.append(
                    Diagnostic(
                        code="E_DATASET_TOO_LARGE",
                        severity="error",
                        file=file,
                        line=line,
                        message=f"more than {MAX_CASES:,} rows",
                        hint="split the file into several datasets",
                    )
                )
                break
            case: dict[str, Any] = {}
            try:
                for column, value in row.items():
                    if csv_file and value == "" and _target(column, mapping) != "name":
                        continue  # an empty cell is a missing value, not an empty text
                    target = _target(column, mapping)
                    if target == "tags" and isinstance(value, str):
                        value = [t.strip() for t in value.replace(";", ",").split(",") if t.strip()]
                    _place(case, target, value)
                made = Case.model_validate(case)
            except (ValueError, ValidationError) as exc:
                out.problems.append(_row_problem(exc, file, line))
                continue
            if made.name in seen:
                out.problems.append(
                    Diagnostic(
                        code="E_IMPORT_ROW",
                        severity="error",
                        file=file,
                        line=line,
                        message=f"case name {made.name!r} is also on line {seen[made.name]}",
                        hint="case names are unique in a dataset: rename one (a renamed case may switch sides)",
                    )
                )
                continue
            seen[made.name] = line
            out.cases.append(made)
    except ProjectError as exc:
        out.problems.append(Diagnostic.from_error(exc))
    return out


def _row_problem(exc: Exception, file: str, line: int) -> Diagnostic:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = f"{where}: {first['msg']}" if where else first["msg"]
        hint = "give every row a name column (or --map COLUMN=name)" if where == "name" else "fix the row or --map"
    else:
        message, hint = str(exc), "map a column either as a whole or by field, not both"
    return Diagnostic(code="E_IMPORT_ROW", severity="error", file=file, line=line, message=message, hint=hint)


def case_json(case: Case) -> dict[str, Any]:
    """A case as a JSONL line writes it: empty keys left out."""
    return case.model_dump(mode="json", exclude_defaults=True)


def write_jsonl(cases: list[Case], dest: Path) -> None:
    """Write the cases one a line (through a temporary file, so a reader never sees half a dataset)."""
    tmp = dest.with_name(dest.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for case in cases:
            fh.write(json.dumps(case_json(case), ensure_ascii=False, sort_keys=False) + "\n")
    tmp.replace(dest)


def write_csv(cases: list[Case], dest: Path) -> None:
    """Cases as CSV: `name`, `tags` (comma-separated) and one column per field of each section (JSON text for a
    value that is not text)."""
    rows: list[dict[str, str]] = []
    columns: dict[str, None] = {"name": None}
    for case in cases:
        row = {"name": case.name}
        data = case_json(case)
        if case.tags:
            row["tags"] = ",".join(case.tags)
            columns.setdefault("tags")
        for section in SECTIONS:
            value = data.get(section)
            items = value.items() if isinstance(value, dict) else ([("", value)] if value is not None else [])
            for key, item in items:
                column = f"{section}.{key}" if key else section
                row[column] = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
                columns.setdefault(column)
        rows.append(row)
    with dest.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
