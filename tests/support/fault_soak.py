"""Fault soak: a live series against a fake provider that injects every provider fault at ~10%.

A small project (one llm node on an openrouter agent pointed at a local fake OpenAI-compatible server,
`engine.provider_retries: 0`, short `timeout_s` / `stall_timeout_s`) and an experiment with a function
check run as a series on a real `python -m aqven serve` process. The fake provider decides each request
deterministically from a hash of (seed, the prompt, how many times it saw that prompt): 429, 500, a slow
answer (timeout), a stalled body, invalid JSON, a rejected output schema, a refusal — each ~10% — else
an answer that passes the check, or (10% of answers) one that fails it.

Afterwards every attempt is compared with what the provider did to its requests:

* counted model failures: invalid JSON → MODEL_INVALID_JSON, schema rejected → OUTPUT_SCHEMA_REJECTED,
  refusal → MODEL_REFUSAL; a wrong answer → fail (CHECK_FAILED); a right one → pass;
* infrastructure errors: 500 → PROVIDER_ERROR, slow → MODEL_TIMEOUT, stall → MODEL_STREAM_STALLED,
  429 → PROVIDER_RATE_LIMITED, and every 429 attempt ran exactly once more at the end (reruns = 1),
  its final outcome being that of its second request;
* the series ends `done` with verdict `invalid` (reason `infra_errors`), since far more than 5% of the
  attempts are infrastructure errors.

    .venv/bin/python bench/soak/soak_faults.py [--cases 400] [--seed 7] [--concurrency 16]

`tests/server/reliability/test_reliability_faults.py` runs the same function on a few dozen attempts.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aqven.models.outcomes import KEY_ENV_VARS as KEY_VARS
from aqven.project.split import side_of
from support.fake_provider import FakeProvider, FakeReply, RecordedRequest
from support.series_kit import rows

PACKAGE = "relia"
EXPERIMENT = "answers_right"
TIMEOUT_S = 2.0  # generous enough that a loaded machine does not turn a quick 429 or 500 into a timeout
STALL_TIMEOUT_S = 0.5

# fault kind of the fake provider → (outcome, error code) the attempt must end with
FAULTS: dict[str, tuple[str, str | None]] = {
    "429": ("infra", "PROVIDER_RATE_LIMITED"),
    "500": ("infra", "PROVIDER_ERROR"),
    "slow": ("infra", "MODEL_TIMEOUT"),
    "stall": ("infra", "MODEL_STREAM_STALLED"),
    "invalid_json": ("model_failure", "MODEL_INVALID_JSON"),
    "schema_rejected": ("model_failure", "OUTPUT_SCHEMA_REJECTED"),
    "refusal": ("model_failure", "MODEL_REFUSAL"),
}
ANSWERS: dict[str, tuple[str, str | None]] = {"right": ("pass", None), "wrong": ("fail", "CHECK_FAILED")}
COST_PER_ANSWER = "0.0010"
PAID = ("right", "wrong", "invalid_json", "refusal")  # the kinds answered with a 200 (and a reported cost)


# ---- the project ------------------------------------------------------------------------------------


def dev_case_names(n: int, package: str = PACKAGE) -> list[str]:
    """n case names on the dev side of the split."""
    names: list[str] = []
    i = 0
    while len(names) < n:
        name = f"q{i:05d}"
        if side_of(package, name) == "dev":
            names.append(name)
        i += 1
    return names


def write_project(
    root: Path,
    *,
    cases: int,
    concurrency: int = 8,
    repeats: int = 1,
    cap_usd: str = "100.00",
    simulator: str | None = None,
    sim_latency_s: float = 0.0,
    extra_cases: list[str] | None = None,
    workers: int = 1,
) -> list[str]:
    """The reliability project: one llm node (`reply`, agent `writer`), a function check, dev cases.

    Returns the dev case names. `simulator` adds a simulator to the agent (the kill soak runs simulated):
    "seeded" answers right with probability 0.9 drawn from the attempt's seed, after `sim_latency_s`.
    """
    names = dev_case_names(cases)
    all_names = names + list(extra_cases or [])
    sim_line = "simulator: sim/writer.py:answer\n" if simulator else ""
    files: dict[str, str] = {
        "aqven.yaml": (
            f'package: {PACKAGE}\nname: Reliability\nresearch:\n  spend_cap_usd: "{cap_usd}"\n'
            f"concurrency: {concurrency}\nworkers: {workers}\nengine:\n  provider_retries: 0\n  retry_backoff_s: 0\n"
        ),
        "agents/writer.yaml": (
            "model: openrouter:openai/gpt-4o-mini\n"
            "description: Answers one question.\n"
            f"settings: {{temperature: 0.0, max_tokens: 50, timeout_s: {TIMEOUT_S},"
            f" stall_timeout_s: {STALL_TIMEOUT_S}}}\n"
            "output_mode: tool\noutput_retries: 0\n" + sim_line
        ),
        "sim/writer.py": (
            "from aqven.models.simulator import SimReply, SimRequest\n\n\n"
            "def answer(req: SimRequest) -> SimReply:\n"
            "    good = req.rng().random() < 0.9\n"
            "    return SimReply(output={'answer': 'right' if good else 'wrong'}, input_tokens=40, output_tokens=8,"
            f" latency_s={sim_latency_s!r})\n"
        ),
        "flows/answer/flow.yaml": (
            "description: Answer one question.\n"
            "input: {question: string}\n"
            "output: {answer: string}\n"
            "nodes:\n"
            "  - id: reply\n    kind: llm\n    agent: writer\n    prompt: reply.md\n"
            "    inputs: {question: $input.question}\n    output: {answer: string}\n"
            "result: $reply.out\n"
        ),
        "flows/answer/reply.md": "Answer the question [[{{ question }}]] with one word.\n",
        "datasets/questions.yaml": "description: Generated questions.\ncases:\n"
        + "".join(f'  - name: {n}\n    input: {{question: "{n}"}}\n' for n in all_names),
        "checks/right.py": (
            "def is_right(output):\n"
            "    answer = (output or {}).get('answer')\n"
            "    return answer == 'right', f'answered {answer!r}'\n"
        ),
        f"experiments/{EXPERIMENT}/experiment.yaml": (
            "failure_mode: wrong_answer\n"
            "description: The writer answers right on more than 95% of the questions.\n"
            "subject: {flow: answer}\n"
            "variants:\n  - id: as_written\n"
            "dataset: {id: questions}\n"
            "checks:\n  - id: right\n    function: checks/right.py:is_right\n"
            "metrics:\n  right: {check: right}\n"
            "question: {kind: threshold, metric: right, bound: 0.9, direction: at_least, margin: 0.01}\n"
            f"repeats: {repeats}\n"
        ),
    }
    for rel_path, text in files.items():
        path = root / rel_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return names


# ---- the fake provider ------------------------------------------------------------------------------

_QUESTION = re.compile(r"\[\[(.+?)\]\]")


def prompt_of(body: Any) -> str:
    """The user prompt of a chat-completions request."""
    if not isinstance(body, dict):
        return ""
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            return content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return ""


def case_of(body: Any) -> str | None:
    found = _QUESTION.search(prompt_of(body))
    return found.group(1) if found else None


def _unit(*parts: object) -> float:
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()
    return int(digest[:13], 16) / float(1 << 52)


@dataclass
class Decision:
    case: str | None
    occurrence: int
    kind: str  # a key of FAULTS or of ANSWERS


class FaultProvider(FakeProvider):
    """The fake provider, deciding every request from a hash: each fault at `rate`, else an answer."""

    def __init__(self, *, seed: int = 0, rate: float = 0.10, wrong_rate: float = 0.10) -> None:
        super().__init__()
        self.seed = seed
        self.rate = rate
        self.wrong_rate = wrong_rate
        self.decisions: list[Decision] = []
        self._seen: Counter[str] = Counter()
        self._local = threading.local()

    def decide(self, prompt: str, occurrence: int) -> str:
        u = _unit(self.seed, prompt, occurrence, "fault")
        for i, kind in enumerate(FAULTS):
            if u < self.rate * (i + 1):
                return kind
        return "wrong" if _unit(self.seed, prompt, occurrence, "answer") < self.wrong_rate else "right"

    def __enter__(self) -> FaultProvider:
        # The standard backlog of 5 drops connections when many attempts call at once (the client then waits
        # for a SYN retry and times out before its request is even seen): listen like a real server.
        old = ThreadingHTTPServer.request_queue_size
        ThreadingHTTPServer.request_queue_size = 256
        try:
            super().__enter__()
        finally:
            ThreadingHTTPServer.request_queue_size = old
        return self

    def _record(self, req: RecordedRequest) -> None:
        super()._record(req)
        self._local.body = req.body

    def _next(self) -> FakeReply:
        body = getattr(self._local, "body", None)
        prompt = prompt_of(body)
        with self._lock:
            occurrence = self._seen[prompt]
            self._seen[prompt] += 1
            kind = self.decide(prompt, occurrence)
            self.decisions.append(Decision(case_of(body), occurrence, kind))
        if kind == "slow":
            return FakeReply("slow", delay_s=TIMEOUT_S + 1.5)
        if kind == "stall":
            return FakeReply("stall", delay_s=TIMEOUT_S + 1.5)
        if kind == "429":
            return FakeReply("429", retry_after="0")
        if kind in ANSWERS:
            return FakeReply(output={"answer": kind}, cost=COST_PER_ANSWER)
        if kind in PAID:
            return FakeReply(kind, cost=COST_PER_ANSWER)  # a 200 answer is billed even when it is useless
        return FakeReply(kind)

    def by_case(self) -> dict[str, list[str]]:
        """Per case, the kinds of its requests in the order the provider saw them."""
        out: dict[str, list[tuple[int, str]]] = {}
        with self._lock:
            for d in self.decisions:
                if d.case is not None:
                    out.setdefault(d.case, []).append((d.occurrence, d.kind))
        return {c: [k for _o, k in sorted(v)] for c, v in out.items()}


# ---- a live project server ------------------------------------------------------------------------


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS and k != "AQVEN_SIMULATE"}
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


class HttpError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


TOKENS: dict[int, str] = {}  # port -> the token of the server listening there (from its server.json)


def http(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float = 60.0,
    raw: bytes | None = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """One JSON request to the server on 127.0.0.1 with its token; HttpError for a status ≥ 400 (parsed body).

    `token` defaults to the token the server on `port` wrote (LiveServer records it); "" sends none."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    token = TOKENS.get(port, "") if token is None else token
    sent = {"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})}
    sent.update(headers or {})
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=sent)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
    except urllib.error.HTTPError as exc:
        payload = exc.read()
        try:
            parsed: Any = json.loads(payload)
        except ValueError:
            parsed = payload.decode(errors="replace")
        raise HttpError(exc.code, parsed) from None
    return json.loads(text) if text else None


