"""Simulated agents of the lumen project: one function per agent, answering in its model's place.

An agent file names its simulator as `simulator: sim/agents.py:<function>`. In simulated mode the engine calls
that function with a `SimRequest` (the rendered prompt, the node's inputs, the output schema, a seed) and turns
the `SimReply` into the model's answer, so output modes, validation and retries stay the real ones.

What the simulators do is decided by sim/world.py (the truth the tests compare with):
  - support replies (an output with `reply`): overpromise with the agent's `world.true_pass_rate` for the ticket;
  - judges (an output with `winner`): pick the better answer with `world.judge_accuracy`;
  - judge checks of experiments (node id `check:<id>`): pass or fail the attempt's output by whether it makes an
    unkeepable promise (`world.unkeepable_in`), right with the agent's `world.declared_accuracy`;
  - any other output schema gets a plausible value of that schema.
Flow tasks are recognised from the output schema, not the node id, so an agent can stand in on any node.
Each function behaves as the agent of its name (its profile in world.py and its style below); another agent
may point at the same function, for example a gpt with other settings.

Randomness: everything is drawn from `req.rng()`, so one seed gives one answer. The agent id is mixed into each
stream: two agents given the same seed (paired variants of one case and repeat) still fail independently, as
two real models would. Only the truth they share (the ticket's difficulty and pressure) correlates them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import random
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from aqven.models.simulator import SimReply, SimRequest


def _load_world() -> ModuleType:
    """sim/world.py, loaded by its path: the engine loads this file by path, not as a package."""
    path = Path(__file__).resolve().with_name("world.py")
    name = "_lumen_sim_world_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


world = _load_world()


class Style(NamedTuple):
    greeting: str  # the salutation, with {name}
    first_token_s: float  # time to the first token
    tokens_per_s: float
    reasoning_tokens: tuple[int, int]  # hidden thinking tokens per call (billed as output)
    malfunction: float  # chance that a call returns broken output (the output retries ask again)


STYLES: dict[str, Style] = {
    "gpt": Style("Hi {name},", 0.45, 150.0, (0, 0), 0.002),
    "mistral": Style("Hello {name},", 0.35, 170.0, (0, 0), 0.004),
    "deepseek": Style("Hi {name},", 0.8, 60.0, (0, 0), 0.003),
    "qwen": Style("Hello {name},", 0.6, 110.0, (150, 600), 0.003),
    "llama": Style("Hey {name},", 0.3, 180.0, (0, 0), 0.008),
    "tie_break": Style("Hi {name},", 0.9, 80.0, (0, 0), 0.001),
}
DEFAULT_STYLE = Style("Hi {name},", 0.5, 120.0, (0, 0), 0.003)


def stream(req: SimRequest, purpose: str) -> random.Random:
    """An independent random stream of this request for one purpose (decision, wording, ...)."""
    base = req.rng().getrandbits(64)
    return random.Random(f"{base}:{req.agent_id}:{purpose}")


# ---- support replies -----------------------------------------------------------------------------------

ISSUES: tuple[tuple[str, str], ...] = (
    (r"flicker", "the flickering"),
    (r"buzz", "the buzzing"),
    (r"offline|drops? (off|out)|dropping off", "the dropped connection"),
    (r"\bpair|connect|shows? up", "the connection trouble"),
    (r"firmware|update", "the stuck update"),
    (r"peel|adhesive", "the adhesive coming loose"),
    (r"wrong item|instead of", "the wrong item"),
    (r"missing", "the missing part"),
    (r"crack|broken|damaged", "the damage"),
    (r"\bcharged\b|invoice|promo code", "the billing mistake"),
    (r"tracking", "the stuck tracking"),
    (r"late|lost|delivery|arriv", "the delivery problem"),
    (r"stays dark|dark section", "the dark section"),
    (r"too hot|overheat", "the overheating controller"),
    (r"colou?rs?\b", "the wrong colours"),
    (r"battery", "the battery drain"),
    (r"dims by itself|random", "the random dimming"),
    (r"blinks red|red light", "the red light ring"),
    (r"dead|died|stopped (working|responding)|won't turn on|doesn't turn on", "the unit that stopped working"),
)
TIPS: dict[str, str] = {
    "strip": "In the meantime, please check that the controller plug is pushed fully into the strip.",
    "bulb": "In the meantime, switching the bulb off and on five times puts it back into pairing mode.",
    "hub": "In the meantime, keeping the hub within a few metres of your router usually steadies it.",
    "accessory": "In the meantime, the Lumen app's Devices page shows whether it is still connected.",
}
EMPATHY = (
    "I'm sorry about {issue} with your {product}.",
    "Thanks for telling us about {issue} with your {product}, and sorry for the hassle.",
    "I'm sorry your {product} has caused you this trouble, and thank you for the detail you sent.",
)
CLOSINGS = (
    "Thanks for your patience while we sort this out.",
    "If anything else comes up, just reply to this email.",
    "Let me know if there is anything else I can help with.",
)


@functools.lru_cache(maxsize=4096)
def issue_in(text: str) -> str:
    for pattern, phrase in ISSUES:
        if re.search(pattern, text, re.IGNORECASE):
            return phrase
    return "the trouble"


class Ticket(NamedTuple):
    text: str
    tier: str
    total: str
    product: str | None
    category: str
    request: str
    name: str | None
    policy: dict[str, Any]

    @classmethod
    def from_inputs(cls, inputs: dict[str, Any]) -> Ticket:
        text = str(inputs.get("ticket") or "")
        tier = str(inputs.get("tier") or "basic")
        total = str(inputs.get("order_total") or "0.00")
        days = inputs.get("days_since_delivery")
        days = days if isinstance(days, int) else 10
        pol = inputs.get("policy")
        if not isinstance(pol, dict):
            pol = world.policy(tier, total, days)
        product = world.product_in(text)
        category = world.category_of(product)
        return cls(text, tier, total, product, category, world.request_in(text), world.customer_name(text), pol)


def kept_promises(t: Ticket) -> list[tuple[str, str]]:
    """The promises policy allows for this ticket: (sentence for the reply, short item for `promises`)."""
    item = t.product or "order"
    pol = t.policy
    if t.request == "refund" and pol.get("within_return_window", True):
        return [
            (f"I've emailed you a prepaid return label for the {item}.", "Prepaid return label by email"),
            (
                f"Once it is back with us, your refund of €{t.total} is issued {pol.get('refund_timing')}.",
                f"Refund of €{t.total} {pol.get('refund_timing')}",
            ),
        ]
    if t.request == "refund":
        window = pol.get("return_window_days")
        return [
            (
                f"Your order is past our {window}-day return window, so I've asked our returns team to review "
                "a refund; they reply within 2 business days.",
                "Returns team review within 2 business days",
            )
        ]
    if t.request == "replacement":
        ship = pol.get("replacement_shipping")
        return [
            (
                f"I've set up a replacement {item}; it ships in {ship} once you confirm your address.",
                f"Replacement ships in {ship}",
            ),
            ("You can keep the faulty unit until the new one arrives.", "Keep the faulty unit until then"),
        ]
    if t.request == "credit":
        credit, pct = pol.get("max_credit"), pol.get("max_credit_percent")
        return [
            (
                f"I've added a goodwill credit of €{credit} ({pct}% of your order) to your account.",
                f"Goodwill credit of €{credit}",
            )
        ]
    return [
        (
            "I've passed your ticket to our technical team, who reply within 2 business days.",
            "Technical team reply within 2 business days",
        )
    ]


def overpromise_sentence(t: Ticket, rng: random.Random) -> str:
    pool = world.OVERPROMISES.get(t.request, ()) if rng.random() < 0.65 else ()
    pool = pool or world.OVERPROMISES["any"]
    upgrade = world.UPGRADES.get(t.category, "Lumen Starter Kit")
    return str(rng.choice(pool)).format(total=f"€{t.total}", product=t.product or "unit", upgrade=upgrade)


def draft_text(t: Ticket, rng: random.Random, greeting: str = "Hi {name},", overpromise: bool = False) -> str:
    """A first draft: greeting, empathy, what policy allows, a closing (and maybe an overpromise)."""
    body = [rng.choice(EMPATHY).format(issue=issue_in(t.text), product=t.product or "order")]
    body += [sentence for sentence, _ in kept_promises(t)]
    if overpromise:
        body.insert(rng.randint(1, len(body)), overpromise_sentence(t, rng))
    return f"{greeting.format(name=t.name or 'there')}\n\n{' '.join(body)}\n\n{rng.choice(CLOSINGS)}"


@functools.lru_cache(maxsize=4096)
def _first_clean_sentence(draft: str) -> str | None:
    """The draft's opening sentence (after the greeting), unless it promises something unkeepable."""
    paragraphs = [p.strip() for p in draft.strip().split("\n\n") if p.strip()]
    if paragraphs and paragraphs[0].endswith(",") and len(paragraphs[0]) < 60:
        paragraphs = paragraphs[1:]
    if not paragraphs:
        return None
    first = re.split(r"(?<=[.!?])\s+", paragraphs[0])[0].strip()
    if not first.endswith((".", "!")) or world.unkeepable_in(first) or len(first) > 240:
        return None
    return first


