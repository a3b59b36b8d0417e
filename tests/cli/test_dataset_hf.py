"""`aqven dataset import --hf`: one split of a Hugging Face dataset, downloaded by `huggingface_hub` from a fake
hub on 127.0.0.1 (``HF_ENDPOINT``), through the real command: JSONL, CSV and Parquet files, names made for rows
without one, the split chosen or asked for, a missing repository, a bad row at its file and line, and a second
import from the local cache with the hub gone."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aqven.project.loader import load_project
from support.commands import aqven, cli_env
from support.fake_hf_hub import FakeHfHub
from support.projects import write_files


def parquet(rows: list[dict[str, object]]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


REPOS = {
    "acme/tickets": {
        "README.md": b"# tickets\n",
        "data/train.jsonl": b'{"question": "Where is my order?", "label": "shipping"}\n'
        b'{"question": "The strip flickers", "label": "repair"}\n',
        "data/test-00000-of-00001.parquet": parquet(
            [{"id": "t1", "question": "Refund please", "n": 3}, {"id": "t2", "question": "Hello", "n": 4}]
        ),
    },
    "acme/bad": {"test.csv": b"name,question\nok,fine\nok,twice\n"},
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_files(tmp_path / "p", {"aqven.yaml": "package: imports\n"})


@pytest.fixture
def hub() -> object:
    with FakeHfHub(REPOS) as server:
        yield server


def hf_env(tmp_path: Path, hub: FakeHfHub | None, **extra: str) -> dict[str, str]:
    env = cli_env(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1", **extra)
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    return env


def test_a_jsonl_split_imports_with_names_made_for_its_rows(root: Path, tmp_path: Path, hub: FakeHfHub) -> None:
    r = aqven(
        "dataset", "import", "--hf", "acme/tickets", "--split", "train", "--id", "tickets",
        "--map", "question=input.ticket", "--map", "label=expected_output.label",
        cwd=root, env=hf_env(tmp_path, hub),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "imported 2 cases into datasets/tickets.jsonl" in r.stdout
    cases = load_project(root).datasets["tickets"].cases
    assert [c.name for c in cases] == ["train_00001", "train_00002"]
    assert cases[0].input == {"ticket": "Where is my order?"} and cases[0].expected_output == {"label": "shipping"}
    assert "/datasets/acme/tickets/resolve/main/data/train.jsonl" in hub.paths
    assert not [p for p in hub.paths if p.endswith(".parquet")]  # only the split asked for is downloaded


def test_a_parquet_split_keeps_its_types_and_a_mapped_name(root: Path, tmp_path: Path, hub: FakeHfHub) -> None:
    r = aqven(
        "dataset", "import", "--hf", "acme/tickets", "--split", "test", "--id", "held", "--map", "id=name",
        cwd=root, env=hf_env(tmp_path, hub),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    cases = load_project(root).datasets["held"].cases
    assert [(c.name, c.input) for c in cases] == [
        ("t1", {"question": "Refund please", "n": 3}),
        ("t2", {"question": "Hello", "n": 4}),
    ]


def test_several_splits_ask_for_one_and_a_missing_repository_says_so(
    root: Path, tmp_path: Path, hub: FakeHfHub
) -> None:
    r = aqven("dataset", "import", "--hf", "acme/tickets", "--id", "x", cwd=root, env=hf_env(tmp_path, hub))
    assert r.returncode == 1 and "E_HF_SPLIT" in r.stderr and "test, train" in r.stderr
    assert "pass --split" in r.stderr and "Traceback" not in r.stderr
    r = aqven("dataset", "import", "--hf", "acme/nothing", "--id", "x", cwd=root, env=hf_env(tmp_path, hub))
    assert r.returncode == 1 and "E_HF_DOWNLOAD" in r.stderr and "no dataset acme/nothing" in r.stderr
    assert "HF_TOKEN" in r.stderr and "Traceback" not in r.stderr
    r = aqven("dataset", "import", "x.csv", "--hf", "acme/tickets", "--id", "x", cwd=root, env=hf_env(tmp_path, hub))
    assert r.returncode == 2 and "E_IMPORT_FORMAT" in r.stderr
    assert not (root / "datasets").exists()


def test_a_bad_row_names_the_repository_file_and_line(root: Path, tmp_path: Path, hub: FakeHfHub) -> None:
    r = aqven("dataset", "import", "--hf", "acme/bad", "--id", "bad", cwd=root, env=hf_env(tmp_path, hub))
    assert r.returncode == 1
    assert "acme/bad/test.csv:3" in r.stderr and "E_IMPORT_ROW" in r.stderr, r.stderr
    assert not (root / "datasets").exists()


def test_an_imported_split_imports_again_offline_from_the_cache(root: Path, tmp_path: Path) -> None:
    with FakeHfHub(REPOS) as hub:
        first = aqven(
            "dataset", "import", "--hf", "acme/tickets", "--split", "train", "--id", "a",
            cwd=root, env=hf_env(tmp_path, hub),
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
    # The hub is gone: offline, the cache answers; online, the error names the hub.
    offline = aqven(
        "dataset", "import", "--hf", "acme/tickets", "--split", "train", "--id", "b",
        cwd=root, env=hf_env(tmp_path, None, HF_HUB_OFFLINE="1"),
    )  # fmt: skip
    assert offline.returncode == 0, offline.stdout + offline.stderr
    a = (root / "datasets" / "a.jsonl").read_text(encoding="utf-8")
    assert a == (root / "datasets" / "b.jsonl").read_text(encoding="utf-8")
    assert [json.loads(line)["name"] for line in a.splitlines()] == ["train_00001", "train_00002"]
