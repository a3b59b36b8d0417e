"""The same workload in Inspect AI and in AQVEN: N single-turn samples/attempts, a mock model that answers at
once, one string scorer/check. Wall time and peak memory of each, each side in its own fresh subprocess.

Inspect AI is installed BY THIS SCRIPT into its own venv, bench/out/inspect-venv (`pip install inspect-ai`,
or --inspect-spec); it is never a dependency of AQVEN. Neither side touches the network.

What each side does (printed with the figures):

* Inspect: `inspect_ai.eval(task, model="mockllm/model")`. The task has a MemoryDataset of N samples
  (input "question i", target "default output"), the solver `generate()` and the scorer `includes()`. mockllm
  returns "Default output from mockllm/model" at once, from a custom_outputs callable that also sets the usage
  (20 input, 5 output tokens, as AQVEN's simulator reports): without a usage mockllm counts tokens with tiktoken,
  which downloads its encoding from the network (not reachable here). Inspect runs max_samples=8 at once
  (max_connections=8) and writes one eval log (the default `.eval` format: every sample's messages, events
  transcript and score) into bench/out/inspect-logs-<mode>. It runs twice: with Inspect's defaults
  (`log_realtime` on, which also writes every sample's events to a SQLite buffer while the eval runs) and
  with `log_realtime=False` (the `.eval` log is complete either way); both ratios are printed.
* AQVEN: the experiment series of bench/perf/perf_common.py's tiny project: N attempts (cases × 20 repeats) of a
  one-node flow whose llm node runs through pydantic-ai (an Agent with a tool-mode structured output, validated)
  on the project's simulator wrapped as a FunctionModel (latency scaled to 0), one built-in `contains` check,
  concurrency 8, through ProjectService/SeriesService in-process (no HTTP). Every attempt is recorded in SQLite
  (WAL): a run row, its trace (run_start, node_start, model_request, model_response, node_end, run_end), usage
  and simulated cost (genai-prices), the attempt row with its check results, and the series' verdict at the end.

Timings: "process" = the child's whole life (interpreter start, imports, setup, run, exit); "run" = the child's
own timer around eval() / the series (start → verdict). Peak memory = the child's max RSS from os.wait4.

    .venv/bin/python bench/perf/peer_inspect.py [--samples 5000] [--inspect-spec inspect-ai]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
OUT = BENCH.parent / "out"  # bench/out
VENV = OUT / "inspect-venv"
CONCURRENCY = 8

INSPECT_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate
import inspect_ai
n, log_dir, conc, realtime = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
# "default": Inspect's own default (log_realtime on: every sample's events also go to a SQLite buffer while it
# runs); "off": log_realtime=False (the .eval log written at the end is just as complete).
extra = {} if realtime == "default" else {"log_realtime": False}
task = Task(
    dataset=MemoryDataset([Sample(input=f"question {i}", target="default output") for i in range(n)]),
    solver=generate(),
    scorer=includes(),
    name="peer_bench",
)
def answer(_input, _tools, _tool_choice, _config):
    # Usage given, as AQVEN's simulator gives it (20 in, 5 out): without it mockllm counts tokens with tiktoken,
    # which downloads its encoding from the network.
    out = ModelOutput.from_content(model="mockllm", content="Default output from mockllm/model")
    out.usage = ModelUsage(input_tokens=20, output_tokens=5, total_tokens=25)
    return out
model = get_model("mockllm/model", custom_outputs=answer)
t1 = time.perf_counter()
logs = inspect_eval(task, model=model, log_dir=log_dir, display="none", max_connections=conc,
                    max_samples=conc, log_level="warning", **extra)
t2 = time.perf_counter()
log = logs[0]
metrics = {k: v.value for s in (log.results.scores if log.results else []) for k, v in s.metrics.items()}
files = [os.path.join(log_dir, f) for f in os.listdir(log_dir)]
print(json.dumps({"version": inspect_ai.__version__, "realtime": realtime, "status": log.status,
                  "samples": log.results.completed_samples
                  if log.results else None, "metrics": metrics, "import_setup_s": t1 - t0, "run_s": t2 - t1,
                  "log_bytes": sum(os.path.getsize(f) for f in files), "log_files": len(files)}))
"""


def ensure_inspect(spec: str) -> Path:
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import inspect_ai"], capture_output=True).returncode == 0
    if not ok:
        print(f"installing {spec} into {VENV} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", spec], check=True)
    return py


