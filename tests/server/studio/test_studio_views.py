"""Studio's decision reads over REST (server/studio_views.py): an attempt's checks, the case grid, the diff of
two series, latency and cost per variant, what finishing costs, and the runs list's outcomes. Each keeps the
held-out rule: no held-out case's name, attempt or run is in any of them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from aqven.project.init import init_project
from aqven.server.app import create_app
from aqven.server.operations.finish import _cents_up
from aqven.server.studio_views import percentile
from support.commands import api_client
from support.person import person_headers

MISTRAL = "reply_noninferior_mistral"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    mp = pytest.MonkeyPatch()
    mp.setenv("AQVEN_SIMULATE", "1")
    mp.setenv("AQVEN_SIM_LATENCY_SCALE", "0.01")
    root = init_project(tmp_path_factory.mktemp("views") / "lumen", "lumen")
    with api_client(create_app(root)) as c:
        yield c
    mp.undo()


def run(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post("/api/series", json=body)
    assert r.status_code == 201, r.text
    return settle(client, r.json()["series"]["series_id"])


def settle(client: TestClient, sid: str) -> dict[str, Any]:
    """Wait until the series ended or paused for a person."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        sn: dict[str, Any] = client.get(f"/api/series/{sid}", params={"wait_seconds": 10}).json()
        if sn["status"] not in ("running", "queued"):
            return sn
    raise AssertionError(sid)


def held_out_names(client: TestClient, sid: str) -> set[str]:
    series = client.app.state.service.series.store.get(sid)  # type: ignore[attr-defined]
    return {c for c, side in series.plan.sides.items() if side == "holdout"}