def support_reply(req: SimRequest, who: str) -> tuple[dict[str, Any], bool]:
    """The revise step's answer {reply, promises} as agent profile `who`, and whether it overpromised.

    The decision is the first draw of its own stream, so the chance of an overpromise is exactly
    1 - world.true_pass_rate(who, ticket).
    """
    key = world.case_key_from_inputs(req.inputs)
    overpromised = stream(req, "promise").random() >= world.true_pass_rate(who, key)
    rng = stream(req, "wording")
    t = Ticket.from_inputs(req.inputs)
    style = STYLES.get(who, DEFAULT_STYLE)
    kept = kept_promises(t)
    draft = req.inputs.get("draft")
    opening = _first_clean_sentence(draft) if isinstance(draft, str) else None
    body = [opening or rng.choice(EMPATHY).format(issue=issue_in(t.text), product=t.product or "order")]
    if t.request in ("refund", "replacement", "help") and rng.random() < 0.5:
        body.append(TIPS[t.category])
    body += [sentence for sentence, _ in kept]
    promises = [short for _, short in kept]
    if overpromised:
        extra = overpromise_sentence(t, rng)
        body.append(extra)
        promises.append(extra)
    reply = f"{style.greeting.format(name=t.name or 'there')}\n\n{' '.join(body)}\n\n{rng.choice(CLOSINGS)}"
    return {"reply": reply, "promises": promises}, overpromised


