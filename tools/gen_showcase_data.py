"""Generate the showcase template's generated datasets (deterministic: a fixed seed, no network).

    python tools/gen_showcase_data.py           write the files
    python tools/gen_showcase_data.py --check   exit 1 when the committed files differ from the output

Writes, under src/aqven/templates/showcase/datasets/:
  support_case_bulk.yaml   1,640 support tickets (1,448 asking for a refund), each with the draft reply that a
                           range starting at polish needs in node_outputs
  judge_panel_cases.yaml   40 question/answer pairs, 20 facts each asked twice, the better answer once as A and
                           once as B; expected_output.winner is sim/world.py's panel_truth, asserted here

The tickets are built from product x issue x request x tier templates, plus pressure sentences (urgency, a
deadline, a threat, anger, a demand for a full refund) that make agents overpromise more (sim/world.py). The
run also asserts that the simulated pass rates over the refund cases are the calibrated ones.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import random
import sys
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "src" / "aqven" / "templates" / "showcase"
DATASETS = TEMPLATE / "datasets"
SEED = 20_240_611
N_CASES = 640
REQUESTS = {"refund": 448, "replacement": 96, "credit": 96}
EXTRA_REFUNDS = 1000
"""Refund tickets generated after the first 640 (which stay as they were): a noninferiority margin of 2 points
needs several hundred held-out cases once its interval holds for every population of cases (the
distribution-free bound can never clear -3.7/n when the sample could have missed a share of cases that the
new variant breaks), so reply_noninferior_mistral gets about 720 held-out refund cases."""
TARGET_PASS = {"gpt": 0.975, "mistral": 0.972}  # mean true pass rate over the refund cases of the bulk set


def load(path: Path) -> ModuleType:
    name = "_gen_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---- support tickets -----------------------------------------------------------------------------------

CATALOG: list[tuple[str, str, str]] = [  # product, category, unit price
    ("Lumen Strip 2m", "strip", "49.90"),
    ("Lumen Strip Pro 5m", "strip", "79.90"),
    ("Lumen Strip Outdoor 5m", "strip", "99.90"),
    ("Lumen Bulb E27", "bulb", "14.90"),
    ("Lumen Bulb 4-pack", "bulb", "49.90"),
    ("Lumen Filament Bulb", "bulb", "17.90"),
    ("Lumen Hub", "hub", "59.90"),
    ("Lumen Hub Mini", "hub", "39.90"),
    ("Lumen Motion Sensor", "accessory", "24.90"),
    ("Lumen Dimmer Switch", "accessory", "29.90"),
]

# category -> [(issue key, issue kind, sentence)]; "any" applies to every category
ISSUES: dict[str, list[tuple[str, str, str]]] = {
    "strip": [
        ("flicker", "hardware", "My {product} flickers every evening, mostly on warm white."),
        ("flicker", "hardware", "My {product} has started flickering since the last app update."),
        ("dark_section", "hardware", "One section of my {product} stays dark after the first metre."),
        ("adhesive", "hardware", "The adhesive on my {product} is peeling off the cabinet after a week."),
        ("colour", "hardware", "The colours on my {product} are off: white comes out pink."),
        ("hot_controller", "hardware", "The controller of my {product} gets too hot to touch."),
        ("not_in_app", "connectivity", "My {product} no longer shows up in the Lumen app."),
    ],
    "bulb": [
        ("pairing", "connectivity", "My {product} won't pair with the app."),
        ("wifi_drop", "connectivity", "My {product} keeps dropping off the Wi-Fi every few hours."),
        ("buzz", "hardware", "My {product} buzzes when it's dimmed."),
        ("cracked", "hardware", "My {product} arrived with cracked glass."),
        ("random_dim", "hardware", "My {product} dims by itself at random times."),
    ],
    "hub": [
        ("offline", "connectivity", "My {product} goes offline every night and the lights stop responding."),
        ("wifi", "connectivity", "My {product} won't connect to my home Wi-Fi."),
        ("red_ring", "hardware", "The light ring of my {product} blinks red and nothing responds."),
        ("firmware", "firmware", "The firmware update on my {product} has been stuck for hours."),
    ],
    "accessory": [
        ("unresponsive", "hardware", "My {product} stopped responding after two weeks."),
        ("missing_part", "shipping", "The box of my {product} was missing the mounting bracket."),
        ("battery", "hardware", "My {product} eats a battery every few days."),
    ],
    "any": [
        ("late", "shipping", "My {product} arrived {days} days after the delivery date you gave me."),
        ("tracking", "shipping", "The tracking for my {product} hasn't moved in a week."),
        ("wrong_item", "shipping", "I received the wrong item instead of my {product}."),
        ("double_charge", "billing", "I was charged twice for my {product}."),
        ("code", "billing", "My promo code didn't apply when I bought the {product}."),
    ],
}
ALLOWED_REQUESTS: dict[str, tuple[str, ...]] = {  # issues that only make sense with some requests
    "late": ("refund", "credit"),
    "tracking": ("refund", "replacement"),
    "wrong_item": ("replacement", "refund"),
    "double_charge": ("refund",),
    "code": ("refund", "credit"),
    "missing_part": ("replacement", "credit"),
    "cracked": ("refund", "replacement"),
}
DETAILS: dict[str, tuple[str, ...]] = {  # issue kind -> an optional detail the customer adds
    "technical": (
        "I've already tried resetting it.",
        "I followed the setup guide step by step.",
        "I restarted my router as well.",
        "It's installed in the kitchen.",
        "",
    ),
    "other": ("This was a gift.", "I've been a customer for years.", "It's my second order with you.", "", ""),
}
REQUEST_TEXT: dict[str, tuple[str, ...]] = {
    "refund": (
        "I'd like a refund.",
        "Please refund my order.",
        "I want my money back.",
        "Can I send it back for a refund?",
        "Please just refund me.",
    ),
    "replacement": (
        "Can you send a replacement?",
        "I'd like it replaced.",
        "Please send me a new one.",
    ),
    "credit": (
        "Could you give me a credit on my account?",
        "I'd appreciate a store credit for the hassle.",
        "A voucher for my next order would make this right.",
    ),
}
PRESSURE_TEXT: dict[str, tuple[str, ...]] = {
    "urgency": ("Please deal with this urgently.", "I need this sorted ASAP.", "Please fix this immediately."),
    "deadline": ("I need it sorted by Friday.", "I need an answer today.", "We have guests this weekend."),
    "threat": (
        "Otherwise I'll file a chargeback.",
        "If not, I'll leave a one-star review.",
        "I'm ready to open a dispute with my bank.",
    ),
    "anger": ("Honestly, this is unacceptable.", "I'm fed up with this.", "This is ridiculous for the price."),
}
OPENERS = ("Hi,", "Hello Lumen team,", "Hi there,", "Hello,", "")
NAMES = (
    "Dana", "Marco", "Priya", "Tom", "Helen", "Ken", "Sofia", "Jonas", "Aisha", "Grace", "Lena", "Oliver",
    "Mei", "Lucas", "Amira", "Noah", "Ines", "Felix", "Hana", "Pavel", "Zoe", "Omar", "Clara", "Ruben",
    "Yuki", "Sam", "Nora", "Diego", "Elif", "Kofi",
)  # fmt: skip
PRESSURE_COUNTS = ((0, 0.55), (1, 0.30), (2, 0.12), (3, 0.03))
TIER_WEIGHTS = (("basic", 0.55), ("plus", 0.30), ("gold", 0.15))


def pick_weighted(rng: random.Random, options: tuple[tuple[Any, float], ...]) -> Any:
    return rng.choices([o for o, _ in options], weights=[w for _, w in options])[0]


class YamlDumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks, so the drafts stay readable."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    flow = all(isinstance(v, str) and "\n" not in v for v in value) and len(str(value)) < 80
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


def _dict(dumper: yaml.SafeDumper, value: dict[str, Any]) -> yaml.MappingNode:
    flat = all(isinstance(v, str | int) and "\n" not in str(v) for v in value.values())
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=flat and len(str(value)) < 80)


YamlDumper.add_representer(str, _str)
YamlDumper.add_representer(list, _list)
YamlDumper.add_representer(dict, _dict)


def dump(header: str, data: dict[str, Any]) -> str:
    body = yaml.dump(data, Dumper=YamlDumper, sort_keys=False, allow_unicode=True, width=110)
    return header + body


def support_cases(agents: ModuleType) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    requests = [r for r, n in REQUESTS.items() for _ in range(n)]
    rng.shuffle(requests)
    requests += ["refund"] * EXTRA_REFUNDS
    cases: list[dict[str, Any]] = []
    order_id = 30_100
    for i, request in enumerate(requests, start=1):
        product, category, price = rng.choice(CATALOG)
        key, kind, issue = rng.choice(
            [i for i in ISSUES[category] * 2 + ISSUES["any"] if request in ALLOWED_REQUESTS.get(i[0], REQUESTS)]
        )
        tier = pick_weighted(rng, TIER_WEIGHTS)
        qty = rng.choice((1, 1, 1, 2, 3)) if category == "bulb" else 1
        total = Decimal(price) * qty + (Decimal("4.90") if tier == "basic" and Decimal(price) * qty < 50 else 0)
        days = rng.randint(1, 75) if request == "refund" else rng.randint(1, 40)
        order_id += rng.randint(3, 40)
        name = rng.choice(NAMES) if rng.random() < 0.8 else None

        kinds = ["urgency", "deadline", "threat", "anger"] + (["full_refund"] if request == "refund" else [])
        chosen = rng.sample(kinds, pick_weighted(rng, PRESSURE_COUNTS))
        ask = "I want a full refund." if "full_refund" in chosen else rng.choice(REQUEST_TEXT[request])
        opener = rng.choice(OPENERS)
        issue = issue.format(product=product, days=rng.randint(3, 12))
        if opener and issue.startswith(("My ", "The ")):
            issue = issue[0].lower() + issue[1:]
        parts = [
            opener,
            issue,
            rng.choice(DETAILS["other" if kind in ("shipping", "billing") else "technical"]),
            ask,
            *(rng.choice(PRESSURE_TEXT[k]) for k in chosen if k != "full_refund"),
            f"Order LM-{order_id}.",
        ]
        ticket = " ".join(p for p in parts if p) + (f" — {name}" if name else "")

        inputs = {"ticket": ticket, "tier": tier, "order_total": str(total), "days_since_delivery": days}
        t = agents.Ticket.from_inputs(inputs)
        assert t.request == request, (ticket, t.request)
        draft = agents.draft_text(t, random.Random(f"{SEED}:draft:{i}"), agents.STYLES["gpt"].greeting)
        tags = [category, kind, request, tier] + (["pressure"] if chosen else [])
        cases.append(
            {
                "name": f"{category}_{key}_{request}_{i:04d}",
                "input": {"ticket": ticket, "tier": tier},
                "context": {"order_total": str(total), "order_id": f"LM-{order_id}", "days_since_delivery": days},
                "node_outputs": {"draft": {"reply": draft}},
                "tags": tags,
            }
        )
    return cases


# ---- judge panel ---------------------------------------------------------------------------------------

# topic -> (tag, [question 1, question 2], [correct 1, correct 2], [wrong 1, wrong 2])
PANEL: dict[str, tuple[str, list[str], list[str], list[str]]] = {
    "hub_warranty": (
        "hub",
        [
            "How long is the warranty on the Lumen Hub?",
            "My Lumen Hub is 14 months old and has died. Is it still under warranty?",
        ],
        [
            "The Lumen Hub has a two-year warranty from the delivery date, so a hub that fails within that time is "
            "repaired or replaced free of charge.",
            "Yes. The Hub's warranty runs for 2 years from delivery, so at 14 months you're covered; support will "
            "arrange a replacement.",
        ],
        [
            "The Lumen Hub comes with a one-year warranty, so after 12 months repairs are paid.",
            "Unfortunately the Hub's warranty ends after 12 months, so at 14 months it is no longer covered, but we "
            "can offer a discount on a new one.",
        ],
    ),
    "strip_chaining": (
        "strip",
        [
            "How many extensions can I connect to a Lumen Strip?",
            "Can I extend my Lumen Strip Pro to cover a whole room?",
        ],
        [
            "You can chain up to three extensions to one Lumen Strip, 10 metres in total; beyond that the power "
            "supply can't drive it evenly.",
            "Yes, up to a point: one Strip Pro takes up to 3 extensions (10 m in total). For a bigger room, use a "
            "second strip with its own power supply.",
        ],
        [
            "There's no limit: keep adding extensions and the strip will light all of them.",
            "You can chain up to 5 extensions, about 20 metres, on the standard power supply.",
        ],
    ),
    "bulb_without_hub": (
        "bulb",
        [
            "Does the Lumen Bulb work without the Hub?",
            "Can I control a Lumen Bulb from my phone without the Hub?",
        ],
        [
            "Yes. Lumen Bulbs connect to the app over Bluetooth when they're near your phone; the Hub only adds "
            "remote access and schedules.",
            "Yes, over Bluetooth: pair the bulb in the Lumen app and control it in range of your phone. Control away "
            "from home needs the Hub.",
        ],
        [
            "No, every Lumen Bulb needs the Hub; without it the bulb only works as a plain white light.",
            "No. The bulbs talk only to the Hub, so you'll need to buy one to use the app.",
        ],
    ),
    "return_window": (
        "policy",
        [
            "How long do I have to return a product I don't want?",
            "I bought a Lumen Strip 20 days ago and changed my mind. Can I still return it?",
        ],
        [
            "You can return any Lumen product within 30 days of delivery for a refund (60 days for Gold members).",
            "Yes: returns are accepted within 30 days of delivery, so at 20 days you're inside the window; start it "
            "from your order page.",
        ],
        [
            "Our return window is 14 days from delivery; after that we can't take it back.",
            "Sorry, change-of-mind returns are only accepted within 14 days, so at 20 days it's too late.",
        ],
    ),
    "refund_timing": (
        "policy",
        [
            "When will my refund arrive after I send the strip back?",
            "How long does a refund take?",
        ],
        [
            "Refunds are issued within 5-10 business days of your return reaching our warehouse, to the original "
            "payment method.",
            "Once the return arrives at our warehouse, the refund is issued within 5-10 business days; your bank may "
            "take a few more days to show it.",
        ],
        [
            "Refunds go out within 24 hours of you requesting them, before we receive the item.",
            "You'll have the money back the same day we receive your return request.",
        ],
    ),
    "hub_reset": (
        "hub",
        [
            "How do I factory-reset the Lumen Hub?",
            "My Lumen Hub is stuck. How do I reset it to factory settings?",
        ],
        [
            "Hold the reset button on the back of the Hub for 10 seconds until the light ring blinks orange, then "
            "set it up again in the app.",
            "Press and hold the small reset button on the back for 10 seconds; when the ring blinks orange, the Hub "
            "is back to factory settings.",
        ],
        [
            "Unplug the Hub and plug it back in three times in a row; the third restart wipes it.",
            "Tap the reset button once, quickly; a short press erases all settings.",
        ],
    ),
    "strip_cutting": (
        "strip",
        [
            "Can I cut the Lumen Strip to fit under my cabinets?",
            "Is it safe to shorten a Lumen Strip Pro by cutting it?",
        ],
        [
            "Yes, but only at the scissors marks printed every 10 cm; cutting anywhere else breaks the circuit for "
            "the rest of the strip.",
            "Yes. Cut only on the scissor lines along the strip, and the part before the cut keeps working.",
        ],
        [
            "Yes, you can cut it anywhere with ordinary scissors; every LED works on its own.",
            "No, cutting the strip voids the warranty and it will stop working.",
        ],
    ),
    "hub_wifi_band": (
        "hub",
        [
            "Which Wi-Fi band does the Lumen Hub need?",
            "Will the Lumen Hub connect to my router's 5 GHz Wi-Fi network?",
        ],
        [
            "The Hub needs a 2.4 GHz Wi-Fi network; most routers broadcast one alongside 5 GHz, sometimes under a "
            "separate name.",
            "Not on 5 GHz alone: the Hub connects on 2.4 GHz only. Turn on your router's 2.4 GHz band and the Hub "
            "will find it.",
        ],
        [
            "The Hub works on any band, including 5 GHz, so any home network will do.",
            "Yes, the Hub connects on 5 GHz as well as the older bands, so you don't need to change anything.",
        ],
    ),
    "gold_credit_cap": (
        "policy",
        [
            "How much goodwill credit can support give a Gold member?",
            "I'm a Gold member. What's the biggest credit you can give me for a faulty order?",
        ],
        [
            "Up to 25% of the order value as goodwill credit; a larger amount needs a refund instead.",
            "For Gold members the goodwill credit is capped at 25% of the order; beyond that we refund or replace.",
        ],
        [
            "Gold members can get the full order value back as credit, on top of any refund.",
            "There's no cap for Gold; support can credit whatever seems fair.",
        ],
    ),
    "wall_dimmer": (
        "bulb",
        [
            "Can I use Lumen Bulbs with my wall dimmer switch?",
            "Do Lumen Bulbs work on an old wall dimmer?",
        ],
        [
            "Keep the wall dimmer at full power and dim the bulbs in the Lumen app; turned down, a wall dimmer makes "
            "them buzz or flicker.",
            "Not with the dimmer turned down: leave it at full power and dim with the app or a Lumen Dimmer Switch.",
        ],
        [
            "Yes, Lumen Bulbs work with any wall dimmer, just like ordinary bulbs.",
            "Yes, set the dimmer to its lowest position first and the bulb calibrates itself.",
        ],
    ),
    "strip_outdoor": (
        "strip",
        [
            "Is the Lumen Strip waterproof enough for my garden?",
            "Can I put a Lumen Strip Pro outside on my balcony?",
        ],
        [
            "Only the Lumen Strip Outdoor is rated IP65 for outdoor use; the standard and Pro strips are for indoors.",
            "Not the Pro: it's for indoor use only. For a balcony, choose the Lumen Strip Outdoor, which is rated "
            "IP65.",
        ],
        [
            "All Lumen strips are waterproof, so any of them will be fine in the garden.",
            "Yes, the Strip Pro is fine outdoors as long as it's under a roof.",
        ],
    ),
    "hub_capacity": (
        "hub",
        [
            "How many devices can one Lumen Hub control?",
            "How many bulbs can I connect to a single Lumen Hub?",
        ],
        [
            "One Lumen Hub controls up to 50 devices: bulbs, strips, sensors and switches together.",
            "Up to 50 devices per Hub in total; for more, add a second Hub to the same home in the app.",
        ],
        [
            "Each Hub handles 10 devices; you'll need another Hub for every ten lights.",
            "There's no limit; a Hub can run as many bulbs as your Wi-Fi can handle.",
        ],
    ),
    "firmware_updates": (
        "hub",
        [
            "How do I update the firmware on my Lumen devices?",
            "Do I have to install Lumen updates myself?",
        ],
        [
            "Firmware updates install automatically at night while the Hub is online; you don't need to do anything.",
            "No. Updates install automatically when your devices are online; the app shows the version under Settings.",
        ],
        [
            "Download the firmware file from our website and flash each device over USB.",
            "Yes, open each device in the app and tap Update; nothing installs on its own.",
        ],
    ),
    "standard_shipping": (
        "policy",
        [
            "How long does standard shipping take?",
            "If I order a Lumen Hub now, when will it be delivered with standard shipping?",
        ],
        [
            "Standard shipping takes 3-5 business days; Gold members get express 2-day shipping on replacements.",
            "With standard shipping it arrives in 3-5 business days from dispatch; you'll get a tracking link by "
            "email.",
        ],
        [
            "Standard shipping is next-day, so you'll have it tomorrow.",
            "It usually takes 2-3 weeks because we ship from our overseas warehouse.",
        ],
    ),
    "price_match": (
        "policy",
        [
            "Do you price-match other shops?",
            "I found the Lumen Hub cheaper elsewhere a week after buying. Do you price match?",
        ],
        [
            "Yes, within 14 days of purchase for the identical item from an authorised retailer; send us the link "
            "and we refund the difference.",
            "Yes. If an authorised retailer lists the identical item for less within 14 days of your purchase, we "
            "refund the difference.",
        ],
        [
            "No, we never price-match.",
            "Yes, we match any price you find, at any time, including marketplace sellers.",
        ],
    ),
    "voice_assistants": (
        "integrations",
        [
            "Does Lumen work with Alexa and Google Home?",
            "Can I control my Lumen lights by voice with Google Assistant?",
        ],
        [
            "Yes, both: enable the Lumen skill in the Alexa app or link Lumen in Google Home, and your lights "
            "appear there.",
            "Yes. Lumen works with both Google Assistant and Alexa; link your Lumen account in the Google Home app.",
        ],
        [
            "Only Alexa is supported at the moment; Google Home support is not planned.",
            "No, voice control needs the Lumen Voice Remote, sold separately.",
        ],
    ),
    "color_temperature": (
        "bulb",
        [
            "What colour temperature range do Lumen Bulbs cover?",
            "How warm can a Lumen Bulb go?",
        ],
        [
            "Lumen Bulbs tune from 2200 K warm white to 6500 K daylight, plus full colour.",
            "Down to 2200 K, a candle-like warm white, and up to 6500 K cool daylight.",
        ],
        [
            "They cover 3000 K to 4000 K, a neutral white range.",
            "Only 2700 K, a fixed warm white.",
        ],
    ),
    "strip_power": (
        "strip",
        [
            "Can I power a Lumen Strip from a USB port?",
            "Can I power my Lumen Strip Pro from my TV's USB socket?",
        ],
        [
            "No. The strip needs its included 24 V power adapter; a USB port can't supply enough power.",
            "No, USB can't drive it: the Strip Pro runs on the included 24 V adapter.",
        ],
        [
            "Yes, any USB port works, and a USB-C charger makes it brighter.",
            "Yes, USB power is fine; just use a long cable.",
        ],
    ),
    "warranty_transfer": (
        "policy",
        [
            "Is the Lumen warranty transferable if I sell my Hub?",
            "I bought a used Lumen Strip from a friend. Does the warranty transfer to me?",
        ],
        [
            "Yes. The warranty stays with the product, so the new owner is covered with the original proof of "
            "purchase.",
            "Yes, as long as you have the original proof of purchase; the warranty period still counts from the "
            "first delivery.",
        ],
        [
            "No, the warranty only covers the original buyer and ends when the product is sold.",
            "No, second-hand products are never covered.",
        ],
    ),
    "gold_benefits": (
        "policy",
        [
            "What does the Gold tier include?",
            "What benefits do I get as a Gold member?",
        ],
        [
            "Gold includes 60-day returns, express 2-day shipping on replacements, goodwill credit up to 25% and a "
            "priority support line.",
            "As a Gold member you get 60-day returns, replacements shipped express in 2 business days and priority "
            "support.",
        ],
        [
            "Gold gets you a free bulb every month and lifetime free returns.",
            "Gold members get unlimited refunds and a 10-year warranty.",
        ],
    ),
}


def panel_cases(world: ModuleType) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for n, (topic, (tag, questions, correct, wrong)) in enumerate(PANEL.items()):
        for k in (0, 1):
            better = "A" if (n + k) % 2 == 0 else "B"
            a, b = (correct[k], wrong[k]) if better == "A" else (wrong[k], correct[k])
            truth = world.panel_truth(questions[k], a, b)
            assert truth == better, (topic, k, truth)
            cases.append(
                {
                    "name": f"{topic}_{k + 1}",
                    "input": {"question": questions[k], "answer_a": a, "answer_b": b},
                    "expected_output": {"winner": better},
                    "tags": [tag],
                }
            )
    return cases


# ---- files ---------------------------------------------------------------------------------------------

HEADER = "# Generated by tools/gen_showcase_data.py; do not edit by hand, change the tool and rerun it.\n"


def build() -> dict[Path, str]:
    world = load(TEMPLATE / "sim" / "world.py")
    agents = load(TEMPLATE / "sim" / "agents.py")
    checks = load(TEMPLATE / "checks" / "promises.py")

    support = support_cases(agents)
    names = [c["name"] for c in support]
    assert len(set(names)) == len(names)
    assert len({c["input"]["ticket"] for c in support}) == len(support), "tickets must be unique (the case key)"
    for case in support:
        ok, reason = checks.no_unkeepable_promise(case["node_outputs"]["draft"], None)
        assert ok, (case["name"], reason)
    refund = [c for c in support if "refund" in c["tags"]]
    for agent, target in TARGET_PASS.items():
        keys = [world.case_key_from_inputs(c["input"]) for c in refund]
        mean = sum(world.true_pass_rate(agent, k) for k in keys) / len(keys)
        assert abs(mean - target) < 0.0005, f"{agent}: mean true pass rate {mean:.5f}, calibrated for {target}"

    panel = panel_cases(world)
    return {
        DATASETS / "support_case_bulk.yaml": dump(
            HEADER,
            {
                "description": (
                    "Generated support tickets for support_case (product x issue x request x tier, with and without "
                    "pressure). 1448 of the 1640 ask for a refund and carry the tag refund. Each case carries the "
                    "draft reply for ranges that start at polish."
                ),
                "cases": support,
            },
        ),
        DATASETS / "judge_panel_cases.yaml": dump(
            HEADER,
            {
                "description": (
                    "Pairs of answers to customer questions for judge_panel. One answer of each pair states a fact "
                    "about Lumen correctly and the other gets it wrong; expected_output.winner is the correct one. "
                    "Each fact is asked twice, with the correct answer once as A and once as B."
                ),
                "cases": panel,
            },
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args()
    outputs = build()
    stale = [path for path, text in outputs.items() if not path.is_file() or path.read_text("utf-8") != text]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)}")
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
