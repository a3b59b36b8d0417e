"""`aqven dataset import --hf NAME`: a split of a Hugging Face dataset repository as import rows.

The repository's data files (JSONL, CSV, Parquet) of one split are downloaded with `huggingface_hub` (its cache,
`HF_TOKEN` for gated sets, `HF_ENDPOINT` for a mirror, `HF_HUB_OFFLINE=1` to read only the cache) and read
row by row; rows without a name get ``<split>_<n>``. Each problem names the repository's file and row.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aqven.errors import ProjectError
from aqven.project.dataset_files import Imported, import_rows, named_by, read_rows
from aqven.project.diagnostics import Diagnostic

DATA_SUFFIXES = (".jsonl", ".csv", ".parquet")
SPLIT_WORDS = ("train", "test", "validation", "valid", "dev", "eval")
HF_EXTRA_HINT = 'pip install "aqven[hf]" (huggingface-hub and pyarrow) into AQVEN\'s environment'


@dataclass(frozen=True)
class HfFile:
    path: Path  # the downloaded file in the local cache
    name: str  # `repo/file` in the repository, for diagnostics


def split_of(file: str) -> str:
    """The split a data file belongs to, by the usual layouts: `train.jsonl`, `data/test-00000-of-00001.parquet`,
    `default/validation/0000.parquet`; a file that names none is `train` (a one-file dataset)."""
    parts = file.split("/")
    parts[-1] = parts[-1].rsplit(".", 1)[0]
    for part in reversed(parts):
        word = re.match(r"[A-Za-z]+", part)
        if word and word.group(0).lower() in SPLIT_WORDS:
            return word.group(0).lower()
    return "train"


def _error(message: str, hint: str, code: str = "E_HF_DOWNLOAD") -> ProjectError:
    return ProjectError(message, code=code, hint=hint)


def download_split(repo: str, split: str | None, revision: str | None = None) -> tuple[str, list[HfFile]]:
    """The split's name and its data files, downloaded (or found in the cache)."""
    try:
        from huggingface_hub import HfApi, hf_hub_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError
    except ImportError:
        raise _error("--hf needs huggingface-hub, which is not installed", HF_EXTRA_HINT, "E_HF_UNAVAILABLE") from None
    try:
        cached = _cached_snapshot(repo, revision)
        files = (
            sorted(str(f.relative_to(cached)) for f in cached.rglob("*") if f.is_file())
            if cached is not None
            else HfApi().list_repo_files(repo, repo_type="dataset", revision=revision)
        )
        data = sorted(f for f in files if f.lower().endswith(DATA_SUFFIXES))
        splits = sorted({split_of(f) for f in data})
        if not data:
            message = f"dataset {repo} has no .jsonl, .csv or .parquet file"
            raise _error(message, "download one of its files and import it by path", "E_IMPORT_FORMAT")
        chosen = split or (splits[0] if len(splits) == 1 else None)
        if chosen is None or chosen not in splits:
            what = f"no split {split!r}" if split else "several splits"
            raise _error(f"dataset {repo} has {what}: {', '.join(splits)}", f"pass --split {splits[0]}", "E_HF_SPLIT")
        paths = [
            HfFile(
                cached / f
                if cached is not None
                else Path(hf_hub_download(repo, f, repo_type="dataset", revision=revision)),
                f"{repo}/{f}",
            )
            for f in data
            if split_of(f) == chosen
        ]
    except RepositoryNotFoundError:
        raise _error(
            f"no dataset {repo} on the hub (or it is private)",
            "check the name; export HF_TOKEN=… for a private or gated one",
        ) from None
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
        raise _error(
            f"cannot download dataset {repo}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            "check the network; HF_HUB_OFFLINE=1 reads a dataset already in the local cache",
        ) from None
    return chosen, paths


def _cached_snapshot(repo: str, revision: str | None) -> Path | None:
    """Offline (``HF_HUB_OFFLINE=1``): the folder of the repository's files already in the local cache (what
    earlier imports downloaded); online: None, the hub lists the files."""
    from huggingface_hub import constants, snapshot_download

    if not constants.HF_HUB_OFFLINE:
        return None
    return Path(snapshot_download(repo, repo_type="dataset", revision=revision, local_files_only=True))


def parquet_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, row) of a Parquet file, values as Python values."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _error(
            "a Parquet file needs pyarrow, which is not installed", HF_EXTRA_HINT, "E_HF_UNAVAILABLE"
        ) from None
    n = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            n += 1
            yield n, row


def _named(
    rows: Iterator[tuple[int, dict[str, Any]]], split: str, numbers: Iterator[int]
) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, row in rows:
        yield line, {**row, "name": f"{split}_{next(numbers):05d}"}


def import_hf(repo: str, split: str | None, revision: str | None, mapping: dict[str, str]) -> Imported:
    """The cases of one split of a Hugging Face dataset: its files in order, rows without a name as
    ``<split>_<n>``, a name given twice (also across files) refused as in one file."""
    chosen, files = download_split(repo, split, revision)
    out = Imported()
    seen: dict[str, str] = {}
    numbers = itertools.count(1)
    for f in files:
        rows = parquet_rows(f.path) if f.path.suffix.lower() == ".parquet" else read_rows(f.path, f.name)
        first = next(rows, None)
        if first is None:
            continue
        rows = itertools.chain([first], rows)
        if not named_by(first[1], mapping):
            rows, mapping_here = _named(rows, chosen, numbers), {**mapping, "name": "name"}
        else:
            mapping_here = mapping
        got = import_rows(f.path, f.name, mapping_here, rows=rows)
        out.problems.extend(got.problems)
        for case in got.cases:
            if case.name in seen:
                out.problems.append(
                    Diagnostic(
                        code="E_IMPORT_ROW",
                        severity="error",
                        file=f.name,
                        message=f"case name {case.name!r} is also in {seen[case.name]}",
                        hint="case names are unique in a dataset: map another column to name",
                    )
                )
                continue
            seen[case.name] = f.name
            out.cases.append(case)
    return out