def test_the_attempt_of_a_failed_run_gives_each_check_and_its_quote(client: TestClient) -> None:
    sn = run(client, {"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 1, "seed": 1})
    sid = sn["series_id"]
    fail = client.get(f"/api/studio/series/{sid}/attempts", params={"outcome": "fail"}).json()["items"][0]
    att = client.get(f"/api/studio/runs/{fail['run_id']}/attempt").json()["attempt"]
    assert att["outcome"] == "fail" and att["counted"] is True and att["error_code"] == "CHECK_FAILED"
    check = next(c for c in att["checks"] if c["check_id"] == "promises")
    assert check["passed"] is False and check["quotes"] and check["quotes"][0] in fail["error_message"]
    passing = client.get(f"/api/studio/series/{sid}/attempts", params={"outcome": "pass"}).json()["items"][0]
    ok = client.get(f"/api/studio/runs/{passing['run_id']}/attempt").json()["attempt"]
    assert all(c["passed"] for c in ok["checks"]) and all(not c["quotes"] for c in ok["checks"])
    hand = client.post("/api/runs", json={"flow_id": "support_case", "case": "strip_flicker_credit", "wait": True})
    assert client.get(f"/api/studio/runs/{hand.json()['id']}/attempt").json() == {"attempt": None}
    assert client.get("/api/studio/runs/run_nope/attempt").status_code == 404
    # The runs list gives each run its attempt's outcome, and filters on it.
    page = client.get("/api/studio/runs", params={"series_id": sid, "outcome": "fail"}).json()
    assert page["total"] == len(client.get(f"/api/studio/series/{sid}/attempts?outcome=fail").json()["items"])
    assert {r["attempt_outcome"] for r in page["items"]} == {"fail"}
    assert client.get("/api/studio/runs", params={"outcome": "ok"}).json()["items"][0]["series_id"] is None
    assert client.get("/api/studio/runs", params={"outcome": "nope"}).status_code == 422


def test_grid_diff_and_distributions_of_working_cases(client: TestClient) -> None:
    a = run(client, {"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 1, "seed": 1})["series_id"]
    b = run(client, {"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 1, "seed": 2})["series_id"]
    grid = client.get(f"/api/studio/series/{b}/grid").json()
    assert grid["variants"] == ["gpt", "mistral"] and grid["total"] == 30 and len(grid["rows"]) == 30
    cells = [c for r in grid["rows"] for c in r["cells"].values()]
    assert sum(c["attempts"] for c in cells) == 60 and all(c["done"] == c["attempts"] for c in cells)
    fails = client.get(f"/api/studio/series/{b}/attempts", params={"outcome": "fail"}).json()["items"]
    only = client.get(f"/api/studio/series/{b}/grid", params={"failures_only": True}).json()
    assert {r["case"] for r in only["rows"]} == {f["case_name"] for f in fails} and only["failing"] == len(only["rows"])
    assert [r["failing"] for r in grid["rows"]][: only["failing"]] == [True] * only["failing"]  # failing first
    paged = client.get(f"/api/studio/series/{b}/grid", params={"per_page": 7, "page": 5}).json()
    assert paged["pages"] == 5 and len(paged["rows"]) == 2
    diff = client.get(f"/api/studio/series/{a}/diff/{b}").json()
    assert sum(diff["counts"].values()) == len(diff["rows"]) == diff["total"] == 60  # the same 30 cases × 2
    assert diff["repeats"] == [1, 1] and diff["least_p"] == 1.0  # one attempt a cell: no move beyond chance
    for row in diff["rows"]:
        moved = row["b_rate"] != row["a_rate"]
        assert row["change"] == ("within_chance" if moved else "same")
        assert row["a_sample"]["text"] and row["b_sample"]["text"]  # both outputs, one attempt each
    assert diff["counts"]["worse"] == diff["counts"]["better"] == 0 and diff["counts"]["within_chance"] > 0
    assert diff["inputs"]["same"] is True and diff["inputs"]["changed"] == []
    other = run(client, {"experiment_id": "reply_overpromise_risk", "on": "dev", "cases": 2, "repeats": 1})
    refused = client.get(f"/api/studio/series/{a}/diff/{other['series_id']}")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "SERIES_NOT_COMPARABLE"
    dist = client.get(f"/api/studio/series/{b}/distributions").json()
    assert [v["variant"] for v in dist["variants"]] == ["gpt", "mistral"] and dist["sealed"] is False
    for v in dist["variants"]:
        assert v["latency_ms"]["n"] == 30 and 0 < v["latency_ms"]["p50"] <= v["latency_ms"]["p95"]
        assert 0 < v["cost_usd"]["p50"] <= v["cost_usd"]["p95"]


def test_held_out_cases_stay_hidden_in_every_read(client: TestClient) -> None:
    sn = run(client, {"experiment_id": "reply_overpromise_risk", "on": "holdout", "cases": 4, "repeats": 1})
    sid = sn["series_id"]
    assert sn["status"] == "done"
    hidden = held_out_names(client, sid)
    assert len(hidden) == 4
    grid = client.get(f"/api/studio/series/{sid}/grid").json()
    assert grid["rows"] == [] and grid["held_out_cases"] == 4
    again = run(client, {"experiment_id": "reply_overpromise_risk", "on": "holdout", "cases": 4, "repeats": 1})
    diff = client.get(f"/api/studio/series/{sid}/diff/{again['series_id']}").json()
    assert diff["rows"] == [] and diff["total"] == 0  # no held-out case, output or pass rate one by one
    hidden |= held_out_names(client, again["series_id"])
    for path in (
        f"/api/studio/series/{sid}/grid",
        f"/api/studio/series/{sid}/distributions",
        f"/api/studio/series/{sid}/diff/{again['series_id']}",
    ):
        body = client.get(path).text
        assert not any(name in body for name in hidden), path
    run_id = client.app.state.service.db.query_one(  # type: ignore[attr-defined]
        "SELECT run_id FROM attempts WHERE series_id=?", (sid,)
    )["run_id"]
    r = client.get(f"/api/studio/runs/{run_id}/attempt")
    assert r.status_code == 403 and r.json()["error"]["code"] == "HOLDOUT_HIDDEN"
    assert run_id not in json.dumps(client.get("/api/studio/runs", params={"outcome": "pass"}).json())


def test_a_paused_series_says_what_finishing_costs(client: TestClient) -> None:
    sn = run(client, {"experiment_id": MISTRAL, "on": "dev", "cases": 12, "repeats": 1, "cap_usd": "0.002"})
    assert sn["status"] == "awaiting_approval"
    est = client.get(f"/api/studio/series/{sn['series_id']}/finish").json()
    assert est["done"] == sn["progress"]["done"] and est["left"] == 24 - est["done"] > 0
    per, more, total = Decimal(est["per_attempt_usd"]), Decimal(est["more_usd"]), Decimal(est["total_usd"])
    # Both figures are rounded to 7 decimals: `per` times `left` is off by at most half a unit per attempt left.
    assert abs(more - per * est["left"]) <= Decimal("0.00000005") * (est["left"] + 1) and total > more
    assert Decimal(est["cap_to_finish_usd"]) >= total / Decimal("0.9")  # the runner pauses at 90% of the cap
    r = client.post(
        f"/api/series/{sn['series_id']}/approve", json={"cap_usd": est["cap_to_finish_usd"]}, headers=person_headers()
    )
    assert r.status_code == 200, r.text
    after = settle(client, sn["series_id"])
    assert after["status"] == "done"  # the estimated cap was enough: no second pause
    assert client.get("/api/studio/series/ser_nope/finish").status_code == 404


def test_percentiles_and_caps_a_person_types() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5  # numpy's default (linear)
    assert percentile([float(i) for i in range(101)], 0.95) == 95.0
    assert _cents_up(Decimal("1.231")) == Decimal("1.24")
    assert _cents_up(Decimal("0.004312")) == Decimal("0.0044")
    assert _cents_up(Decimal("0.05")) == Decimal("0.050")


def test_grid_cells_show_an_output_and_its_failing_passage(client: TestClient) -> None:
    sid = run(client, {"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 2, "seed": 4})["series_id"]
    grid = client.get(f"/api/studio/series/{sid}/grid", params={"failures_only": True}).json()
    bad = [c for r in grid["rows"] for c in r["cells"].values() if c["fails"]]
    assert bad
    for cell in bad:  # a failing attempt's output first, with the passage its check quotes inside the snippet
        sample = cell["sample"]
        assert sample["outcome"] in ("fail", "model_failure") and sample["run_id"] == cell["run_ids"][0]
        if sample["outcome"] == "fail":
            assert sample["quotes"] and all(q in sample["text"] for q in sample["quotes"])
            assert len(sample["text"]) <= 240 + max(len(q) for q in sample["quotes"])
            att = client.get(f"/api/studio/runs/{sample['run_id']}/attempt").json()["attempt"]
            quoted = [" ".join(q.split()) for c in att["checks"] for q in c["quotes"]]
            assert set(sample["quotes"]) <= set(quoted)  # the attempt view's quotes, the same passages
    whole = client.get(f"/api/studio/series/{sid}/grid").json()
    good = [c for r in whole["rows"] for c in r["cells"].values() if not c["fails"]]
    assert good and all(c["sample"]["outcome"] == "pass" and c["sample"]["text"] for c in good)
    assert all(not c["sample"]["quotes"] for c in good)


def test_a_diff_marks_chance_and_names_the_files_that_changed(client: TestClient) -> None:
    body = {"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 2}
    a = run(client, {**body, "seed": 21})["series_id"]
    b = run(client, {**body, "seed": 22})["series_id"]
    diff = client.get(f"/api/studio/series/{a}/diff/{b}").json()
    assert diff["repeats"] == [2, 2] and abs(diff["least_p"] - 1 / 3) < 1e-6  # 2/2 → 0/2 is p = 1/3
    moved = [r for r in diff["rows"] if r["a_rate"] != r["b_rate"]]
    assert moved and all(r["change"] == "within_chance" and r["p_value"] >= 0.05 for r in moved)
    assert diff["counts"]["worse"] == diff["counts"]["better"] == 0
    assert diff["counts"]["within_chance"] == len(moved)
    assert diff["inputs"] == {
        "same": True,
        "changed": [],
        "added": [],
        "removed": [],
        "cases_differ": False,
        "changed_during": [],
    }
    paged = client.get(f"/api/studio/series/{a}/diff/{b}", params={"per_page": 25, "page": 3}).json()
    assert paged["pages"] == 3 and len(paged["rows"]) == 10 and paged["counts"] == diff["counts"]
    # Edit the prompt of the revise step: a third series ran on other files, and the diff names the file.
    root = client.app.state.service.root  # type: ignore[attr-defined]
    prompt = root / "flows" / "support_case" / "revise.md"
    prompt.write_text(prompt.read_text() + "\nKeep it short.\n")
    c = run(client, {**body, "seed": 23})["series_id"]
    changed = client.get(f"/api/studio/series/{b}/diff/{c}").json()["inputs"]
    assert changed["same"] is False and changed["changed"] == ["flows/support_case/revise.md"]


def test_beyond_chance_is_fishers_exact_test() -> None:
    from aqven.research.stats.two_counts import beyond_chance, change_p, least_p

    assert change_p(2, 2, 1, 2) == 1.0 and not beyond_chance(2, 2, 0, 2)
    assert least_p(2, 2) == pytest.approx(1 / 3) and least_p(1, 1) == 1.0
    assert beyond_chance(6, 6, 0, 6) and not beyond_chance(6, 6, 3, 6)
    assert change_p(6, 6, 1, 6) == pytest.approx(0.0151515, abs=1e-6)
