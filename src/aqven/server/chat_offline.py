"""AQVEN's offline responder: the chat's stand-in when no model answers (no agent named, or simulated mode on).

It is not a language model. It is a pydantic-ai `FunctionModel` that picks tools of the registry by keywords
of the question and the ids it names (`plan_tools`), quotes the lines of FINDINGS.md that share words with the
question, and sums up what the tools returned (`summarize`); every answer says what it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from aqven.project.money import shown_usd

OFFLINE_NAME = "aqven-offline-responder"
AGENT_ENV = "AQVEN_CHAT_AGENT"


def is_tool_error(content: Any) -> bool:
    """A tool's failure as the chat sees it: ``{"error": {...}}`` and nothing else (a failed series' snapshot
    also has an `error` key, among many)."""
    return isinstance(content, dict) and set(content) == {"error"} and isinstance(content["error"], dict)


_WORD = re.compile(r"[a-z0-9_]{4,}")
_STOP = {
    "what",
    "which",
    "does",
    "this",
    "that",
    "have",
    "with",
    "from",
    "about",
    "know",
    "tell",
    "there",
    "their",
    "project",
    "please",
    "would",
    "could",
    "should",
    "findings",
    "finding",
    "when",
    "where",
    "were",
    "been",
    "they",
    "them",
    "will",
    "your",
}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def findings_lines(md: str) -> list[tuple[str, str]]:
    """(heading path, line) of every finding line of FINDINGS.md."""
    out: list[tuple[str, str]] = []
    section = shelf = ""
    for line in md.splitlines():
        if line.startswith("## "):
            section, shelf = line[3:].strip(), ""
        elif line.startswith("### "):
            shelf = line[4:].strip()
        elif line.startswith("- "):
            out.append((" · ".join(x for x in (section, shelf) if x), line[2:].strip()))
    return out


def _section(instructions: str, name: str) -> str:
    m = re.search(rf"=== {re.escape(name)} ===\n(.*?)\n=== end of {re.escape(name)} ===", instructions, re.S)
    return m.group(1) if m else ""


def plan_tools(question: str, available: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """The tools the offline responder calls for `question`, by its keywords and the ids it names."""
    q = question.lower()
    calls: list[tuple[str, dict[str, Any]]] = []
    about_cases = bool(re.search(r"\b(cases?|fail\w*|pass\w*|which)\b", q))
    series_ids = list(dict.fromkeys(re.findall(r"\bser_[0-9a-f]{6,}\b", q)))
    about_cost = bool(re.search(r"\b(cost\w*|finish\w*|spend|spent|money|cap|how much|price\w*|dollars?)\b", q))
    for sid in series_ids:
        calls.append(("series_get", {"series_id": sid, "include_cases": about_cases}))
        if about_cost:
            calls.append(("series_finish_cost", {"series_id": sid}))
    for rid in dict.fromkeys(re.findall(r"\brun_[0-9a-f]{6,}\b", q)):
        calls.append(("run_get", {"run_id": rid}))
    if re.search(r"\b(check|errors?|warnings?|valid|broken)\b", q):
        calls.append(("aqven_check", {}))
    if "experiment" in q:
        calls.append(("list_experiments", {}))
    if "series" in q and not series_ids:
        calls.append(("series_list", {}))
    if re.search(r"\bflows?\b", q):
        calls.append(("list_flows", {}))
    if re.search(r"\b(agents?|models?)\b", q):
        calls.append(("list_agents", {}))
    if re.search(r"\b(datasets?|cases?)\b", q) and not series_ids:
        calls.append(("list_datasets", {}))
    if re.search(r"finding|confirm|refut|verdict|learn|know", q):
        calls.append(("read_findings_md", {}))
    return [(name, args) for name, args in calls if name in available]


def as_object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (any key of a tool's answer may be null)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


#: A series' status as Studio's pages name it (`words` and `statusOf` in server/studio/js/dom.js and decision.js).
STATUS_WORDS = {
    "awaiting_approval": "paused, awaiting approval",
    "waiting_human": "waiting for a person",
    "running": "running",
    "queued": "queued",
    "done": "done",
    "cancelled": "cancelled",
    "failed": "failed",
}
ENDED = ("done", "cancelled", "failed")
_PROVISIONAL = re.compile(r"^(Provisional \(still running\)|So far \([^)]*\)): ")


def status_words(content: dict[str, Any]) -> str:
    """The status a person reads: a series stopped at its cap ends "done" in the store, but it did not finish."""
    status = str(content.get("status"))
    if status == "done" and content.get("stop_reason") == "stopped_at_cap":
        return "stopped at the cap"
    return STATUS_WORDS.get(status, status)


def _series_lines(content: dict[str, Any]) -> list[str]:
    p, sp, vd = as_object(content.get("progress")), as_object(content.get("spend")), as_object(content.get("verdict"))
    lines = [
        f"series {content.get('series_id')} ({content.get('experiment_id') or content.get('kind')} on "
        f"{content.get('on')}{', simulated' if content.get('simulated') else ''}): {status_words(content)}, "
        f"{p.get('done')} of {p.get('attempts')} attempts, spent {shown_usd(sp.get('usd'))} of "
        f"{shown_usd(sp.get('cap_usd'))}{' (a lower bound)' if sp.get('lower_bound') else ''}."
    ]
    ended = content.get("status") in ENDED
    if vd.get("text") and not ended:
        # Not decided yet: the sentence so far, without the words "still running" (a paused series is not).
        lines.append(f"Not decided yet. So far: “{_PROVISIONAL.sub('', str(vd['text']))}”")
    elif vd.get("text"):
        lines.append(f"Verdict: “{vd['text']}”")
    if content.get("finding"):
        lines.append(f"Finding: {content['finding']}")
    err = as_object(content.get("error"))
    if err:
        lines.append(f"It failed on an infrastructure error: {err.get('code')}: {err.get('message')}")
    if content.get("status") == "awaiting_approval":
        lines.append("It waits for a person: approve it with a new cap on its Studio page (I cannot).")
    rows = content.get("cases")
    if isinstance(rows, list):
        failing = [r for r in rows if isinstance(r, dict) and r.get("failing")]
        if failing:
            lines.append(f"Working cases that failed ({len(failing)}):")
            for r in failing:
                parts = []
                for vid, cell in as_object(r.get("variants")).items():
                    cell = as_object(cell)
                    checks = ", ".join(str(c) for c in _list(cell.get("failed_checks")))
                    parts.append(
                        f"{vid} failed {cell.get('fails')} of {cell.get('counted')}"
                        + (f" ({checks})" if checks else "")
                    )
                lines.append(f"- {r.get('case')}: " + "; ".join(parts))
        elif rows:
            lines.append("no working case failed.")
        if content.get("on") == "holdout" or content.get("hidden_cases"):
            lines.append(
                f"{content.get('hidden_cases') or 0} case(s) not listed: held-out cases are never shown one by one."
            )
    return lines


def _finish_lines(est: dict[str, Any]) -> list[str]:
    """The server's finish estimate in words, money rounded as the pages round it."""
    left = int(est.get("left") or 0)
    if not left:
        return ["Nothing is left to run: finishing costs nothing more."]
    if est.get("total_usd") is None:
        return [f"{left} attempts are left; no attempt has a cost yet, so there is nothing to price finishing from."]
    line = (
        f"To finish: about {shown_usd(est.get('more_usd'))} more for the {left} attempts left "
        f"({shown_usd(est.get('total_usd'))} in all, at {shown_usd(est.get('per_attempt_usd'))} an attempt so far)"
    )
    if est.get("cap_to_finish_usd"):
        line += f"; a cap of {shown_usd(est['cap_to_finish_usd'])} lets it finish without another pause"
    lines = [line + "."]
    after = est.get("double_pauses_after")
    if est.get("double_usd") and after is not None:
        lines.append(
            f"Approving double ({shown_usd(est['double_usd'])}) pauses again after about {after} more "
            f"attempt{'' if after == 1 else 's'}."
        )
    if est.get("decides"):
        lines.append(str(est["decides"])[0].upper() + str(est["decides"])[1:] + ".")
    return lines


