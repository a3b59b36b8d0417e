"""What `aqven serve --cluster` and `aqven worker` refuse before they start: a store that is not shared (SQLite)."""

from __future__ import annotations

from pathlib import Path

from aqven.project.init import init_project
from support.commands import aqven, cli_env


def test_cluster_mode_and_a_worker_need_a_postgresql_store(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p", "lumen")
    env = {k: v for k, v in cli_env().items() if k != "AQVEN_STORE"}
    for args in (("serve", "--cluster"), ("worker",), ("workers",)):
        out = aqven(*args, cwd=root, env=env, timeout=60)
        text = out.stdout + out.stderr
        assert out.returncode == 2, (args, text)
        assert "CLUSTER_NEEDS_POSTGRES" in text and "hint:" in text and "Traceback" not in text, (args, text)
