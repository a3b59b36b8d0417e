"""A small valid project for tests, written file by file so a test can break any part of it.

`write_project(root, overrides)` writes the base project with `overrides` applied: a value replaces
that file's content (str or bytes), None deletes the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

AQVEN_YAML = """\
package: demo_project
name: Demo
research:
  spend_cap_usd: "2.50"
concurrency: 4
engine:
  provider_retries: 1
  retry_backoff_s: 0.5
"""

AGENT_YAML = """\
model: openrouter:openai/gpt-4.1-mini
description: The default agent.
settings:
  temperature: 0.3
  max_tokens: 800
  timeout_s: 60
output_mode: tool
output_retries: 2
simulator: sim/agents.py:answer
"""

SIM_PY = """\
from typing import Any


def answer(request: Any) -> Any:
    return {"label": "billing", "score": 0.5}
"""

DATASET_YAML = """\
description: Two tickets.
cases:
  - name: refund_late
    input: {ticket: "My order is late; I want a refund.", tier: gold}
    context: {order_total: "49.90"}
    node_outputs: {classify: {label: shipping}}
    expected_output: {ok: true}
    tags: [shipping, refund]
  - name: flicker
    input: {ticket: "My LED strip flickers."}
    tags: [hardware]
"""

MAIN_FLOW_YAML = """\
description: Answer a support ticket.
input:
  ticket: string
  tier: string?
output: {reply: string, ok: boolean}
nodes:
  - id: classify
    kind: llm
    agent: a
    prompt: classify.md
    inputs: {ticket: $input.ticket}
    output: {label: string}
  - id: enrich
    kind: code
    code: enrich.py:enrich
    inputs:
      label: $classify.out.label
      tier: $input.tier
    output: {priority: integer}
  - id: panel
    kind: group
    nodes:
      - id: judge_1
        kind: llm
        agent: a
        prompt: judge.md
        inputs: {text: $input.ticket, label: $classify.out.label}
        output: {score: number}
      - id: judge_2
        kind: llm
        agent: a
        prompt: judge.md
        inputs: {text: $input.ticket, label: $classify.out.label}
        output: {score: number}
      - id: merge
        kind: code
        code: enrich.py:merge
        inputs: {a: $judge_1.out.score, b: $judge_2.out.score}
        output: number
    result: $merge.out
  - id: draft
    kind: call
    flow: helper
    inputs: {text: $input.ticket, priority: $enrich.out.priority}
  - id: review
    kind: human
    question: Is this reply fine?
    inputs: {draft: $draft.out, score: $panel.out}
    output: {ok: boolean}
  - id: finish
    kind: code
    code: enrich.py:finish
    inputs: {draft: $draft.out, review: $review.out, context_total: $context.order_total}
    output: {reply: string, ok: boolean}
result: $finish.out
"""

CLASSIFY_MD = """\
Classify this ticket: {{ ticket }}
Answer with a label.
"""

JUDGE_MD = """\
Score the ticket {{ text }} labelled {{ label }} from 0 to 1.
"""

ENRICH_PY = """\
from typing import Any


def enrich(label: str, tier: str | None = None) -> dict[str, Any]:
    return {"priority": 1 if tier == "gold" else 2}


def merge(a: float, b: float) -> float:
    return (a + b) / 2


def finish(draft: str, review: dict[str, Any], context_total: Any = None) -> dict[str, Any]:
    return {"reply": draft, "ok": bool(review.get("ok"))}
"""

HELPER_FLOW_YAML = """\
input: {text: string, priority: "integer?"}
output: string
nodes:
  - id: shout
    kind: code
    code: helper.py:shout
    inputs: {text: $input.text}
    output: string
"""

HELPER_PY = """\
def shout(text: str) -> str:
    return text.upper()
"""

BASE: dict[str, str | bytes] = {
    "aqven.yaml": AQVEN_YAML,
    "agents/a.yaml": AGENT_YAML,
    "sim/agents.py": SIM_PY,
    "datasets/d.yaml": DATASET_YAML,
    "flows/main/flow.yaml": MAIN_FLOW_YAML,
    "flows/main/classify.md": CLASSIFY_MD,
    "flows/main/judge.md": JUDGE_MD,
    "flows/main/enrich.py": ENRICH_PY,
    "flows/helper/flow.yaml": HELPER_FLOW_YAML,
    "flows/helper/helper.py": HELPER_PY,
}

Overrides = dict[str, str | bytes | None]


def project_files(overrides: Overrides | None = None) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = dict(BASE)
    for name, content in (overrides or {}).items():
        if content is None:
            files.pop(name, None)
        else:
            files[name] = content
    return files


def write_files(root: Path, files: Mapping[str, str | bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def write_project(root: Path, overrides: Overrides | None = None) -> Path:
    """Write the base project (with `overrides`) into `root` and return `root`."""
    return write_files(root, project_files(overrides))


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """The 1-based line of the `occurrence`-th line containing `needle`."""
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not found")