def summarize(name: str, content: Any) -> list[str]:
    """What the offline responder says about one tool's answer (any field of it may be missing or null)."""
    if is_tool_error(content):
        err = content["error"]
        return [f"{name}: {err.get('code')}: {err.get('message')}"]
    data = as_object(content)
    if name == "aqven_check":
        lines = [f"aqven check: {data.get('errors')} error(s), {data.get('warnings')} warning(s)."]
        for d in _list(data.get("diagnostics"))[:8]:
            d = as_object(d)
            where = (d.get("file") or "project") + (f":{d['line']}" if d.get("line") else "")
            lines.append(f"- {where}: {d.get('code')}: {d.get('message')}")
        return lines
    if name == "list_experiments":
        items = [as_object(e) for e in _list(data.get("experiments"))]
        return [f"{len(items)} experiment(s):"] + [
            f"- {e.get('id')} ({e.get('failure_mode')}): {e.get('caption')}" for e in items
        ]
    if name == "series_list":
        items = [as_object(x) for x in _list(data.get("series"))]
        lines = [f"latest series ({len(items)}):"]
        for x in items[:8]:
            verdict = f" — {x.get('text')}" if x.get("text") else ""
            lines.append(
                f"- {x.get('series_id')} {x.get('experiment_id')} on {x.get('on')}: {x.get('status')}{verdict}"
            )
        return lines
    if name == "series_get" and data:
        return _series_lines(data)
    if name == "series_finish_cost" and data:
        return _finish_lines(data)
    if name == "run_get" and data:
        err = as_object(data.get("error"))
        tail = f": {err.get('code')}: {err.get('message')}" if err else ""
        case = f" on case {data.get('case_name')}" if data.get("case_name") else ""
        return [f"run {data.get('id')} of {data.get('flow_id')}{case}: {data.get('status')}{tail}"]
    if name in ("list_flows", "list_agents", "list_datasets"):
        what = name.split("_")[1]
        items = [as_object(x) for x in _list(data.get(what))]
        return [
            f"{what}: " + ", ".join(str(x.get("id")) + (f" ({x['model']})" if x.get("model") else "") for x in items)
        ]
    return []


