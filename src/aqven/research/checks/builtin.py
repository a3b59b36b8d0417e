"""The built-in checks: a few detectors that need no code of the project.

Every built-in but `cost_at_most` and `latency_at_most` looks at a *subject*: the value at `field` (a dotted path
into the output, list items by index, e.g. ``promises.0``) or, without `field`, the whole output. Checks on text
(`contains`, `not_contains`, `regex`, `no_refusal`) read a string subject as it is and any other value as its
JSON text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, get_args

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from aqven.models.outcomes import MODEL_REFUSAL
from aqven.project.bindings import pick
from aqven.project.conform import violation
from aqven.project.safe_regex import UNSUPPORTED_HINT, RegexError, compile_pattern, search
from aqven.research.checks.result import AttemptView, CheckResult, passed_result, unscored_result
from aqven.research.experiments.schema import BuiltinName, CheckSpec


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def field_path(field: str | None) -> tuple[str, ...]:
    return tuple(field.split(".")) if field else ()


def value_at(value: Any, field: str | None) -> Any:
    """The value at `field` inside `value` (the whole value without a field), or `MISSING`."""
    if not field:
        return value
    try:
        return pick(value, field_path(field))
    except (KeyError, IndexError, TypeError):
        return MISSING


def as_text(value: Any) -> str:
    """A string as it is; anything else as its JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def texts_in(value: Any) -> list[str]:
    """Every string inside a value (a reply and each listed promise)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts_in(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in texts_in(v)]
    return []


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: True is not 1, 1 is 1.0, dict key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float | Decimal) and isinstance(b, int | float | Decimal):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _short(value: Any, limit: int = 80) -> str:
    text = as_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(check: CheckSpec) -> str:
    return f"field {check.field!r}" if check.field else "the output"


# ---- refusals --------------------------------------------------------------------------------------

_CANT = (
    r"(?:can ?not|can't|cannot|won't|will not|am unable to|'m unable to|are unable to|'re unable to"
    r"|am not able to|'m not able to|are not able to|'re not able to|won't be able to|will not be able to)"
)
_REQUEST = r"(?:that|this|it|your request|this request|the request|such requests?|requests? like (?:this|that))"
REFUSAL_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\b(?:i|we) ?{_CANT} (?:help|assist)(?: you)? with {_REQUEST}\b",
        rf"\b(?:i|we) ?{_CANT} (?:assist|comply)\b",
        r"\bas an ai(?: language model| assistant| model)?,? i (?:can ?not|can't|cannot|am not able|'m not able"
        r"|am unable|'m unable|don't|do not|won't)\b",
        r"\bi (?:must|have to|need to) (?:respectfully )?(?:decline|refuse)\b",
        r"\bi(?:'m| am) (?:sorry|afraid),? (?:but )?(?:i|we) (?:can ?not|can't|cannot|won't|am unable to"
        r"|'m unable to) (?:help|assist|comply|answer|do that|do this)\b",
    )
)


def refusal_in(text: str) -> str | None:
    """The refusing phrase of a text that reads like a model refusal, or None."""
    normal = " ".join(text.replace("’", "'").split())
    for pattern in REFUSAL_PATTERNS:
        m = pattern.search(normal)
        if m:
            return m.group(0)
    return None


# ---- the registry ----------------------------------------------------------------------------------

Problem = tuple[str, str, str]
"""(code, message, hint) of one problem `aqven check` reports."""
Scorer = Callable[[CheckSpec, AttemptView], CheckResult]


def _no_problems(check: CheckSpec) -> list[Problem]:
    return []


@dataclass(frozen=True)
class BuiltinCheck:
    """One built-in: the parameters it reads (CheckSpec attribute names; any other given is unused), how it
    scores an attempt, what `aqven check` finds wrong with its parameters, and whether it reads the attempt
    rather than its output (then it is scored on failed runs as well)."""

    name: str
    params: frozenset[str]
    score: Scorer
    problems: Callable[[CheckSpec], list[Problem]] = _no_problems
    reads_attempt: bool = False


BUILTIN_CHECKS: Final[dict[str, BuiltinCheck]] = {}


def builtin(
    name: BuiltinName,
    *,
    params: Iterable[str],
    problems: Callable[[CheckSpec], list[Problem]] = _no_problems,
    reads_attempt: bool = False,
) -> Callable[[Scorer], Scorer]:
    """Register the decorated function as the scorer of the built-in `name` (its name in the schema's
    `BuiltinName`; `aqven check` and scoring find it here)."""

    def register(score: Scorer) -> Scorer:
        if name in BUILTIN_CHECKS:
            raise ValueError(f"built-in check {name!r} is registered twice")
        BUILTIN_CHECKS[name] = BuiltinCheck(name, frozenset(params), score, problems, reads_attempt)
        return score

    return register


def _params_problem(check: CheckSpec, message: str, hint: str) -> list[Problem]:
    return [("E_CHECK_PARAMS", f"check {check.id!r}{message}", hint)]


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a valid JSON Schema, or None."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{where}: {exc.message}" if where else exc.message
    except Exception as exc:  # a schema jsonschema cannot even read
        return f"{type(exc).__name__}: {exc}"
    return None


# ---- the built-ins ---------------------------------------------------------------------------------


@builtin("equals_expected", params={"field"})
def _equals_expected(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    expected_all = attempt.case.expected_output
    if expected_all is None:
        return unscored_result(check.id, f"case {attempt.case.name!r} has no expected_output to compare with")
    expected = value_at(expected_all, check.field)
    if expected is MISSING:
        return unscored_result(
            check.id, f"the expected_output of case {attempt.case.name!r} has no field {check.field!r}"
        )
    got = value_at(attempt.output, check.field)
    if got is MISSING:
        return passed_result(check.id, False, f"the output has no field {check.field!r}")
    if json_equal(got, expected):
        return passed_result(check.id, True, f"{_where(check)} equals the expected {_short(expected)}")
    return passed_result(check.id, False, f"{_where(check)} is {_short(got)}, expected {_short(expected)}")


def _value_problems(check: CheckSpec) -> list[Problem]:
    if check.value:
        return []
    return _params_problem(check, f" ({check.builtin}) needs a value to look for", 'add value: "text to find"')


def _contains(check: CheckSpec, attempt: AttemptView, negate: bool) -> CheckResult:
    subject = value_at(attempt.output, check.field)
    if subject is MISSING:
        return passed_result(check.id, False, f"the output has no field {check.field!r}")
    value = check.value or ""
    text = as_text(subject)
    found = (value in text) if check.case_sensitive else (value.casefold() in text.casefold())
    if negate:
        return passed_result(
            check.id, not found, f"{_where(check)} {'contains' if found else 'does not contain'} {value!r}"
        )
    return passed_result(check.id, found, f"{_where(check)} {'contains' if found else 'does not contain'} {value!r}")


@builtin("contains", params={"field", "value", "case_sensitive"}, problems=_value_problems)
def _contains_value(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    return _contains(check, attempt, negate=False)


@builtin("not_contains", params={"field", "value", "case_sensitive"}, problems=_value_problems)
def _not_contains_value(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    return _contains(check, attempt, negate=True)


def _regex_problems(check: CheckSpec) -> list[Problem]:
    if not check.pattern:
        return _params_problem(check, " (regex) needs a pattern", "add pattern: '...' (RE2 syntax)")
    try:
        compile_pattern(check.pattern)
    except RegexError as exc:
        return _params_problem(check, f": pattern {check.pattern!r} is not a valid regex: {exc}", UNSUPPORTED_HINT)
    return []


@builtin("regex", params={"field", "pattern", "case_sensitive"}, problems=_regex_problems)
def _regex(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    subject = value_at(attempt.output, check.field)
    if subject is MISSING:
        return passed_result(check.id, False, f"the output has no field {check.field!r}")
    # RE2: linear time whatever the pattern and the output, so no pattern can hold the server (safe_regex.py).
    found = search(check.pattern or "", as_text(subject), ignore_case=not check.case_sensitive)
    if found is not None:
        return passed_result(check.id, True, f"{_where(check)} matches /{check.pattern}/ at {_short(found, 60)!r}")
    return passed_result(check.id, False, f"{_where(check)} does not match /{check.pattern}/")


def _schema_problems(check: CheckSpec) -> list[Problem]:
    if check.schema_ is None:
        return _params_problem(check, " (json_schema) needs a schema", "add schema: {type: object, ...}")
    problem = schema_problem(check.schema_)
    if problem:
        return _params_problem(check, f": schema is not a valid JSON Schema: {problem}", "fix the schema")
    return []


@builtin("json_schema", params={"field", "schema_"}, problems=_schema_problems)
def _json_schema(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    subject = value_at(attempt.output, check.field)
    if subject is MISSING:
        return passed_result(check.id, False, f"the output has no field {check.field!r}")
    problem = violation(subject, check.schema_ or {})
    if problem is None:
        return passed_result(check.id, True, f"{_where(check)} conforms to the schema")
    return passed_result(check.id, False, f"{_where(check)} breaks the schema: {problem}")


def _length_problems(check: CheckSpec) -> list[Problem]:
    if check.min is None and check.max is None:
        return _params_problem(check, " (length) needs min or max", "add min: N and/or max: N")
    if check.min is not None and check.max is not None and check.min > check.max:
        return _params_problem(check, f": min {check.min} is above max {check.max}", "swap them")
    return []


@builtin("length", params={"field", "min", "max"}, problems=_length_problems)
def _length(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    subject = value_at(attempt.output, check.field)
    if subject is MISSING:
        return passed_result(check.id, False, f"the output has no field {check.field!r}")
    if isinstance(subject, str):
        n, unit = len(subject), "characters"
    elif isinstance(subject, list):
        n, unit = len(subject), "items"
    else:
        kind = "null" if subject is None else type(subject).__name__
        return passed_result(check.id, False, f"{_where(check)} is {kind}, not text or a list")
    if check.min is not None and n < check.min:
        return passed_result(check.id, False, f"{_where(check)} has {n} {unit}, fewer than {check.min}")
    if check.max is not None and n > check.max:
        return passed_result(check.id, False, f"{_where(check)} has {n} {unit}, more than {check.max}")
    bounds = []
    if check.min is not None:
        bounds.append(f"at least {check.min}")
    if check.max is not None:
        bounds.append(f"at most {check.max}")
    return passed_result(check.id, True, f"{_where(check)} has {n} {unit} ({' and '.join(bounds)})")


@builtin("no_refusal", params={"field"}, reads_attempt=True)
def _no_refusal(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    if attempt.error_code == MODEL_REFUSAL:
        return passed_result(check.id, False, "the model refused to answer (MODEL_REFUSAL)")
    if attempt.failed:
        return passed_result(check.id, True, f"the run failed with {attempt.error_code or 'an error'}, not a refusal")
    subject = value_at(attempt.output, check.field)
    if subject is MISSING:
        return passed_result(check.id, False, f"the output has no field {check.field!r}")
    for text in texts_in(subject):
        phrase = refusal_in(text)
        if phrase:
            return passed_result(check.id, False, f"{_where(check)} reads like a refusal: {phrase!r}")
    return passed_result(check.id, True, "no refusal")


def _cost_problems(check: CheckSpec) -> list[Problem]:
    if check.usd is None:
        return _params_problem(check, " (cost_at_most) needs usd", 'add usd: "0.01" (dollars, a string)')
    if not check.usd.is_finite() or check.usd < 0:
        return _params_problem(check, ": usd must be a dollar amount of 0 or more", 'usd: "0.01"')
    return []


@builtin("cost_at_most", params={"usd"}, problems=_cost_problems, reads_attempt=True)
def _cost_at_most(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    limit = check.usd if check.usd is not None else Decimal(0)
    if attempt.cost_usd is None:
        return unscored_result(check.id, "the attempt's cost is unknown (a model call was not priced)")
    ok = attempt.cost_usd <= limit
    return passed_result(
        check.id, ok, f"cost ${attempt.cost_usd} is {'within' if ok else 'above'} the limit of ${limit}"
    )


def _latency_problems(check: CheckSpec) -> list[Problem]:
    if check.seconds is None:
        return _params_problem(check, " (latency_at_most) needs seconds", "add seconds: 5")
    return []


@builtin("latency_at_most", params={"seconds"}, problems=_latency_problems, reads_attempt=True)
def _latency_at_most(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    limit = check.seconds if check.seconds is not None else 0.0
    latency = attempt.latency_s
    if latency is None or math.isnan(latency):
        return unscored_result(check.id, "the attempt's latency is unknown")
    ok = latency <= limit
    return passed_result(
        check.id, ok, f"latency {latency:.3g}s is {'within' if ok else 'above'} the limit of {limit:g}s"
    )


def score_builtin(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    """Score one built-in check on one attempt (never raises for a well-formed check)."""
    assert check.builtin is not None
    spec = BUILTIN_CHECKS[check.builtin]
    if attempt.failed and not spec.reads_attempt:
        return no_output_result(check, attempt)
    return spec.score(check, attempt)


def no_output_result(check: CheckSpec, attempt: AttemptView) -> CheckResult:
    """A check of the output on a run that ended without one: a fail, counted like the run's own failure."""
    return passed_result(
        check.id, False, f"the run failed ({attempt.error_code or 'no output'}); there is no output to check"
    )


assert set(BUILTIN_CHECKS) == set(get_args(BuiltinName)), "every BuiltinName has one registered scorer, and only those"

#: The parameters each built-in reads (from the registry).
BUILTIN_PARAMS: Final[dict[str, frozenset[str]]] = {name: b.params for name, b in BUILTIN_CHECKS.items()}
#: Built-ins that read the attempt, not its output: they are scored on failed runs as well.
ATTEMPT_BUILTINS: Final = frozenset(name for name, b in BUILTIN_CHECKS.items() if b.reads_attempt)
