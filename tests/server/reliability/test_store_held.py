"""One server decides for a store on PostgreSQL: a second `aqven serve` on the same store, from another project
folder (as from another machine), exits with STORE_HELD naming the holder; once the holder is SIGKILLed,
PostgreSQL lets the lock go and a new server starts. Real server processes on a real PostgreSQL."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from aqven.project.init import init_project
from support.commands import aqven, cli_env
from support.live_server import LiveServer


def test_a_second_server_on_the_same_store_is_refused_and_named(tmp_path: Path, pg_database: str) -> None:
    env = {**cli_env(), "AQVEN_STORE": pg_database}
    first_root = init_project(tmp_path / "first", "lumen")
    second_root = init_project(tmp_path / "second", "lumen")
    with LiveServer(first_root, env) as first:
        assert first.get("/api/health").get("status") == "ok"
        out = aqven("serve", cwd=second_root, env=env, timeout=60)
        assert out.returncode == 2, out.stdout + out.stderr
        text = out.stdout + out.stderr
        assert "STORE_HELD" in text and "hint:" in text, text
        assert first.proc is not None and f"pid {first.proc.pid}" in text and socket.gethostname() in text, text
        assert "aqven serve first" in text, text  # the holder's project folder
        # With the store given on the command line, the same.
        bare = {k: v for k, v in env.items() if k != "AQVEN_STORE"}
        out = aqven("serve", "--store", pg_database, cwd=second_root, env=bare, timeout=60)
        assert out.returncode == 2 and "STORE_HELD" in out.stdout + out.stderr
        first.kill()  # a crash: PostgreSQL lets the session's lock go
    with LiveServer(second_root, env) as second:
        assert second.get("/api/health").get("status") == "ok"
        status = aqven("server", "status", "--json", cwd=second_root, env=env)
        assert '"store": "postgresql://' in status.stdout, status.stdout
    assert os.environ.get("AQVEN_STORE") in (None, pg_database)


def test_a_bad_store_setting_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p", "lumen")
    env = {k: v for k, v in cli_env().items() if k != "AQVEN_STORE"}
    out = aqven("serve", "--store", "mysql://x@y/z", cwd=root, env=env, timeout=60)
    assert out.returncode == 2 and "STORE_INVALID" in out.stdout + out.stderr and "hint:" in out.stdout + out.stderr
    (root / ".aqven").mkdir(exist_ok=True)
    (root / ".aqven" / "local.yaml").write_text("store: oracle://nowhere\n")
    out = aqven("store", "show", cwd=root, env=env)
    assert out.returncode == 2 and "STORE_INVALID" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