@dataclass
class LiveServer:
    """A real `python -m aqven serve` process for one project, with its log in .aqven/server.log."""

    root: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    token: str = ""
    starts: list[float] = field(default_factory=list)

    def start(self, timeout: float = 30.0) -> int:
        state = self.root / ".aqven"
        state.mkdir(parents=True, exist_ok=True)
        info = state / "server.json"
        with contextlib.suppress(OSError):
            info.unlink()  # a killed server leaves it behind; the new one writes its own
        log = open(state / "server.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aqven", "serve", "--root", str(self.root)],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=str(self.root),
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (state / "server.log").read_text(errors="replace")[-4000:]
                raise RuntimeError(f"the server exited with {self.proc.returncode}; the end of its log:\n{tail}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                data = json.loads(info.read_text())
                if int(data["pid"]) == self.proc.pid:
                    port = int(data["port"])
                    TOKENS[port] = self.token = str(data["token"])
                    with contextlib.suppress(HttpError, OSError):
                        http(port, "GET", "/api/health", timeout=2)
                        self.port = port
                        self.starts.append(time.monotonic())
                        return port
            time.sleep(0.05)
        raise RuntimeError("the server did not start in time")

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def get(self, path: str, **kw: Any) -> Any:
        return http(self.port, "GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return http(self.port, "POST", path, body if body is not None else {}, **kw)


@contextlib.contextmanager
def live_server(root: Path, env: dict[str, str]) -> Iterator[LiveServer]:
    server = LiveServer(root, env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def wait_series(server: LiveServer, series_id: str, *, limit_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    state: dict[str, Any] = server.get(f"/api/series/{series_id}")
    while state["status"] not in ("done", "failed", "cancelled", "awaiting_approval", "waiting_human"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"series {series_id} still {state['status']} after {limit_s} s: {state['progress']}")
        state = server.get(f"/api/series/{series_id}?wait_seconds=10", timeout=40)
    return state


# ---- the soak -----------------------------------------------------------------------------------------


@dataclass
class FaultReport:
    series_id: str
    attempts: int
    wall_s: float
    status: str
    verdict: str | None
    reason: str | None
    outcomes: dict[str, int]
    codes: dict[str, int]
    provider_kinds: dict[str, int]
    reruns: int
    infra_share: float
    mismatches: list[str]
    spend_usd: str
    run_cost_usd: str
    provider_cost_usd: str
    reruns_at_end: bool  # every second request of a case came after every first request

    def lines(self) -> list[str]:
        return [
            f"series {self.series_id}: {self.attempts} attempts in {self.wall_s:.1f} s, status {self.status}, "
            f"verdict {self.verdict} ({self.reason})",
            f"provider requests by kind: {dict(sorted(self.provider_kinds.items()))}",
            f"attempt outcomes: {dict(sorted(self.outcomes.items()))}",
            f"attempt error codes: {dict(sorted(self.codes.items()))}",
            f"429 re-runs: {self.reruns} (all after every first try: {self.reruns_at_end}); "
            f"infrastructure errors: {self.infra_share:.1%} of attempts",
            f"spend: series {self.spend_usd}, runs {self.run_cost_usd}, provider reported {self.provider_cost_usd}",
            f"misclassified attempts: {len(self.mismatches)}",
            *self.mismatches[:20],
        ]


def attempts_of(root: Path, series_id: str) -> list[dict[str, Any]]:
    """The series' attempts straight from the store (every case, not only the first 50 shown by the API)."""
    return [dict(r) for r in rows(root, "SELECT * FROM attempts WHERE series_id=? ORDER BY idx", (series_id,))]


def runs_of(root: Path, series_id: str) -> list[dict[str, Any]]:
    return [dict(r) for r in rows(root, "SELECT * FROM runs WHERE series_id=?", (series_id,))]


def expected_for(kinds: list[str]) -> tuple[str, str | None, int]:
    """(outcome, error code, reruns) an attempt must end with, from the kinds of its requests in order."""
    reruns = 1 if kinds and kinds[0] == "429" else 0
    last = kinds[-1] if kinds else "?"
    outcome, code = FAULTS.get(last) or ANSWERS.get(last) or ("?", None)
    return outcome, code, reruns


def run_fault_series(
    root: Path, *, cases: int, seed: int = 7, concurrency: int = 8, limit_s: float = 300.0
) -> FaultReport:
    """Write the project, run one series on a live server against the fault provider, and compare."""
    from decimal import Decimal

    names = write_project(root, cases=cases, concurrency=concurrency)
    with FaultProvider(seed=seed) as fp:
        env = server_env(
            AQVEN_OPENROUTER_BASE_URL=fp.base_url,
            OPENROUTER_API_KEY="dummy-key-for-the-fake-provider",
            AQVEN_PRICES_FILE=str(root / ".aqven" / "no-prices.json"),
        )
        with live_server(root, env) as server:
            started = time.monotonic()
            out = server.post("/api/series", {"experiment_id": EXPERIMENT, "on": "dev", "seed": seed})
            sid = out["series"]["series_id"]
            state = wait_series(server, sid, limit_s=limit_s)
            wall = time.monotonic() - started
            shown = server.get(f"/api/series/{sid}?include_cases=true")
        kinds = fp.by_case()
        order = [d.occurrence for d in fp.decisions]
        last_first = max((i for i, o in enumerate(order) if o == 0), default=-1)
        reruns_at_end = all(i > last_first for i, o in enumerate(order) if o > 0)
        provider_kinds = Counter(d.kind for d in fp.decisions)
        provider_cost = sum((Decimal(COST_PER_ANSWER) for d in fp.decisions if d.kind in PAID), Decimal(0))
    attempts = attempts_of(root, sid)
    mismatches: list[str] = []
    for a in attempts:
        seen = kinds.get(a["case_name"], [])
        want = expected_for(seen)
        got = (a["outcome"], a["error_code"], a["reruns"])
        if a["status"] != "done" or got != want:
            why = " (a request never reached the provider)" if len(seen) < 1 + a["reruns"] else ""
            mismatches.append(f"{a['case_name']}: requests {seen} → {got}, expected {want}{why}")
    # The API view of dev cases must agree with the store.
    by_case = {a["case_name"]: a for a in attempts}
    for row in shown.get("cases", []):
        for view in row["variants"]["as_written"]["attempts"]:
            a = by_case[row["case"]]
            if (view["outcome"], view["error"]) != (a["outcome"], a["error_code"]):
                mismatches.append(
                    f"{row['case']}: API shows {view['outcome']}/{view['error']}, store has "
                    f"{a['outcome']}/{a['error_code']}"
                )
    runs = runs_of(root, sid)
    verdict = state.get("verdict") or {}
    infra = sum(a["outcome"] == "infra" for a in attempts)
    assert len(names) == len(attempts)
    return FaultReport(
        series_id=sid,
        attempts=len(attempts),
        wall_s=wall,
        status=state["status"],
        verdict=verdict.get("verdict"),
        reason=verdict.get("reason"),
        outcomes=dict(Counter(a["outcome"] for a in attempts)),
        codes=dict(Counter(a["error_code"] or "-" for a in attempts)),
        provider_kinds=dict(provider_kinds),
        reruns=sum(a["reruns"] for a in attempts),
        infra_share=infra / len(attempts),
        mismatches=mismatches,
        spend_usd=state["spend"]["usd"],
        run_cost_usd=str(sum((Decimal(r["cost_usd"]) for r in runs), Decimal(0))),
        provider_cost_usd=str(provider_cost),
        reruns_at_end=reruns_at_end,
    )


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=400, help="attempts (one per case)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--limit", type=float, default=600.0, help="seconds before giving up")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run_fault_series(
            Path(tmp) / "relia", cases=args.cases, seed=args.seed, concurrency=args.concurrency, limit_s=args.limit
        )
    print("\n".join(report.lines()))
    ok = (
        not report.mismatches
        and report.reruns_at_end
        and report.status == "done"
        and report.verdict == "invalid"
        and report.reason == "infra_errors"
    )
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