def run_child(argv: list[str], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float, float, float]:
    """(the child's JSON line, process wall s, peak RSS MiB, CPU s) of one subprocess."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out_b, err_b = b"", b""
    # wait4 gives this child's own rusage; read its pipes first so it never blocks on a full pipe.
    out_b, err_b = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write(err_b.decode(errors="replace")[-4000:])
        raise SystemExit(f"child failed ({proc.returncode}): {' '.join(argv[:3])}")
    line = [x for x in out_b.decode().splitlines() if x.startswith("{")][-1]
    return json.loads(line), wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def aqven_child(n: int, root: Path) -> None:
    t0 = time.perf_counter()
    os.environ["AQVEN_SIM_LATENCY_SCALE"] = "0"
    sys.path.insert(0, str(BENCH))
    import perf_common as pc

    shutil.rmtree(root, ignore_errors=True)
    cases, _repeats = pc.split_attempts(n)
    pc.write_tiny_project(root, cases=cases, concurrency=CONCURRENCY)
    import aqven.research.series.start
    import aqven.server.service  # noqa: F401

    t1 = time.perf_counter()
    r = pc.run_series_sync(root, n)
    st = r["state"]
    db = root / ".aqven" / "aqven.sqlite"
    wal = db.with_name(db.name + "-wal")
    print(
        json.dumps(
            {
                "status": st["status"],
                "samples": st["progress"]["done"],
                "verdict": (st["verdict"] or {}).get("verdict"),
                "pass_rate": (st["matrix"][0]["passes"] / max(st["matrix"][0]["counted"], 1)),
                "import_setup_s": t1 - t0,
                "run_s": r["wall_s"],
                "db_bytes": db.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--inspect-spec", default="inspect-ai", help="what pip installs (e.g. inspect-ai==0.3.285)")
    parser.add_argument("--aqven-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.aqven_child:
        aqven_child(args.aqven_child, args.root)
        return
    n = args.samples
    OUT.mkdir(exist_ok=True)
    py = ensure_inspect(args.inspect_spec)
    child = OUT / "inspect_child.py"
    child.write_text(INSPECT_CHILD)
    sides: dict[str, tuple[dict[str, Any], float, float, float]] = {}
    print(f"load avg before: {_load()}", flush=True)
    for realtime in ("default", "off"):
        log_dir = OUT / f"inspect-logs-{realtime}"
        shutil.rmtree(log_dir, ignore_errors=True)
        log_dir.mkdir(parents=True)
        env = {**os.environ, "INSPECT_DISPLAY": "none", "INSPECT_LOG_DIR": str(log_dir)}
        argv = [str(py), str(child), str(n), str(log_dir), str(CONCURRENCY), realtime]
        sides[f"inspect_{realtime}"] = run_child(argv, env)
        if sides[f"inspect_{realtime}"][0]["status"] != "success":
            raise SystemExit(f"the Inspect eval did not succeed: read the log in {log_dir}")
        print(f"load avg after Inspect ({realtime}): {_load()}", flush=True)
    sides["aqven"] = run_child(
        [sys.executable, str(Path(__file__).resolve()), "--aqven-child", str(n), "--root", str(OUT / "peer-aqven")]
    )
    print(f"load avg after AQVEN: {_load()}")
    print()
    ins = sides["inspect_default"][0]
    aq = sides["aqven"][0]
    print(
        f"Inspect AI {ins['version']}: eval() of {n} samples, mockllm/model, generate() + includes(), "
        f"max_samples={CONCURRENCY}; writes one .eval log; run twice: with its defaults (log_realtime on: "
        "each sample's events also buffered in SQLite while it runs) and with log_realtime=False"
    )
    for realtime in ("default", "off"):
        r = sides[f"inspect_{realtime}"][0]
        print(f"  {realtime}: status {r['status']}, completed {r['samples']}, metrics {r['metrics']}")
    print(
        f"AQVEN: series of {n} attempts, one llm node + one contains check, concurrency {CONCURRENCY}; writes "
        f"every attempt's run, trace and check to SQLite ({aq['db_bytes'] / 2**20:.1f} MiB db+wal)"
    )
    print(f"  status {aq['status']}, done {aq['samples']}, pass rate {aq['pass_rate']:.3f}, verdict {aq['verdict']}")
    print(
        "imports + setup before the timed run: "
        + ", ".join(f"{k} {v[0]['import_setup_s']:.1f} s" for k, v in sides.items())
    )
    print()
    print(
        f"{'':<16} {'run s':>8} {'process s':>10} {'CPU s':>8} {'peak RSS MiB':>13} {'run/sample ms':>14} "
        f"{'output MiB':>11}"
    )
    for name, (r, wall, rss, cpu) in sides.items():
        out_mib = (r.get("log_bytes") or r.get("db_bytes") or 0) / 2**20
        print(
            f"{name:<16} {r['run_s']:8.1f} {wall:10.1f} {cpu:8.1f} {rss:13.0f} {r['run_s'] / n * 1000:14.2f} "
            f"{out_mib:11.1f}"
        )
    _aq, aq_wall, aq_rss, aq_cpu = sides["aqven"]
    for realtime in ("default", "off"):
        r, wall, rss, cpu = sides[f"inspect_{realtime}"]
        label = f"AQVEN/Insp-{realtime}"
        print(
            f"{label:<16} {aq['run_s'] / r['run_s']:8.2f} {aq_wall / wall:10.2f} {aq_cpu / cpu:8.2f} "
            f"{aq_rss / rss:13.2f}"
        )
    (OUT / "peer_inspect.json").write_text(
        json.dumps(
            {
                "n": n,
                **{
                    name: {**r, "process_s": wall, "rss_mib": rss, "cpu_s": cpu}
                    for name, (r, wall, rss, cpu) in sides.items()
                },
            },
            indent=1,
        )
    )


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
