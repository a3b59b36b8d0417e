"""`aqven store copy` both ways (SQLite -> PostgreSQL -> SQLite) on a project with a held-out finding and an
approval: every table arrives with the same digest, the finding verifies on the copy, FINDINGS.md regenerates from
it byte for byte, and the project then runs on the copy. A copy into a store that holds a record is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aqven.store.location import StoreLocation
from aqven.store.open import open_database
from support.commands import aqven, cli_env
from support.series_kit import case_names, client_for, first_on, settle, start, write_tiny

TABLES = ("series", "attempts", "runs", "events", "human_answers", "approvals", "series_cells", "series_costs")


def _project_with_a_finding(tmp_path: Path) -> tuple[Path, str]:
    good = case_names(2, 12)
    bad = [first_on("holdout", "fail", i * 1000) for i in range(12)]
    root = write_tiny(tmp_path / "tiny", good + bad)
    with client_for(root) as client:
        settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        held = settle(
            client, start(client, experiment_id="rate", on="holdout", cases=12, simulate=True)["series"]["series_id"]
        )
    assert held["verdict"]["verdict"] == "confirmed" and held["finding"]
    return root, held["series_id"]


def _counts(location: StoreLocation) -> dict[str, int]:
    db = open_database(location)
    try:
        return {t: int(db.query_one(f"SELECT COUNT(*) AS n FROM {t}")["n"]) for t in TABLES}  # type: ignore[index]
    finally:
        db.close()


def _copy(root: Path, to: str, store: str | None) -> tuple[int, str]:
    env = cli_env()
    env.pop("AQVEN_STORE", None)
    if store is not None:
        env["AQVEN_STORE"] = store
    out = aqven("store", "copy", "--to", to, cwd=root, env=env, timeout=300)
    return out.returncode, out.stdout + out.stderr


def test_a_copy_both_ways_keeps_every_row_and_the_finding(
    tiny_env: Path, tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AQVEN_STORE", raising=False)
    root, held = _project_with_a_finding(tmp_path)
    source = StoreLocation("sqlite", path=root / ".aqven" / "aqven.sqlite")
    before = _counts(source)
    assert before["attempts"] > 0 and before["events"] > 0

    code, text = _copy(root, pg_database, None)
    assert code == 0, text
    assert text.count(" same") == 9 and "DIFFERENT" not in text, text
    assert "findings: 1 of 1 verify on the copy" in text and "FINDINGS.md: byte-identical" in text
    assert _counts(StoreLocation("postgresql", dsn=pg_database)) == before

    back = tmp_path / "back.sqlite"
    code, text = _copy(root, f"sqlite:{back}", pg_database)
    assert code == 0, text
    assert text.count(" same") == 9 and "findings: 1 of 1 verify" in text and "byte-identical" in text
    assert _counts(StoreLocation("sqlite", path=back)) == before

    # The project runs on the copy: the server reads the held-out series and its finding from PostgreSQL.
    md = (root / "FINDINGS.md").read_text()
    monkeypatch.setenv("AQVEN_STORE", pg_database)
    with client_for(root) as client:
        snap = client.get(f"/api/series/{held}").json()
        assert snap["status"] == "done" and snap["verdict"]["verdict"] == "confirmed"
        again = settle(client, start(client, experiment_id="rate", simulate=True)["series"]["series_id"])
        assert again["status"] == "done"
    assert (root / "FINDINGS.md").read_text() == md
    check = aqven("check", "--json", cwd=root, env={**cli_env(), "AQVEN_STORE": pg_database})
    codes = {d["code"] for d in json.loads(check.stdout)["diagnostics"]}
    assert not codes & {"E_FINDING_TAMPERED", "E_FINDING_SERIES_MISSING", "W_FINDINGS_STALE"}, check.stdout


def test_a_copy_into_a_store_that_holds_a_record_is_refused(
    tiny_env: Path, tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AQVEN_STORE", raising=False)
    root, _ = _project_with_a_finding(tmp_path)
    assert _copy(root, pg_database, None)[0] == 0
    code, text = _copy(root, pg_database, None)
    assert code == 2 and "STORE_NOT_EMPTY" in text, text
    assert "hint:" in text
    # A password in the DSN is never printed, not even in an error.
    user, _, rest = pg_database.removeprefix("postgresql://").partition("@")
    code, text = _copy(root, f"postgresql://{user}:hunter2@{rest}", None)
    assert code == 2 and "STORE_NOT_EMPTY" in text and "hunter2" not in text and ":***@" in text, text
    code, text = _copy(root, f"postgresql://{user}:hunter2@127.0.0.1:1/nowhere", None)
    assert code == 2 and "STORE_UNAVAILABLE" in text and "hunter2" not in text, text
