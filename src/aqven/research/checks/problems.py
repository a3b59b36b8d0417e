"""What `aqven check` knows about one check of an experiment without running it.

`check_spec_problems` returns ``(code, message, hint)`` triples. Codes starting with ``W_`` are warnings, the
rest errors; the caller (`aqven.research.diagnostics.experiments`) adds the file and line.
"""

from __future__ import annotations

import re
from typing import Any, Final

from aqven.engine.compile import FlowCompiler
from aqven.engine.template import PLACEHOLDER
from aqven.engine.variant import FlowPatch
from aqven.errors import ProjectError
from aqven.project.loader import Project
from aqven.project.pycode import load_function
from aqven.project.types import describe, schema_at
from aqven.research.checks.builtin import BUILTIN_CHECKS, BUILTIN_PARAMS, MISSING, field_path, value_at
from aqven.research.checks.functions import ARGUMENTS, signature_problem
from aqven.research.checks.judges import RUBRIC_NAMES
from aqven.research.experiments.files import function_file, rubric_file
from aqven.research.experiments.loading import selected_cases
from aqven.research.experiments.schema import CheckSpec, ExperimentSource

Problem = tuple[str, str, str]

#: Parameters every check may carry, whatever its kind.
COMMON: Final = frozenset({"id", "description", "builtin", "function", "judge", "validated_by"})
#: Parameters each kind of check reads besides the common ones.
KIND_PARAMS: Final[dict[str, frozenset[str]]] = {
    "function": frozenset({"pass_score"}),
    "judge": frozenset({"pass_score"}),
}
_SHOWN = {"schema_": "schema"}
_FIELD_PART = re.compile(r"^[A-Za-z0-9_\-]+$")


def check_spec_problems(
    project: Project, exp: ExperimentSource, check: CheckSpec, experiments: dict[str, ExperimentSource]
) -> list[Problem]:
    """Every problem of one check: errors (``E_…``) and warnings (``W_…``)."""
    problems = _unused_params(check)
    if check.builtin is not None:
        problems += BUILTIN_CHECKS[check.builtin].problems(check)
        problems += _field_problems(project, exp, check)
        if check.builtin == "equals_expected":
            problems += _expected_problems(project, exp, check)
    elif check.function is not None:
        problems += _function_problems(project, exp, check)
    else:
        problems += _judge_problems(project, exp, check, experiments)
    return problems


# ---- parameters ---------------------------------------------------------------------------------------


def _unused_params(check: CheckSpec) -> list[Problem]:
    kind: str
    if check.builtin is not None:
        reads, kind = BUILTIN_PARAMS[check.builtin], check.builtin
    elif check.function is not None:
        reads, kind = KIND_PARAMS["function"], "a function check"
    else:
        assert check.judge is not None
        reads = KIND_PARAMS["judge"] if check.judge.scale == "score" else frozenset()
        kind = f"a {check.judge.scale} judge"
    unused = sorted(_SHOWN.get(n, n) for n in check.model_fields_set - COMMON - reads)
    if not unused:
        return []
    return [
        (
            "W_CHECK_PARAM_UNUSED",
            f"check {check.id!r} ({kind}) ignores {', '.join(unused)}",
            f"remove {'it' if len(unused) == 1 else 'them'}; {kind} reads "
            f"{', '.join(sorted(_SHOWN.get(n, n) for n in reads)) or 'no parameters'}",
        )
    ]


# ---- fields -------------------------------------------------------------------------------------------


def subject_output_schema(project: Project, exp: ExperimentSource) -> tuple[dict[str, Any], str] | None:
    """The schema of what the subject returns and a name for it; None when the subject does not compile."""
    subject = exp.spec.subject
    compiler = FlowCompiler(project, FlowPatch(local_flows=dict(exp.local_flows)), load_code=False)
    try:
        compiled = compiler.compile(subject.flow)
    except ProjectError:
        return None
    if compiled is None:
        return None
    top = compiled.top_ids()
    if subject.to is not None and subject.to in top and subject.to != top[-1]:
        node = compiled.node(subject.to)
        if node is None:
            return None
        return node.output_schema, f"node {subject.to!r} of flow {subject.flow!r}"
    if subject.to is not None and subject.to not in top:
        return None  # E_RANGE_INVALID, reported with the subject
    return compiled.output_schema, f"flow {subject.flow!r}"


def _field_syntax(check: CheckSpec) -> Problem | None:
    if check.field is None:
        return None
    if not check.field or not all(_FIELD_PART.match(p) for p in field_path(check.field)):
        return (
            "E_CHECK_FIELD",
            f"check {check.id!r}: field {check.field!r} is not a dotted path",
            "write field: reply, or field: promises.0 (names and list indexes separated by dots)",
        )
    return None


def _field_problems(project: Project, exp: ExperimentSource, check: CheckSpec) -> list[Problem]:
    if check.builtin in ("cost_at_most", "latency_at_most"):
        return []  # they read the attempt, not the output (a field given is reported as unused)
    syntax = _field_syntax(check)
    if syntax:
        return [syntax]
    if check.field is None and check.builtin != "length":
        return []
    found = subject_output_schema(project, exp)
    if found is None:
        return []
    schema, what = found
    target = schema_at(schema, list(field_path(check.field))) if check.field else schema
    if target is None:
        return [
            (
                "E_CHECK_FIELD",
                f"check {check.id!r}: the output of {what} ({describe(schema)}) has no field {check.field!r}",
                "name a field the output type declares, or drop field to check the whole output",
            )
        ]
    if check.builtin == "length":
        types = _types(target)
        if types and not types & {"string", "array"}:
            where = f"field {check.field!r}" if check.field else f"the output of {what}"
            return [
                (
                    "E_CHECK_FIELD",
                    f"check {check.id!r}: length counts characters of text or items of a list, "
                    f"but {where} is {describe(target)}",
                    "point field at a string or a list",
                )
            ]
    return []


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)} - {"null"}
    return set()


