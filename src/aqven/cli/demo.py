"""`aqven demo`: the showcase project on simulated models, end to end through the project server."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from rich.table import Table

from aqven.cli.client import Client
from aqven.cli.render import console, money
from aqven.project.init import init_project
from aqven.project.loader import load_project

DATASET = "support_case_cases"
FLOW = "support_case"


def ensure_demo_project(directory: Path) -> Path:
    if (directory / "aqven.yaml").is_file():
        console.print(f"using the demo project in {directory}")
    else:
        init_project(directory, "lumen")
        console.print(f"created the showcase project in {directory} (package lumen)")
    return directory.resolve()


def run_demo(directory: Path) -> None:
    root = ensure_demo_project(directory)
    cases = [c.name for c in load_project(root).datasets[DATASET].cases]
    client = Client(root)
    console.print(
        f"project server on http://127.0.0.1:{client.port} · running {FLOW} on {len(cases)} cases with simulated models"
    )
    started = [
        client.post("/api/runs", {"flow_id": FLOW, "case": name, "dataset_id": DATASET, "simulate": True, "seed": i})
        for i, name in enumerate(cases)
    ]
    table = Table(show_edge=False)
    for col in ("case", "status", "outcome", "tokens in/out", "cost"):
        table.add_column(col, justify="right" if col in ("tokens in/out", "cost") else "left")
    total = Decimal(0)
    tokens = [0, 0]
    for run in started:
        done = client.get(f"/api/runs/{run['id']}", wait_seconds=50)
        while done["status"] in ("queued", "running"):
            done = client.get(f"/api/runs/{run['id']}", wait_seconds=50)
        outcome = done["outcome"] if not done.get("error") else f"{done['outcome']}: {done['error']['code']}"
        table.add_row(
            done["case_name"],
            done["status"],
            outcome or "",
            f"{done['input_tokens']}/{done['output_tokens']}",
            money(done["cost_usd"]),
        )
        total += Decimal(done["cost_usd"])
        tokens[0] += done["input_tokens"]
        tokens[1] += done["output_tokens"]
    console.print(table)
    console.print(
        f"total: {len(started)} runs · {tokens[0]} in / {tokens[1]} out tokens · {money(total)} "
        "(simulated calls, priced as the real models would be)"
    )
    console.print(f"open a trace: cd {directory} && aqven run {FLOW} --case {cases[0]} --simulate")
