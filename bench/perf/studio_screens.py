"""Screenshots of Studio's decision pages at 1440×900 and 390×844, with each page's width (a phone page wider
than 390 px scrolls sideways). Run against any checkout to compare before and after:

    .venv/bin/python bench/perf/studio_screens.py test-artifacts/studio/after
    PYTHONPATH=<old checkout>/src .venv/bin/python bench/perf/studio_screens.py test-artifacts/studio/before

It builds the showcase project on simulators, starts a dev series (seeded), a compare series, a paused one, a
new one above the project cap, a stopped one, and two held-out ones, then photographs their pages, a failed
attempt's run, the runs list, the findings and the Confirm panel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ["AQVEN_SIMULATE"] = "1"
os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0.02"
# A person folder of its own (the person key, the projects' records): the bench never touches ~/.config/aqven.
os.environ.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="aqven-screens-config-"))

from aqven.people import person_key
from aqven.project.init import init_project

MISTRAL = "reply_noninferior_mistral"


class Server:
    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aqven", "serve", "--root", str(root)],
            cwd=root,
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.info = json.loads((root / ".aqven" / "server.json").read_text())
                self.base = f"http://localhost:{self.info['port']}"  # Studio's origin
                urllib.request.urlopen(self.base + "/api/health", timeout=2).read()
                return
            except (OSError, ValueError, KeyError):
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise
                time.sleep(0.1)

    def call(self, path: str, body: object = None, *, person: bool = False) -> Any:
        """A request with the agent's token, or with the person key (`person`: what only a person may do)."""
        key = person_key(create=True)
        credential = key.secret if person and key else self.info["token"]
        headers = {"authorization": f"Bearer {credential}", "content-type": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method="POST" if data else "GET")
        return json.loads(urllib.request.urlopen(req, timeout=60).read())

    def series(self, body: dict[str, Any]) -> str:
        sid: str = self.call("/api/series", body)["series"]["series_id"]
        for _ in range(60):
            if self.call(f"/api/series/{sid}?wait_seconds=20")["status"] not in ("running", "queued"):
                break
        return sid


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "test-artifacts/studio/screens")
    out.mkdir(parents=True, exist_ok=True)
    root = init_project(Path(tempfile.mkdtemp()) / "lumen", "lumen")
    srv = Server(root)
    try:
        dev = srv.series({"experiment_id": MISTRAL, "on": "dev", "cases": 30, "repeats": 1, "seed": 1})
        compare = srv.series({"experiment_id": "panel_merge_rule", "on": "dev"})
        paused = srv.series({"experiment_id": MISTRAL, "on": "dev", "cases": 12, "repeats": 1, "cap_usd": "0.002"})
        new = srv.series({"experiment_id": MISTRAL, "on": "dev", "cases": 10, "repeats": 1, "cap_usd": "5.00"})
        stopped = srv.series({"experiment_id": MISTRAL, "on": "dev", "cases": 10, "repeats": 1, "cap_usd": "5.00"})
        srv.call(f"/api/series/{stopped}/stop", {}, person=True)
        held = {"experiment_id": "reply_overpromise_risk", "on": "holdout", "repeats": 1}
        holdout = srv.series({**held, "cases": 40, "cap_usd": "0.006"})
        srv.series({**held, "cases": 3})
        failed = srv.call(f"/api/studio/series/{dev}/attempts?outcome=fail")["items"][0]["run_id"]
        srv.series({"experiment_id": MISTRAL, "on": "holdout", "cases": 60, "repeats": 1})  # its standing finding
        pages = [
            ("overview", ""),
            ("research", "research"),
            ("experiment-standing", f"experiments/{MISTRAL}"),
            ("series-decision", f"series/{dev}"),
            ("series-compare-verdict", f"series/{compare}"),
            ("series-paused", f"series/{paused}"),
            ("series-new", f"series/{new}"),
            ("series-stopped", f"series/{stopped}"),
            ("series-holdout-running", f"series/{holdout}"),
            ("run-check-failed", f"runs/{failed}"),
            ("runs", "runs?source=series"),
            ("findings", "findings"),
            ("experiment-confirm", "experiments/reply_overpromise_risk"),
            ("flow", "flows/support_case"),
        ]
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            for (w, hgt), suffix in (((1440, 900), ""), ((390, 844), "-phone")):
                context = browser.new_context(viewport={"width": w, "height": hgt})
                pg = context.new_page()
                pg.goto(srv.call("/api/studio/login-link", {"page": ""}, person=True)["url"])
                pg.wait_for_selector("main h1")
                for name, route in pages:
                    pg.goto(f"{srv.base}/studio/#/{route}")
                    pg.wait_for_selector("main h1")
                    pg.wait_for_timeout(1200)  # the plots draw once their box has its width
                    if name == "experiment-confirm":
                        pg.check("#on-holdout")
                        pg.wait_for_timeout(800)
                    width = pg.evaluate("() => document.documentElement.scrollWidth")
                    pg.screenshot(path=str(out / f"{name}{suffix}.png"), full_page=True)
                    print(f"{name}{suffix}: page {width} px wide on a {w} px screen")
                context.close()
            browser.close()
    finally:
        srv.proc.terminate()
        srv.proc.wait(timeout=20)


if __name__ == "__main__":
    main()
