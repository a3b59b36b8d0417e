"""`aqven check` asks a local server which models it serves (`W_MODEL_NOT_SERVED`): only a loopback server, once
per URL; a server that is down, a remote one, and llama.cpp's (any name works there) give no warning. Real HTTP
to a fake server on 127.0.0.1, and the real CLI."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from aqven.models.served import served_model_diagnostics
from aqven.project.loader import load_project
from support.commands import aqven
from support.fake_provider import FakeProvider
from support.projects import write_files

pytestmark = pytest.mark.usefixtures("clean_model_env")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def project(tmp_path: Path, url: str) -> Path:
    down = f"http://127.0.0.1:{free_port()}/v1"
    return write_files(
        tmp_path / "p",
        {
            "aqven.yaml": "package: local\n",
            "agents/wrong.yaml": f"description: a typo\nmodel: openai-compatible:gemma3:27b\nbase_url: {url}\n",
            "agents/right.yaml": f"model: openai-compatible:gemma3:270m\nbase_url: {url}\n",
            "agents/llama.yaml": f"model: openai-compatible:anything\nserver: llama-cpp\nbase_url: {url}\n",
            "agents/down.yaml": f"model: openai-compatible:gemma3:27b\nbase_url: {down}\n",
            "agents/remote.yaml": "model: openai-compatible:gemma3:27b\nbase_url: http://192.0.2.1:11434/v1\n",
        },
    )


def test_a_model_the_local_server_does_not_list_is_warned_about(fp: FakeProvider, tmp_path: Path) -> None:
    fp.models = {"object": "list", "data": [{"id": "gemma3:270m", "object": "model"}, {"id": "qwen3:0.6b"}]}
    found = served_model_diagnostics(load_project(project(tmp_path, fp.base_url)))
    assert [(d.code, d.file, d.line, d.severity) for d in found] == [
        ("W_MODEL_NOT_SERVED", "agents/wrong.yaml", 2, "warning")
    ]
    assert "gemma3:27b" in found[0].message and "gemma3:270m, qwen3:0.6b" in found[0].message
    assert found[0].hint == "model: openai-compatible:gemma3:270m"
    asked = [r for r in fp.requests if r.method == "GET"]
    assert [r.path for r in asked] == ["/v1/models"]  # once for the URL two agents share


def test_aqven_check_prints_it_and_stays_a_warning(fp: FakeProvider, tmp_path: Path) -> None:
    fp.models = {"data": [{"id": "gemma3:270m"}]}
    out = aqven("check", "--json", cwd=project(tmp_path, fp.base_url))
    report = json.loads(out.stdout)
    codes = [(d["code"], d["file"]) for d in report["diagnostics"] if d["code"] == "W_MODEL_NOT_SERVED"]
    assert codes == [("W_MODEL_NOT_SERVED", "agents/wrong.yaml")] and report["errors"] == 0


def test_a_server_without_a_model_list_says_nothing(fp: FakeProvider, tmp_path: Path) -> None:
    fp.models = {"data": []}
    assert served_model_diagnostics(load_project(project(tmp_path, fp.base_url))) == []