def offline_reply(question: str, instructions: str, returns: list[tuple[str, Any]]) -> str:
    md = _section(instructions, "FINDINGS.md")
    lines = findings_lines(md)
    asked = _words(question)
    scored = sorted(((len(asked & _words(h + " " + line)), h, line) for h, line in lines), key=lambda x: -x[0])
    hits = [(h, line) for score, h, line in scored if score > 0]
    general = re.search(r"finding|know|learn|confirm|refut|verdict", question.lower())
    out: list[str] = []
    if re.search(r"\b(approve|continue|raise the cap)\b", question.lower()):
        out.append(
            "I cannot approve or continue a series: only a person can, with Approve on the series page in Studio "
            "or with `aqven approve` at their terminal."
        )
    if not lines and (general or hits or not returns):
        out.append("FINDINGS.md has no findings yet: a series on held-out cases writes the first one.")
    elif hits or general:
        chosen = hits or [(h, line) for h, line in lines]
        out.append("From FINDINGS.md (read before this conversation):")
        out += [f"- [{h}] {line}" for h, line in chosen[:8]]
    for name, content in returns:
        if name == "read_findings_md":
            continue  # quoted above, from the instructions
        out += summarize(name, content)
    if not out:
        out.append(
            "I found nothing in FINDINGS.md, AGENTS.md or CLAUDE.md that matches your question. Ask about findings, "
            "experiments, series (by id), runs (by id), flows, agents or `aqven check`."
        )
    out.append(
        "— AQVEN's offline responder (not a language model): it picks tools by keywords and quotes FINDINGS.md. "
        f"Name an agent in {AGENT_ENV} and turn simulated mode off to talk to a model."
    )
    return "\n".join(out)


async def _offline(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    question = ""
    start = 0
    for i, m in enumerate(messages):
        if isinstance(m, ModelRequest):
            for part in m.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    question, start = part.content, i
    returns: list[tuple[str, Any]] = []
    for m in messages[start:]:
        if isinstance(m, ModelRequest):
            returns += [(p.tool_name, p.content) for p in m.parts if isinstance(p, ToolReturnPart)]
    called = any(
        isinstance(m, ModelResponse) and any(isinstance(p, ToolCallPart) for p in m.parts) for m in messages[start:]
    )
    if not called:
        plan = plan_tools(question, {t.name for t in info.function_tools})
        if plan:
            return ModelResponse(parts=[ToolCallPart(name, json.dumps(args)) for name, args in plan])
    text = offline_reply(question, info.instructions or "", returns)
    return ModelResponse(parts=[TextPart(text)])


def offline_model() -> FunctionModel:
    return FunctionModel(_offline, model_name=OFFLINE_NAME)
