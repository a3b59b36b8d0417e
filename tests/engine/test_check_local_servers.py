"""`aqven check` of agents on local servers: an output mode known to fail on the named server, a base_url without
/v1, and a `server:` on a provider that is not openai-compatible, each with its line and a hint."""

from __future__ import annotations

from pathlib import Path

from aqven.engine.check import check_agents
from aqven.project.loader import load_project
from support.projects import write_files


def test_check_warns_about_modes_known_to_fail_and_a_base_url_without_v1(tmp_path: Path) -> None:
    root = write_files(
        tmp_path / "p",
        {
            "aqven.yaml": "package: local\n",
            "agents/tool.yaml": "model: openai-compatible:gemma\nserver: llama-cpp\noutput_mode: tool\n",
            "agents/native.yaml": "model: openai-compatible:gemma\nserver: llama-cpp\noutput_mode: native\n",
            "agents/prompted.yaml": "model: openai-compatible:gemma\nserver: llama-cpp\noutput_mode: prompted\n",
            "agents/nov1.yaml": "model: openai-compatible:gemma\nbase_url: http://127.0.0.1:8080\n",
            "agents/wrong.yaml": "model: openai:gpt-4o-mini\nserver: ollama\n",
        },
    )
    diagnostics = check_agents(load_project(root))
    found = {(d.code, d.file, d.line) for d in diagnostics}
    assert ("W_OUTPUT_MODE_UNSUPPORTED", "agents/tool.yaml", 3) in found, found
    for fine in ("agents/prompted.yaml", "agents/native.yaml"):  # native works on llama.cpp (json_object + schema)
        assert not any(d.file == fine and d.code.startswith(("W_OUTPUT", "E_BASE")) for d in diagnostics), fine
    assert ("W_BASE_URL_NO_V1", "agents/nov1.yaml", 2) in found
    assert ("E_SERVER_PROVIDER", "agents/wrong.yaml", 2) in found
    hint = next(d.hint for d in diagnostics if d.code == "W_OUTPUT_MODE_UNSUPPORTED")
    assert "use output_mode: prompted" in hint
    assert load_project(root).agents["prompted"].server == "llama-cpp"