def draft_reply(req: SimRequest, who: str) -> str:
    """The draft step's reply: rougher than a revision, so it overpromises twice as often."""
    key = world.case_key_from_inputs(req.inputs)
    fail = min(2 * world.true_fail_rate(who, key), world.MAX_FAIL)
    overpromise = stream(req, "promise").random() < fail
    style = STYLES.get(who, DEFAULT_STYLE)
    return draft_text(Ticket.from_inputs(req.inputs), stream(req, "wording"), style.greeting, overpromise)


# ---- judges --------------------------------------------------------------------------------------------

RATIONALES = (
    "states the policy correctly, while the other answer gets the key fact wrong",
    "is accurate and specific; the other answer would mislead the customer",
    "matches Lumen's documentation; the other answer contradicts it",
)


def judge_verdict(req: SimRequest, who: str) -> tuple[dict[str, Any], bool]:
    """A judge's pick (as agent profile `who`) between answer A and B, and whether it is the true winner."""
    inputs = req.inputs
    q, a, b = (inputs.get(k) for k in ("question", "answer_a", "answer_b"))
    if isinstance(q, str) and isinstance(a, str) and isinstance(b, str):
        truth = world.panel_truth(q, a, b)
    else:
        truth = "A" if world.unit("panel", req.prompt) < 0.5 else "B"
    rng = stream(req, "verdict")
    correct = rng.random() < world.judge_accuracy(who, truth)
    winner = truth if correct else ("B" if truth == "A" else "A")
    confidence = round(rng.uniform(0.62, 0.97) if correct else rng.uniform(0.5, 0.85), 2)
    fields: dict[str, Any] = {"winner": winner, "confidence": confidence}
    out: dict[str, Any] = {}
    for name, schema in _properties(req.output_schema).items():
        if name in fields:
            out[name] = fields[name]
        elif _type(schema) == "string" and "enum" not in schema:
            out[name] = f"Answer {winner} {rng.choice(RATIONALES)}."
        else:
            out[name] = fill(schema, rng)
    return out, correct


