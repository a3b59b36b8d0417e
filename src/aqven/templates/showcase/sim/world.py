"""The shared truth behind lumen's simulated agents.

Nothing here calls a model. The simulators (sim/agents.py), the data generator and the tests read the same
numbers, so a series run on simulators can be compared with rates that are known exactly.

Support replies (flow support_case)
-----------------------------------
A case is recognised by its ticket: `case_key_from_inputs(inputs)` returns the `ticket` input with its
whitespace collapsed. Every llm node of support_case (draft, revise) reads `ticket: $input.ticket`, so the key is
the same whichever node, variant or range runs, and no case name is needed.

`true_pass_rate(agent_id, case_key)` is the chance that one reply of that agent on that ticket makes no promise
Lumen cannot keep. Its failure rate (1 - pass rate) is the product of
  - the agent's base failure rate, calibrated so that the 1,448 refund cases of datasets/support_case_bulk.yaml
    average gpt 0.9750 and mistral 0.9720 (all 1,640 bulk cases: 0.9750 and 0.9721): mistral is 0.3 points
    worse, well inside a 2-point non-inferiority margin,
  - the ticket's difficulty, from a hash of the key: 0.3 .. 1.7, mean 1,
  - the agent's affinity with the ticket, from a hash of agent and key: 0.6 .. 1.4, mean 1, so models fail on
    different tickets, not only at different rates,
  - pressure: every kind of pressure in the ticket (urgency, a deadline, a threat, anger, a demand for a full
    refund) multiplies it by the agent's pressure factor. Pushy customers get overpromised to; gpt gives in to
    pressure more than mistral, which in turn slips more on calm tickets.
The promises Lumen cannot keep are the phrases of `UNKEEPABLE`; checks/promises.py detects the same patterns.

Judge panel (flow judge_panel)
------------------------------
The better answer is the one that states a fact of `FACTS` correctly: each fact has a regex for the questions
about it and a regex that only a correct answer matches. `panel_truth` finds the fact the question is about and
returns the answer (A or B) that matches its `correct` regex while the other does not. A question about no known
fact falls back to a hash of the question and both answers. Every case of datasets/judge_panel_cases.yaml has
`expected_output.winner == panel_truth(...)`, which the generator and the tests assert.

A judge picks the true winner with `judge_accuracy(agent_id, truth)`; llama has a position bias (it is right
more often when the better answer comes first), so its accuracy differs by the side of the truth.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal, NamedTuple

Winner = Literal["A", "B"]


def unit(*parts: str) -> float:
    """A uniform number in [0, 1) from a hash of `parts`: the same on every machine and in every run."""
    digest = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# ---- support replies: who overpromises, how often -------------------------------------------------------


class ReplyProfile(NamedTuple):
    base_fail: float  # failure rate on a calm ticket of average difficulty and affinity
    pressure_factor: float  # multiplies the failure rate once per kind of pressure in the ticket


REPLY_PROFILES: dict[str, ReplyProfile] = {
    "gpt": ReplyProfile(base_fail=0.011945, pressure_factor=2.2),
    "mistral": ReplyProfile(base_fail=0.019437, pressure_factor=1.6),
    "deepseek": ReplyProfile(base_fail=0.022, pressure_factor=1.9),
    "qwen": ReplyProfile(base_fail=0.026, pressure_factor=1.9),
    "llama": ReplyProfile(base_fail=0.040, pressure_factor=2.0),
    "tie_break": ReplyProfile(base_fail=0.008, pressure_factor=1.7),
}
DEFAULT_REPLY_PROFILE = ReplyProfile(base_fail=0.03, pressure_factor=2.0)
MAX_FAIL = 0.6
MAX_PRESSURE = 4

PRESSURE_CUES: tuple[tuple[str, str], ...] = (
    ("urgency", r"\b(urgent(ly)?|asap|immediately|right now|right away)\b"),
    (
        "deadline",
        r"\b(today|tonight|by tomorrow|this weekend|by (monday|tuesday|wednesday|thursday|friday|"
        r"saturday|sunday))\b",
    ),
    ("threat", r"\b(chargeback|dispute|lawyer|solicitor|consumer protection|one-star|1-star)\b"),
    ("anger", r"\b(unacceptable|furious|ridiculous|fed up|disgusted|worst)\b"),
    ("full_refund", r"\bfull refund\b"),
)


def case_key_from_inputs(inputs: dict[str, Any]) -> str:
    """The case key of a node's inputs: the `ticket` input, whitespace collapsed.

    Without a ticket (another flow), the canonical JSON of all inputs is the key.
    """
    ticket = inputs.get("ticket")
    if isinstance(ticket, str):
        return " ".join(ticket.split())
    return json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=str)


def pressure_kinds(text: str) -> list[str]:
    """The kinds of pressure a ticket puts on the agent."""
    return [kind for kind, pattern in PRESSURE_CUES if re.search(pattern, text, re.IGNORECASE)]


@functools.lru_cache(maxsize=4096)
def pressure(text: str) -> int:
    return min(len(pressure_kinds(text)), MAX_PRESSURE)


def difficulty(case_key: str) -> float:
    """How hard the ticket is for every agent: 0.3 .. 1.7, mean 1."""
    return 0.3 + 1.4 * unit("difficulty", case_key)


def affinity(agent_id: str, case_key: str) -> float:
    """How this agent in particular copes with the ticket: 0.6 .. 1.4, mean 1."""
    return 0.6 + 0.8 * unit("affinity", agent_id, case_key)


@functools.lru_cache(maxsize=4096)
def true_fail_rate(agent_id: str, case_key: str) -> float:
    profile = REPLY_PROFILES.get(agent_id, DEFAULT_REPLY_PROFILE)
    rate = (
        profile.base_fail
        * difficulty(case_key)
        * affinity(agent_id, case_key)
        * profile.pressure_factor ** pressure(case_key)
    )
    return min(rate, MAX_FAIL)


def true_pass_rate(agent_id: str, case_key: str) -> float:
    """The chance that one reply of `agent_id` on this case keeps every promise (see the module notes)."""
    return 1.0 - true_fail_rate(agent_id, case_key)


# ---- support replies: what Lumen can promise -----------------------------------------------------------

TIERS = ("basic", "plus", "gold")
RETURN_WINDOW_DAYS = {"basic": 30, "plus": 30, "gold": 60}
CREDIT_CAP_PERCENT = {"basic": 10, "plus": 15, "gold": 25}
REPLACEMENT_SHIPPING = {"basic": "3-5 business days", "plus": "3-5 business days", "gold": "2 business days"}
REFUND_TIMING = "within 5-10 business days of the return reaching our warehouse"


def policy(tier: str, order_total: str, days_since_delivery: int) -> dict[str, Any]:
    """What support may promise on an order (flows/support_case/policy.py computes the same)."""
    tier = tier if tier in RETURN_WINDOW_DAYS else "basic"
    window = RETURN_WINDOW_DAYS[tier]
    percent = CREDIT_CAP_PERCENT[tier]
    credit = (Decimal(order_total) * percent / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return {
        "return_window_days": window,
        "within_return_window": days_since_delivery <= window,
        "refund_timing": REFUND_TIMING,
        "replacement_shipping": REPLACEMENT_SHIPPING[tier],
        "max_credit_percent": percent,
        "max_credit": str(credit),
    }


# The promises Lumen cannot keep. checks/promises.py holds the same list; the tests keep them equal.
UNKEEPABLE: tuple[tuple[str, str], ...] = (
    ("a guarantee", r"\bguarantee"),
    (
        "same-day or next-day timing",
        r"\b(today|tonight|tomorrow|overnight|within (24|48) hours|within (the|an|one) hour)\b",
    ),
    ("a promise that it never happens again", r"\bnever happen again\b"),
    ("a credit above the policy cap", r"(\b100 ?%|\bdouble|\bfull[- ]price) (store )?credit\b"),
    ("a free upgrade", r"\bfree upgrade\b|\bupgrade you\b[^.]*\bfree\b"),
)

# What an agent says when it overpromises. Every sentence matches one pattern of UNKEEPABLE.
OVERPROMISES: dict[str, tuple[str, ...]] = {
    "refund": (
        "I can guarantee a full refund of {total} to your card today.",
        "Your full refund of {total} will be back in your account within 24 hours.",
        "You'll see the whole {total} refunded tomorrow, and there's no need to send anything back.",
    ),
    "replacement": (
        "We will replace it for free within 24 hours.",
        "A brand-new {product} will be at your door tomorrow morning.",
        "I guarantee the replacement will work perfectly.",
    ),
    "credit": (
        "I'm adding a 100% store credit of {total} to your account right away.",
        "I've put a double credit on your account for the trouble.",
    ),
    "any": (
        "I promise this will never happen again.",
        "As a thank-you, I'll give you a free upgrade to the {upgrade}.",
        "One of our engineers will call you within the hour.",
    ),
}


def unkeepable_in(text: str) -> str | None:
    """The label of the first unkeepable promise in `text`, or None."""
    for label, pattern in UNKEEPABLE:
        if re.search(pattern, text, re.IGNORECASE):
            return label
    return None


# ---- support replies: what a ticket is about -----------------------------------------------------------

PRODUCTS: dict[str, str] = {  # name -> category; longer names first, so "Lumen Strip Pro" wins over "Lumen Strip"
    "Lumen Strip Outdoor": "strip",
    "Lumen Strip Pro": "strip",
    "Lumen Strip": "strip",
    "Lumen Filament Bulb": "bulb",
    "Lumen Bulb": "bulb",
    "Lumen Hub Mini": "hub",
    "Lumen Hub": "hub",
    "Lumen Motion Sensor": "accessory",
    "Lumen Dimmer Switch": "accessory",
}
UPGRADES = {
    "strip": "Lumen Strip Pro",
    "bulb": "Lumen Filament Bulb",
    "hub": "Lumen Hub Pro",
    "accessory": "Lumen Starter Kit",
}

REQUEST_CUES: tuple[tuple[str, str], ...] = (
    ("refund", r"\b(refund|money back|reimburse)"),
    ("replacement", r"\b(replace|replacement|new one|swap|exchange|send (me )?the (right|correct|missing))"),
    ("credit", r"\b(credit|voucher|discount|compensation)"),
)


@functools.lru_cache(maxsize=4096)
def product_in(text: str) -> str | None:
    """The product a ticket is about, with its size or pack when given ("Lumen Strip Pro 5m")."""
    for name in PRODUCTS:
        at = text.lower().find(name.lower())
        if at >= 0:
            size = re.match(r" (\d+ ?m|E27|E14|GU10|\d-pack)\b", text[at + len(name) :])
            return name + (size.group(0) if size else "")
    return None


def category_of(product: str | None) -> str:
    for name, category in PRODUCTS.items():
        if product and product.startswith(name):
            return category
    return "accessory"


@functools.lru_cache(maxsize=4096)
def request_in(text: str) -> str:
    """What the customer asks for: refund, replacement, credit or help (the first one the ticket names)."""
    found = [(m.start(), kind) for kind, pattern in REQUEST_CUES if (m := re.search(pattern, text, re.IGNORECASE))]
    return min(found)[1] if found else "help"


@functools.lru_cache(maxsize=4096)
def customer_name(text: str) -> str | None:
    """The name a ticket is signed with ("... — Dana"), if any."""
    m = re.search(r"(?:—|--|-)\s*([A-Z][a-z]+)\.?\s*$", text.strip())
    return m.group(1) if m else None


# ---- judge panel ----------------------------------------------------------------------------------------


class Fact(NamedTuple):
    topic: str
    question: str  # regex: a question about this fact
    correct: str  # regex: only an answer that states the fact correctly matches


FACTS: tuple[Fact, ...] = (
    Fact("hub_warranty", r"warranty.*\bhub\b|\bhub\b.*warranty", r"\b(two|2)[- ]years?\b"),
    Fact(
        "strip_chaining",
        r"(chain|extend|extension|connect).*strip|strip.*(chain|extend|extension)",
        r"\b(three|3) extensions\b",
    ),
    Fact("bulb_without_hub", r"bulb.*without.*hub|bulb.*\bno hub\b", r"\bbluetooth\b"),
    Fact("return_window", r"\breturn\b.*\b(long|days|window)\b|\b(long|days|window)\b.*\breturn", r"\b30 days\b"),
    Fact(
        "refund_timing",
        r"\brefund\b.*\b(when|long|arrive|take)\b|\b(when|long)\b.*\brefund\b",
        r"\b5-10 business days\b",
    ),
    Fact("hub_reset", r"reset.*\bhub\b|\bhub\b.*reset", r"\b10 seconds\b"),
    Fact("strip_cutting", r"\bcut\b.*strip|strip.*\bcut\b", r"\bscissors? (mark|line|icon)s?\b"),
    Fact("hub_wifi_band", r"wi-?fi.*\b(band|ghz|network)\b|\bhub\b.*\b(5 ?ghz|2\.4)", r"\b2\.4 ?ghz\b"),
    Fact("gold_credit_cap", r"credit.*gold|gold.*credit", r"\b25 ?%"),
    Fact("wall_dimmer", r"dimmer", r"\bfull power\b"),
    Fact("strip_outdoor", r"outdoor|outside|waterproof|rain", r"\bip65\b"),
    Fact("hub_capacity", r"how many (devices|lights|bulbs)|\bdevices?\b.*\bhub\b.*\b(limit|max)", r"\b50 devices\b"),
    Fact("firmware_updates", r"firmware|update", r"\bautomatically\b"),
    Fact("standard_shipping", r"shipping|deliver", r"\b3-5 business days\b"),
    Fact("price_match", r"price[- ]?match", r"\b14 days\b"),
    Fact("voice_assistants", r"alexa|google|voice", r"\bboth\b"),
    Fact("color_temperature", r"colou?r temperature|warm|kelvin", r"\b2200\b"),
    Fact("strip_power", r"\busb\b|power (the|a|my) .*strip", r"\b24 ?v\b"),
    Fact("warranty_transfer", r"transfer", r"\bproof of purchase\b"),
    Fact(
        "gold_benefits", r"\bgold\b.*\b(include|get|benefits?|perks?)\b|\bbenefits?\b.*\bgold\b", r"\b60-day returns?\b"
    ),
)


@functools.lru_cache(maxsize=4096)
def panel_truth(question: str, answer_a: str, answer_b: str) -> Winner:
    """The better answer: the one that states the question's fact correctly (see the module notes)."""
    facts = [f for f in FACTS if re.search(f.question, question, re.IGNORECASE)]
    for fact in facts + [f for f in FACTS if f not in facts]:
        a = re.search(fact.correct, answer_a, re.IGNORECASE) is not None
        b = re.search(fact.correct, answer_b, re.IGNORECASE) is not None
        if a != b:
            return "A" if a else "B"
    return "A" if unit("panel", question, answer_a, answer_b) < 0.5 else "B"


# The chance that a judge picks the true winner, when the truth is A and when it is B.
JUDGE_ACCURACY: dict[str, tuple[float, float]] = {
    "deepseek": (0.85, 0.85),
    "qwen": (0.80, 0.80),
    "llama": (0.80, 0.60),  # position bias: it leans to answer A
    "tie_break": (0.90, 0.90),
    "gpt": (0.82, 0.82),
    "mistral": (0.78, 0.78),
}
DEFAULT_JUDGE_ACCURACY = (0.75, 0.75)


def judge_accuracy(agent_id: str, truth: Winner) -> float:
    a, b = JUDGE_ACCURACY.get(agent_id, DEFAULT_JUDGE_ACCURACY)
    return a if truth == "A" else b


def declared_accuracy(agent_id: str) -> float:
    """A judge's accuracy on a dataset where A and B win equally often (judge_panel_cases.yaml)."""
    a, b = JUDGE_ACCURACY.get(agent_id, DEFAULT_JUDGE_ACCURACY)
    return (a + b) / 2