def _expected_problems(project: Project, exp: ExperimentSource, check: CheckSpec) -> list[Problem]:
    cases = selected_cases(project, exp.spec)
    lacking = [
        c.name for c in cases if c.expected_output is None or value_at(c.expected_output, check.field) is MISSING
    ]
    if not lacking:
        return []
    what = f"expected_output.{check.field}" if check.field else "expected_output"
    shown = ", ".join(repr(n) for n in lacking[:3]) + (", ..." if len(lacking) > 3 else "")
    return [
        (
            "W_CHECK_NO_EXPECTED",
            f"check {check.id!r} (equals_expected): {len(lacking)} of {len(cases)} cases have no {what} "
            f"({shown}); the check cannot score them",
            f"add {what} to those cases, or narrow the dataset's tags",
        )
    ]


# ---- functions ----------------------------------------------------------------------------------------


def _function_problems(project: Project, exp: ExperimentSource, check: CheckSpec) -> list[Problem]:
    assert check.function is not None
    try:
        path, name = function_file(project, exp, check.function)
        fn = load_function(project.root, path, name)
    except (ProjectError, ValueError) as exc:
        if isinstance(exc, ValueError):
            return [("E_CHECK_PARAMS", f"check {check.id!r}: {exc}", "write function: file.py:function")]
        where = f"{exc.file}:{exc.line}: " if exc.file and exc.line else ""
        return [(exc.code, f"check {check.id!r}: {where}{exc.message}", exc.hint)]
    problem = signature_problem(fn)
    if problem:
        return [
            (
                "E_CODE_SIGNATURE",
                f"check {check.id!r}: {name}() cannot be called as a check: {problem}",
                f"a check function takes any of {', '.join(ARGUMENTS)} by name",
            )
        ]
    return []


# ---- judges -------------------------------------------------------------------------------------------


def _judge_problems(
    project: Project, exp: ExperimentSource, check: CheckSpec, experiments: dict[str, ExperimentSource]
) -> list[Problem]:
    judge = check.judge
    assert judge is not None
    out: list[Problem] = []
    if judge.agent not in project.agents:
        if ("agent", judge.agent) in project.failed:
            message = f"check {check.id!r}: judge agent {judge.agent!r} did not load"
            hint = f"fix the errors reported in {project.file_of('agent', judge.agent)}"
        else:
            message = f"check {check.id!r}: judge agent {judge.agent!r} does not exist"
            hint = f"agents: {', '.join(sorted(project.agents)) or 'none'}"
        out.append(("E_UNKNOWN_AGENT", message, hint))
    out += _rubric_problems(project, exp, check)
    if check.validated_by is None:
        out.append(
            (
                "W_JUDGE_UNVALIDATED",
                f"check {check.id!r}: judge {judge.agent!r} has no validated_by, so a series deciding on it gives a "
                "signal, never a verdict",
                "run a judge-agreement experiment on human labels and name it in validated_by",
            )
        )
    elif check.validated_by not in experiments:
        out.append(
            (
                "E_UNKNOWN_EXPERIMENT",
                f"check {check.id!r}: validated_by names experiment {check.validated_by!r}, which does not exist",
                f"experiments: {', '.join(sorted(experiments)) or 'none'}",
            )
        )
    return out


def _rubric_problems(project: Project, exp: ExperimentSource, check: CheckSpec) -> list[Problem]:
    judge = check.judge
    assert judge is not None
    try:
        path = rubric_file(project, exp, judge.rubric)
        text = path.read_text(encoding="utf-8")
    except ProjectError as exc:
        return [(exc.code, f"check {check.id!r}: {exc.message}", exc.hint)]
    except UnicodeDecodeError:
        return [
            ("E_FILE_UNREADABLE", f"check {check.id!r}: rubric {judge.rubric!r} is not UTF-8 text", "save as UTF-8")
        ]
    except OSError as exc:
        return [("E_FILE_UNREADABLE", f"check {check.id!r}: cannot read rubric {judge.rubric!r}: {exc}", "check it")]
    out: list[Problem] = []
    seen: set[str] = set()
    output_fields: list[str] = []
    for m in PLACEHOLDER.finditer(text):
        head, *rest = m.group(1).split(".")
        if head not in RUBRIC_NAMES and head not in seen:
            seen.add(head)
            out.append(
                (
                    "E_PROMPT_UNBOUND",
                    f"check {check.id!r}: rubric {judge.rubric!r} reads {{{{ {head} }}}}, which a judge is not given",
                    f"a rubric reads {', '.join('{{ ' + n + ' }}' for n in RUBRIC_NAMES)}",
                )
            )
        if head == "output" and rest:
            output_fields.append(".".join(rest))
    heads = {m.group(1).split(".")[0] for m in PLACEHOLDER.finditer(text)}
    if "output" not in heads:
        out.append(
            (
                "W_RUBRIC_WITHOUT_OUTPUT",
                f"check {check.id!r}: rubric {judge.rubric!r} never shows the judge the output",
                "add {{ output }} (or {{ output.<field> }}) where the judge should read the answer",
            )
        )
    if output_fields:
        found = subject_output_schema(project, exp)
        if found is not None:
            schema, what = found
            for f in dict.fromkeys(output_fields):
                if schema_at(schema, f.split(".")) is None:
                    out.append(
                        (
                            "E_CHECK_FIELD",
                            f"check {check.id!r}: rubric reads {{{{ output.{f} }}}}, but the output of {what} "
                            f"({describe(schema)}) has no field {f!r}",
                            "read a field the output type declares",
                        )
                    )
    return out