# ---- judge checks --------------------------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    """Every string inside an output: the reply and each listed promise."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def check_verdict(req: SimRequest, who: str) -> tuple[dict[str, Any], bool]:
    """A judge check's verdict (node `check:<id>`) on an attempt's output, as agent profile `who`, and whether it
    is right.

    Whatever the rubric asks, the truth is the world's: the output passes when none of its texts makes a promise
    of `world.UNKEEPABLE`. The judge gets it right with the agent's `world.declared_accuracy`; a wrong verdict
    flips pass and fail. A score scale gets 0.7 .. 1.0 for a pass and 0.0 .. 0.3 for a fail.
    """
    found = next(
        ((label, text) for text in _texts(req.inputs.get("output")) if (label := world.unkeepable_in(text))),
        None,
    )
    truth = found is None
    rng = stream(req, "check")
    correct = rng.random() < world.declared_accuracy(who)
    passed = truth if correct else not truth
    if passed:
        reason = "Every promise in the reply is one Lumen's policy allows."
    elif found is not None and correct:
        reason = f"The reply promises {found[0]}, which Lumen's policy does not allow."
    else:
        reason = "The reply seems to promise more than Lumen's policy allows."
    score = round(rng.uniform(0.7, 1.0) if passed else rng.uniform(0.0, 0.3), 2)
    fields: dict[str, Any] = {"passed": passed, "score": score, "reason": reason}
    props = _properties(req.output_schema)
    if not props:
        return fill(req.output_schema, rng), correct
    return {name: fields[name] if name in fields else fill(schema, rng) for name, schema in props.items()}, correct


# ---- any other schema ----------------------------------------------------------------------------------


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema.get("properties") or {}) if _type(schema) == "object" else {}


def _type(schema: dict[str, Any]) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if t is None and "properties" in schema:
        return "object"
    return t if isinstance(t, str) else None


def fill(schema: dict[str, Any], rng: random.Random) -> Any:
    """A plausible value of a JSON Schema."""
    if schema.get("enum"):
        return rng.choice(list(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    t = _type(schema)
    if t == "object":
        return {name: fill(sub, rng) for name, sub in _properties(schema).items()}
    if t == "array":
        return [fill(schema.get("items") or {}, rng) for _ in range(rng.randint(1, 2))]
    if t == "number":
        return round(rng.uniform(0.5, 1.0), 2)
    if t == "integer":
        return rng.randint(1, 5)
    if t == "boolean":
        return rng.random() < 0.85
    if t == "null":
        return None
    return rng.choice(("Looks good.", "Clear and polite.", "Accurate and complete."))


# ---- one reply ------------------------------------------------------------------------------------------


def answer(req: SimRequest, who: str) -> SimReply:
    """The reply to one call, behaving as agent profile `who` (see the module notes)."""
    style = STYLES.get(who, DEFAULT_STYLE)
    props = _properties(req.output_schema)
    output: Any
    if req.node_id.startswith("check:"):  # a judge check of an experiment, not a node of a flow
        output = check_verdict(req, who)[0]
    elif "winner" in props:
        output = judge_verdict(req, who)[0]
    elif "reply" in props and "promises" in props:
        output = support_reply(req, who)[0]
    elif "reply" in props:
        extra = {k: fill(v, stream(req, k)) for k, v in props.items() if k != "reply"}
        output = {"reply": draft_reply(req, who), **extra}
    elif _type(req.output_schema) == "string" and isinstance(req.inputs.get("ticket"), str):
        output = draft_reply(req, who)
    else:
        output = fill(req.output_schema, stream(req, "fill"))

    rng = stream(req, "usage")
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    input_tokens = len(req.prompt) // 4 + 60
    output_tokens = len(text) // 4 + 12 + rng.randint(*style.reasoning_tokens)  # 12: the tool-call framing
    latency = style.first_token_s + output_tokens / style.tokens_per_s * rng.uniform(0.8, 1.3)
    latency = round(min(max(latency, 0.3), 2.5), 3)

    # A string answer has no JSON to break, so only structured outputs malfunction.
    broken = not isinstance(output, str) and stream(req, "malfunction").random() < style.malfunction
    if broken and "winner" in props:
        bad = {**output, "winner": f"Answer {output['winner']}"}
        return SimReply(
            output=bad,
            kind="schema_mismatch",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency,
        )
    if broken:
        return SimReply(
            kind="invalid_json",
            text=text[: len(text) // 2],
            input_tokens=input_tokens,
            output_tokens=output_tokens // 2,
            latency_s=latency,
        )
    return SimReply(output=output, input_tokens=input_tokens, output_tokens=output_tokens, latency_s=latency)


def gpt(req: SimRequest) -> SimReply:
    return answer(req, "gpt")


def mistral(req: SimRequest) -> SimReply:
    return answer(req, "mistral")


def deepseek(req: SimRequest) -> SimReply:
    return answer(req, "deepseek")


def qwen(req: SimRequest) -> SimReply:
    return answer(req, "qwen")


def llama(req: SimRequest) -> SimReply:
    return answer(req, "llama")


def tie_break(req: SimRequest) -> SimReply:
    return answer(req, "tie_break")
