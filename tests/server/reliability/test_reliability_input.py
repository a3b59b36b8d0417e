"""Bad input: generated project files through `aqven check` and the loader; bad requests to the server.

* Hypothesis writes broken versions of the reliability project (bench/soak/soak_faults.py): any file replaced by
  random text or bytes, by random YAML values, by the valid file with one value changed, removed or added,
  by the file truncated, by YAML tricks (aliases, tags, deep nesting, duplicate keys), by hostile paths,
  or turned into a folder; stray files added. `check_workspace` (what `aqven check` runs) and
  `load_project` must never raise, and every diagnostic must carry a code (`E_…` / `W_…`) and a message.
  500 examples by default (the suite's time budget); `AQVEN_RELIABILITY_EXAMPLES=10000` for the long run
  (seeded unless `AQVEN_FUZZ_RANDOM=1`).
* A few of the nastiest files through the real `aqven check` command: exit 1 and no traceback.
* schemathesis against the server's OpenAPI (create_app over ASGI): no 5xx on any generated request.
* Oversized (> 2 MB, with and without Content-Length) and malformed bodies: a 4xx with a JSON error and a code.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aqven.project.loader import load_project
from aqven.research.diagnostics.workspace import check_workspace
from support.commands import api_client, aqven, cli_env
from support.fault_soak import EXPERIMENT, write_project

CODE_RE = re.compile(r"^[EW]_[A-Z0-9_]+$")
EXAMPLES = int(os.environ.get("AQVEN_RELIABILITY_EXAMPLES", "500"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("AQVEN_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=list(HealthCheck),
)


# ---- the base project, once ------------------------------------------------------------------------


def _base_files() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "p"
        write_project(root, cases=3)
        return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


BASE = _base_files()
YAML_FILES = sorted(f for f in BASE if f.endswith(".yaml"))
VOCAB = sorted(
    [
        "package",
        "name",
        "research",
        "spend_cap_usd",
        "concurrency",
        "engine",
        "provider_retries",
        "model",
        "settings",
        "timeout_s",
        "stall_timeout_s",
        "output_mode",
        "output_retries",
        "simulator",
        "cases",
        "input",
        "context",
        "node_outputs",
        "expected_output",
        "tags",
        "nodes",
        "id",
        "kind",
        "agent",
        "prompt",
        "inputs",
        "output",
        "result",
        "code",
        "flow",
        "question",
        "group",
        "human",
        "llm",
        "call",
        "subject",
        "variants",
        "varies",
        "what",
        "dataset",
        "checks",
        "function",
        "judge",
        "builtin",
        "metrics",
        "check",
        "bound",
        "margin",
        "direction",
        "repeats",
        "failure_mode",
        "description",
        "from",
        "to",
        "baseline",
        "validated_by",
        "rubric",
        "field",
        "pattern",
        "schema",
        "min",
        "max",
        "usd",
        "seconds",
    ]
)
HOSTILE = [
    "../../etc/passwd", "/etc/passwd", "..", ".", "", "a\x00b", "~/x.md", "C:\\x.md", "x" * 5000,
    "reply.md/..", "checks/right.py:", ":is_right", "checks/right.py:is_right:x", "../../../../x.py:f",
    "$input", "$reply.out.", "$$", "{{", "sim/writer.py:nope", "nope.py:f", "\u202e", "\ud7ff",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(VOCAB + HOSTILE),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(VOCAB), st.text(max_size=8)), inner, max_size=5),
    ),
    max_leaves=20,
)
YAML_TRICKS = [
    "a: &x [*x]\n",
    "a: &a [1,2]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f]\n",
    "!!python/object/apply:os.system ['echo pwned']\n",
    "package: !!binary aGVsbG8=\n",
    "package: x\npackage: y\n",
    "[" * 5000 + "]" * 5000 + "\n",
    "a:\n" + "".join("  " * i + "- \n" for i in range(200)),
    "--- a\n--- b\n",
    "? [a, b]\n: c\n",
    "{a: 1}: b\n",
    "package: 1e99999\n",
    "\ufeffpackage: bom\n",
    "\t- tab\n",
    "%YAML 9.9\n---\na: 1\n",
    "a: !!timestamp 2001-12-14t21:59:43.10-05:00\n",
    "a: !custom x\n",
    "<<: {package: x}\n",
]  # fmt: skip


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def edited_yaml(draw: st.DrawFn, file: str) -> str:
    """The valid file with one value replaced, removed, or a key added somewhere."""
    data = copy.deepcopy(yaml.safe_load(BASE[file]))
    path = draw(st.sampled_from(_paths(data)))
    action = draw(st.sampled_from(["replace", "remove", "add"]))
    if not path:
        data = draw(values) if action == "replace" else data
    else:
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if action == "replace":
            parent[last] = draw(st.one_of(values, st.sampled_from(HOSTILE)))
        elif action == "remove":
            del parent[last]
        elif isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(VOCAB))] = draw(values)
        elif isinstance(parent[last], list):
            parent[last].append(draw(values))
        else:
            parent[last] = draw(st.sampled_from(HOSTILE))
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


@st.composite
def file_change(draw: st.DrawFn) -> tuple[str, str | bytes | None]:
    """(file, new content); None deletes it, "<dir>" turns it into a folder."""
    file = draw(st.sampled_from([*sorted(BASE), "agents/extra.yaml", "flows/new/flow.yaml", "datasets/x.yml"]))
    kind = draw(st.sampled_from(["text", "bytes", "yaml", "edit", "truncate", "trick", "delete", "dir"]))
    if kind == "text":
        return file, draw(st.text(max_size=300))
    if kind == "bytes":
        return file, draw(st.binary(max_size=300))
    if kind == "yaml":
        return file, yaml.safe_dump(draw(values), allow_unicode=True)
    if kind == "edit" and file in YAML_FILES:
        return file, draw(edited_yaml(file))
    if kind == "truncate" and file in BASE:
        text = BASE[file]
        return file, text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if kind == "trick":
        return file, draw(st.sampled_from(YAML_TRICKS))
    if kind == "delete":
        return file, None
    if kind == "dir":
        return file, "<dir>"
    return file, draw(st.text(max_size=50))


def write_variant(root: Path, changes: list[tuple[str, str | bytes | None]]) -> None:
    for rel, text in BASE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    apply_changes(root, changes)


def apply_changes(root: Path, changes: list[tuple[str, str | bytes | None]]) -> None:
    for rel, content in changes:
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if content is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == "<dir>":
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")


def assert_diagnostics(diagnostics: list[Any]) -> None:
    for d in diagnostics:
        assert CODE_RE.match(d.code), d
        assert d.severity in ("error", "warning") and d.message, d


@pytest.fixture(scope="module")
def fuzz_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


_touched: set[str] = set()  # files the previous example changed, put back before the next one


def restore(root: Path) -> None:
    for rel in sorted(_touched, key=len, reverse=True):  # a file appears once, deeper paths first
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if rel in BASE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(BASE[rel])
        else:
            for parent in path.parents:  # folders only this file needed
                if parent == root or not parent.is_dir() or any(parent.iterdir()):
                    break
                parent.rmdir()
    _touched.clear()


@FUZZ
@given(changes=st.lists(file_change(), min_size=1, max_size=3))
def test_generated_project_files_never_crash_check_or_loader(
    fuzz_dir: Path, changes: list[tuple[str, str | bytes | None]]
) -> None:
    # One folder for every example, with only the changed files put back: project code is imported per root
    # (switching roots costs seconds), and rewriting every file costs more than checking it.
    root = fuzz_dir / "p"
    if not root.exists():
        write_variant(root, [])
    restore(root)
    _touched.update(rel for rel, _c in changes)
    apply_changes(root, changes)
    project = load_project(root)
    assert_diagnostics(project.diagnostics)
    _ws, diagnostics = check_workspace(root)
    assert_diagnostics(diagnostics)


def test_the_base_project_is_clean() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_variant(root, [])
        _ws, diagnostics = check_workspace(root)
        assert [d for d in diagnostics if d.severity == "error"] == []
        assert EXPERIMENT in _ws.experiments


NASTY: list[tuple[str, str | bytes | None]] = [
    ("flows/answer/flow.yaml", "[" * 5000 + "]" * 5000),
    ("agents/writer.yaml", b"\xff\xfe\x00garbage\x80"),
    ("datasets/questions.yaml", YAML_TRICKS[1]),
    ("experiments/answers_right/experiment.yaml", "<dir>"),
    ("aqven.yaml", "!!python/object/apply:os.system ['echo pwned']\n"),
]


def test_aqven_check_command_reports_without_traceback(tmp_path: Path) -> None:
    """Deep nesting, binary bytes, an alias bomb, a folder for a file and a python tag, through `aqven check`."""
    write_variant(tmp_path, NASTY)
    out = aqven("check", cwd=tmp_path, env=cli_env(), timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "Traceback" not in text and "pwned" not in text
    codes = set(re.findall(r"\b[EW]_[A-Z0-9_]+", text))
    assert {"E_YAML_SYNTAX", "E_YAML_TOO_DEEP"} & codes or len(codes) >= 3, text


# ---- the server -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app_root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "api"
        write_project(root, cases=6, simulator="seeded")
        yield root


@pytest.fixture(scope="module")
def client(app_root: Path) -> Iterator[Any]:

    from aqven.server.app import create_app

    with api_client(create_app(app_root), raise_server_exceptions=False) as c:
        yield c


def _json_error(resp: Any) -> dict[str, Any]:
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text[:300])
    assert resp.headers["content-type"].startswith("application/json")
    err: dict[str, Any] = resp.json()["error"]
    assert re.match(r"^[A-Z][A-Z0-9_]+$", err["code"]), err
    assert err["message"]
    return err


BIG = b'{"experiment_id": "' + b"x" * 2_100_000 + b'"}'


@pytest.mark.parametrize("path", ["/api/series", "/api/runs", "/api/experiments/answers_right/launch-plan"])
def test_oversized_body_is_refused(client: Any, path: str) -> None:
    err = _json_error(client.post(path, content=BIG, headers={"content-type": "application/json"}))
    assert err["code"] == "BODY_TOO_LARGE"


def test_oversized_body_without_content_length_is_refused(client: Any) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"experiment_id": "'
        for _ in range(30):
            yield b"x" * 100_000
        yield b'"}'

    resp = client.post("/api/series", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in {k.lower() for k in resp.request.headers}
    assert _json_error(resp)["code"] == "BODY_TOO_LARGE"


MALFORMED: list[Any] = [
    ("/api/series", b"{not json", "application/json"),
    ("/api/series", b"", "application/json"),
    ("/api/series", b"null", "application/json"),
    ("/api/series", b"[]", "application/json"),
    ("/api/series", b'"text"', "application/json"),
    ("/api/series", b'{"experiment_id": 5}', "application/json"),
    ("/api/series", b'{"experiment_id": "answers_right", "repeats": 1e400}', "application/json"),
    ("/api/series", b'{"experiment_id": "answers_right", "cap_usd": "NaN"}', "application/json"),
    ("/api/series", b'{"experiment_id": "answers_right", "cap_usd": "-1"}', "application/json"),
    ("/api/series", b'{"experiment_id": "answers_right", "cases": 0}', "application/json"),
    ("/api/series", b'{"experiment_id": "nope"}', "application/json"),
    ("/api/series", b'{"experiment_id": "answers_right", "look": {}}', "application/json"),
    ("/api/series", b'{"unknown": 1}', "application/json"),
    ("/api/series", b"\xff\xfe\x00\x01", "application/json"),
    ("/api/series", b'{"experiment_id": "answers_right"}', "text/plain"),
    ("/api/series", b"experiment_id=answers_right", "application/x-www-form-urlencoded"),
    ("/api/series", b"[" * 100_000 + b"]" * 100_000, "application/json"),
    ("/api/runs", b'{"flow_id": "answer", "input": {"question": 1}}', "application/json"),
    ("/api/runs", b'{"flow_id": "answer", "case": "nope"}', "application/json"),
    ("/api/runs", b'{"flow_id": "../../etc", "input": {}}', "application/json"),
    ("/api/runs", b'{"flow_id": "answer", "input": {"question": "x"}, "seed": 1e30}', "application/json"),
    ("/api/runs", b'{"flow_id": "answer", "input": {"question": "x"}, "from_node": "nope"}', "application/json"),
    (
        "/api/series",
        b'{"look": {"flow_id": "answer", "dataset_id": "questions", "case_names": ["q00000"], "end_node": "x"}}',
        "application/json",
    ),
    ("/api/experiments/answers_right/launch-plan", b'{"cases": -5}', "application/json"),
    ("/api/experiments/answers_right/launch-plan", b'{"repeats": 1000}', "application/json"),
    ("/api/series/ser_nope/approve", b'{"cap_usd": "abc"}', "application/json"),
    ("/api/series/ser_nope/cancel", b'{"reason": 5}', "application/json"),
    ("/api/runs/run_nope/human/x", b'{"answer": 1}', "application/json"),
]


@pytest.mark.parametrize(("path", "body", "ctype"), MALFORMED)
def test_malformed_body_is_a_4xx_json_error_with_a_code(client: Any, path: str, body: bytes, ctype: str) -> None:
    _json_error(client.post(path, content=body, headers={"content-type": ctype}))


@pytest.mark.parametrize(
    "path",
    [
        "/api/series/%00",
        "/api/runs/" + "x" * 10_000,
        "/api/runs?limit=-1",
        "/api/runs?limit=abc",
        "/api/series/x?wait_seconds=1e999",
        "/api/series/x?wait_seconds=nan",
        "/api/runs/x/events?after=-1",
        "/api/flows/..%2F..%2Fetc",
        "/api/datasets/%2e%2e",
        "/api/experiments/%ff",
        "/api/runs?offset=99999999999999999999",
        "/api/nope",
        "/api/studio/runs?page=99999999999999999999",
    ],
)
def test_malformed_query_and_path_is_a_4xx_json_error(client: Any, path: str) -> None:
    _json_error(client.get(path))


def test_huge_event_offset_of_a_real_run_is_a_4xx(client: Any) -> None:
    run = client.post(
        "/api/runs", json={"flow_id": "answer", "input": {"question": "x"}, "simulate": True, "wait": True}
    )
    assert run.status_code == 201, run.text
    _json_error(client.get(f"/api/runs/{run.json()['id']}/events?after=99999999999999999999"))


def test_schemathesis_finds_no_server_error(app_root: Path, tmp_path: Path) -> None:
    """Every operation of the live server's OpenAPI, with generated parameters and bodies: never a 5xx."""
    import schemathesis
    from hypothesis import HealthCheck as HC
    from hypothesis import settings as hsettings
    from schemathesis.core.result import Ok

    from support.fault_soak import live_server, server_env

    root = tmp_path / "st"
    shutil.copytree(app_root, root, ignore=shutil.ignore_patterns(".aqven"))
    env = server_env(AQVEN_SIM_LATENCY_SCALE="0", AQVEN_PRICES_FILE=str(tmp_path / "no-prices.json"))
    examples = int(os.environ.get("AQVEN_SCHEMATHESIS_EXAMPLES", "10"))
    with live_server(root, env) as server:
        base = f"http://127.0.0.1:{server.port}"
        auth = {"Authorization": f"Bearer {server.token}"}
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json", headers=auth)
        failures: list[str] = []
        calls = [0]
        operations = []
        for result in schema.get_all_operations():
            assert isinstance(result, Ok), f"the server's OpenAPI does not load: {result}"
            operation = result.ok()
            if operation.path.startswith(("/mcp", "/api/studio/chat")):
                continue  # MCP has its own tests; the chat agent calls a model
            operations.append(operation)

            @hsettings(
                max_examples=examples,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HC),
            )
            @given(case=operation.as_strategy())
            def run(case: Any) -> None:
                if case.query and "wait_seconds" in case.query:
                    case.query["wait_seconds"] = 0  # long-polls are the load test's business
                response = case.call(base_url=base, timeout=30, headers=auth)
                calls[0] += 1
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.formatted_path} {case.query or ''} {str(case.body)[:100]} → "
                        f"{response.status_code}: {response.text[:200]}"
                    )

            run()
        print(f"\nschemathesis: {len(operations)} operations, {calls[0]} requests, {len(failures)} server errors")
        assert failures == [], "\n".join(failures[:10])
