"""Custom check functions: ``function: file.py:fn``, the project's own detector.

The file is looked up relative to the experiment folder first, then the project root, and must stay inside
the project. The function is called with the parameters it names among `ARGUMENTS` (sync or async) and returns
one of the forms `interpret` accepts. Anything else, and any exception, is a `CODE_ERROR` of the check.
"""

from __future__ import annotations

import copy
import inspect
import math
import traceback
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from aqven.errors import ProjectError
from aqven.models.outcomes import CODE_ERROR
from aqven.project.loader import Project
from aqven.project.paths import rel
from aqven.project.pycode import load_function
from aqven.research.checks.result import AttemptView, CheckResult, error_result, scored_result
from aqven.research.experiments.files import function_file
from aqven.research.experiments.schema import CheckSpec, ExperimentSource

#: What a check function may ask for, by parameter name.
ARGUMENTS: Final[dict[str, str]] = {
    "output": "the attempt's output (None when the run failed)",
    "case": "the case (aqven.project.schema.Case: name, input, context, expected_output, tags)",
    "expected": "the case's expected_output (None when it has none)",
    "input": "the case's input",
    "context": "the case's context",
    "attempt": "the AttemptView: output, status, error_code, outcome, case, cost_usd, latency_s, run_id",
}
DICT_KEYS: Final = frozenset({"passed", "score", "reason"})


def arguments_of(fn: Callable[..., Any], values: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments to call `fn` with: the `values` its parameters name.

    Raises `TypeError` naming a parameter without a default that is not one of `ARGUMENTS`.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C function: give it the output
        return [values.get("output")], {}
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    named = set()
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            kwargs.update({k: v for k, v in values.items() if k not in named})
            continue
        if p.name in values:
            named.add(p.name)
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                args.append(values[p.name])
            else:
                kwargs[p.name] = values[p.name]
        elif p.default is inspect.Parameter.empty:
            raise TypeError(
                f"parameter {p.name!r} has no default and is not one of {', '.join(ARGUMENTS)}",
            )
        elif p.kind is inspect.Parameter.POSITIONAL_ONLY:
            break  # later positional-only parameters would shift; leave them and the rest to their defaults
    return args, kwargs


def signature_problem(fn: Callable[..., Any]) -> str | None:
    try:
        arguments_of(fn, dict.fromkeys(ARGUMENTS))
    except TypeError as exc:
        return str(exc)
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def interpret(value: Any, pass_score: float) -> tuple[bool, float, str]:
    """(passed, score, reason) from what a check function returned; `ValueError` for any other form.

    Accepted: a bool; a number in [0, 1] (passed when >= pass_score); a tuple (bool or number, reason);
    a dict with "passed" and/or "score" and an optional "reason".
    """
    reason: Any = ""
    passed: Any = None
    score: Any = None
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"a tuple must be (passed or score, reason); got {len(value)} items")
        head, reason = value
        if isinstance(head, bool):
            passed = head
        elif _is_number(head):
            score = head
        else:
            raise ValueError(f"the first item of the tuple must be a bool or a score; got {type(head).__name__}")
    elif isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in DICT_KEYS)
        if unknown:
            raise ValueError(f"a dict may hold passed, score and reason only; got {', '.join(unknown)}")
        if "passed" not in value and "score" not in value:
            raise ValueError("a dict needs 'passed' or 'score'")
        passed, score, reason = value.get("passed"), value.get("score"), value.get("reason", "")
        if passed is not None and not isinstance(passed, bool):
            raise ValueError(f"'passed' must be a bool; got {type(passed).__name__}")
        if score is not None and not _is_number(score):
            raise ValueError(f"'score' must be a number in [0, 1]; got {type(score).__name__}")
    elif isinstance(value, bool):
        passed = value
    elif _is_number(value):
        score = value
    else:
        raise ValueError(
            f"a check returns a bool, a score in [0, 1], (bool or score, reason) or a dict; got {type(value).__name__}"
        )
    if not isinstance(reason, str):
        raise ValueError(f"the reason must be a string; got {type(reason).__name__}")
    if score is not None:
        s = float(score)
        if math.isnan(s) or not 0.0 <= s <= 1.0:
            raise ValueError(f"a score must be in [0, 1]; got {score!r}")
        ok = bool(passed) if passed is not None else s >= pass_score
        return ok, s, reason or f"score {s:.3g} ({'at or above' if ok else 'below'} the pass score {pass_score:g})"
    assert isinstance(passed, bool)
    return passed, 1.0 if passed else 0.0, reason or ("passed" if passed else "failed")


def crash_site(exc: BaseException, root: Path) -> tuple[str, int] | None:
    """The file (relative to the project) and line where `exc` was raised: the innermost project frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    try:
        root = root.resolve()
    except OSError:
        return None
    for frame in reversed(frames):
        try:
            path = Path(frame.filename).resolve()
        except (OSError, ValueError):
            continue
        if root in path.parents and "site-packages" not in path.parts and frame.lineno is not None:
            return rel(root, path), frame.lineno
    if frames and frames[-1].lineno is not None:
        return frames[-1].filename, frames[-1].lineno
    return None


def _code_error(check: CheckSpec, message: str, site: tuple[str, int] | None = None) -> CheckResult:
    extra = {"file": site[0], "line": str(site[1])} if site else {}
    return error_result(check.id, CODE_ERROR, message, **extra)


async def score_function(
    project: Project, exp: ExperimentSource, check: CheckSpec, attempt: AttemptView
) -> CheckResult:
    """Call the check's function on one attempt and read its verdict."""
    assert check.function is not None
    try:
        path, name = function_file(project, exp, check.function)
        fn = load_function(project.root, path, name)
    except ProjectError as exc:
        site = (exc.file, exc.line) if exc.file and exc.line else None
        where = f"{site[0]}:{site[1]}: " if site else ""
        return _code_error(check, f"check {check.id!r}: {where}{exc.message}", site)
    case = attempt.case
    values = {
        "output": copy.deepcopy(attempt.output),
        "case": case.model_copy(deep=True),
        "expected": copy.deepcopy(case.expected_output),
        "input": copy.deepcopy(case.input),
        "context": copy.deepcopy(case.context),
        "attempt": attempt,
    }
    try:
        args, kwargs = arguments_of(fn, values)
    except TypeError as exc:
        return _code_error(check, f"check {check.id!r}: {name}() cannot be called: {exc}")
    try:
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:  # the project's own code: an infrastructure error of the attempt, never a crash
        site = crash_site(exc, project.root)
        where = f" at {site[0]}:{site[1]}" if site else ""
        return _code_error(check, f"check {check.id!r}: {name}() raised {type(exc).__name__}: {exc}{where}", site)
    try:
        passed, score, reason = interpret(value, check.pass_score)
    except ValueError as exc:
        return _code_error(check, f"check {check.id!r}: {name}() returned {_short_repr(value)}: {exc}")
    return scored_result(check.id, passed, score, reason)


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
