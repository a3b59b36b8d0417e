"""A dollar cap as people write it: one grammar for every place a cap is read.

A cap is a plain decimal string ("2.00") or a number, with at most `CAP_DECIMALS` decimals, above 0 and at most
`CAP_CEILING_USD`. Nothing around it: no whitespace (a cap that only parses once stripped is a cap some reader
may not strip), no exponent, underscore, sign, unit or non-ASCII digit. REST bodies and `aqven ... --cap` go
through `research/launch/caps.parse_cap` (`VALIDATION_ERROR`), `aqven.yaml` and `.aqven/local.yaml` through
their schemas (a diagnostic); all of them call `plain_cap`.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pydantic_core import PydanticCustomError

CAP_CEILING_USD = Decimal("1000000")
CAP_DECIMALS = 6
_PLAIN = re.compile(r"[0-9]{1,7}(?:\.[0-9]{1,20})?")  # ASCII digits only: no "1_000", "٣", "1e3", " 1"
CAP_HINT = (
    f'give dollars as a plain decimal, e.g. "2.00": above 0, at most {CAP_DECIMALS} decimals, '
    f"at most ${CAP_CEILING_USD:,}, nothing around it"
)


class BadCap(ValueError):
    """What is wrong with a cap (`detail`: "must be ..., not ' 1'")."""

    def __init__(self, given: Any, why: str, *, out_of_range: bool = False) -> None:
        shown = repr(given)
        if len(shown) > 40:
            shown = shown[:37] + "..."
        super().__init__(f"cap_usd {why}, not {shown}")
        self.detail = f"{why}, not {shown}"
        self.out_of_range = out_of_range  # a plain amount, but too small, too fine or too large


def plain_cap(value: Any) -> Decimal:
    """`value` as a cap, or `BadCap`."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise BadCap(value, "must be a decimal string or a number")
    if isinstance(value, float):
        text = repr(value)  # the shortest text of the number, never its binary value
    elif isinstance(value, Decimal):
        text = format(value, "f") if value.is_finite() else "nan"
    else:
        text = str(value)  # never stripped: " 1" is refused like "1 USD"
    if not _PLAIN.fullmatch(text):
        if text.startswith("-") and _PLAIN.fullmatch(text[1:]):
            raise BadCap(value, "must be above 0", out_of_range=True)
        if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise BadCap(value, "must be a finite amount", out_of_range=True)
        raise BadCap(value, "must be a plain amount in dollars")
    if "." in text and len(text.split(".", 1)[1].rstrip("0")) > CAP_DECIMALS:
        raise BadCap(value, f"has more than {CAP_DECIMALS} decimals", out_of_range=True)
    cap = Decimal(text)
    if cap <= 0:
        raise BadCap(value, "must be above 0", out_of_range=True)
    within_ceiling(cap, value)
    return cap


def within_ceiling(cap: Decimal, given: Any = None) -> None:
    if cap > CAP_CEILING_USD:
        raise BadCap(
            given if given is not None else str(cap), f"is above the ceiling of ${CAP_CEILING_USD:,}", out_of_range=True
        )


def cap_field(value: Any) -> Decimal:
    """`plain_cap` for a schema's validator: a wrong type or a value out of range, as the loader reports them."""
    try:
        return plain_cap(value)
    except BadCap as exc:
        kind = "less_than_equal" if exc.out_of_range else "decimal_parsing"
        raise PydanticCustomError(kind, f"the cap {exc.detail}: {CAP_HINT}") from None


def shown_usd(value: str | int | float | Decimal | None) -> str:
    """Dollars as Studio's pages show them (`fmt.money` in server/studio/js/dom.js), for every text the server
    writes for people (the chat, a standing finding's costs): $X.XX from $1, three decimals from $0.01, two
    significant digits below ("$0.0040"), "—" for no amount."""
    if value is None or value == "":
        return "—"
    try:
        x = Decimal(str(value))
    except ArithmeticError:
        return str(value)
    if not x.is_finite():
        return str(value)
    if x == 0:
        return "$0.00"
    sign, x = ("-", -x) if x < 0 else ("", x)
    if x >= 1:
        shown = x.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    elif x >= Decimal("0.01"):
        shown = x.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    else:
        shown = x.quantize(Decimal(1).scaleb(x.adjusted() - 1), rounding=ROUND_HALF_UP)
        if shown.adjusted() > x.adjusted():  # rounded up a digit ($0.0099996 → $0.010, not $0.0100)
            shown = shown.quantize(Decimal(1).scaleb(shown.adjusted() - 1))
    return f"{sign}${shown:f}"
