"""What support may promise on an order: Lumen's return, refund, replacement and credit policy."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

RETURN_WINDOW_DAYS = {"basic": 30, "plus": 30, "gold": 60}
CREDIT_CAP_PERCENT = {"basic": 10, "plus": 15, "gold": 25}
REPLACEMENT_SHIPPING = {"basic": "3-5 business days", "plus": "3-5 business days", "gold": "2 business days"}
REFUND_TIMING = "within 5-10 business days of the return reaching our warehouse"


def policy_for(tier: str, order_total: str, days_since_delivery: int) -> dict[str, Any]:
    """The limits of what a reply may promise. Money stays a decimal string."""
    tier = tier if tier in RETURN_WINDOW_DAYS else "basic"
    window = RETURN_WINDOW_DAYS[tier]
    percent = CREDIT_CAP_PERCENT[tier]
    credit = (Decimal(str(order_total)) * percent / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return {
        "return_window_days": window,
        "within_return_window": int(days_since_delivery) <= window,
        "refund_timing": REFUND_TIMING,
        "replacement_shipping": REPLACEMENT_SHIPPING[tier],
        "max_credit_percent": percent,
        "max_credit": str(credit),
    }
