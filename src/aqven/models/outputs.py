"""How a node's output schema (JSON Schema) becomes a pydantic-ai output type, and how outputs are checked.

* ``{"type": "string", ...}`` → plain text output (`str`), whatever the agent's output mode.
* ``{"type": "object", ...}`` → a `StructuredDict` in the agent's output mode (tool, native, prompted).
* anything else (arrays, numbers, enums, unions) → wrapped as ``{"value": <schema>}`` so every mode
  can carry it, and unwrapped after the call.

`StructuredDict` only checks that the output is a JSON object, so every output is validated against the
full schema with `jsonschema`; a mismatch raises `ModelRetry` from an output validator, which spends
the model's output retries like any other validation error.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
from pydantic_ai import ModelRetry, NativeOutput, PromptedOutput, StructuredDict, ToolOutput

from aqven.project.conform import violation

OutputMode = Literal["tool", "native", "prompted"]
PlanKind = Literal["text", "object", "wrapped"]

OUTPUT_NAME = "output"
WRAP_KEY = "value"
SCHEMA_MISMATCH_PREFIX = "The output does not match the required JSON schema"


@dataclass(frozen=True)
class OutputPlan:
    schema: dict[str, Any]
    kind: PlanKind
    model_schema: dict[str, Any] = field(default_factory=dict)  # what the model is asked for

    @property
    def is_text(self) -> bool:
        return self.kind == "text"

    def output_type(self, mode: OutputMode) -> Any:
        """The `output_type` for `Agent(...)`."""
        if self.kind == "text":
            return str
        structured = StructuredDict(copy.deepcopy(self.model_schema), name=OUTPUT_NAME)
        if mode == "tool":
            return ToolOutput(structured)
        if mode == "native":
            return NativeOutput(structured, name=OUTPUT_NAME)
        return PromptedOutput(structured, name=OUTPUT_NAME)

    def wrap(self, value: Any) -> Any:
        """`value` as the model sends it (``{"value": ...}`` for wrapped schemas)."""
        return {WRAP_KEY: value} if self.kind == "wrapped" else value

    def unwrap(self, value: Any) -> Any:
        if self.kind == "wrapped" and isinstance(value, dict):
            return value.get(WRAP_KEY)
        if isinstance(value, dict):
            return dict(value)  # a plain dict, not pydantic-ai's StructuredDict subclass
        return value

    def validate(self, value: Any) -> str | None:
        """None when `value` (unwrapped) matches the schema, else a short description of the first error."""
        problem = violation(value, self.schema)
        if problem is None:
            return None
        return f"{SCHEMA_MISMATCH_PREFIX}: at {problem[:300]}"

    def check(self, value: Any) -> Any:
        """The output validator body: raise `ModelRetry` on a mismatch, else return `value` unchanged."""
        problem = self.validate(self.unwrap(value))
        if problem is not None:
            raise ModelRetry(problem)
        return value


@lru_cache(maxsize=256)
def _schema_problem(schema_json: str) -> str | None:
    """Checking a schema against the meta-schema is slow: once per distinct schema."""
    schema = json.loads(schema_json)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return exc.message
    return None


def plan_output(schema: dict[str, Any]) -> OutputPlan:
    """The output plan for a JSON Schema; `ValueError` when the schema itself is invalid."""
    problem = _schema_problem(json.dumps(schema, sort_keys=True))
    if problem is not None:
        raise ValueError(f"the output schema is not valid JSON Schema: {problem}")
    kind_of = schema.get("type")
    if kind_of == "string":
        return OutputPlan(schema=schema, kind="text", model_schema=schema)
    if kind_of == "object":
        return OutputPlan(schema=schema, kind="object", model_schema=schema)
    wrapped = {
        "type": "object",
        "properties": {WRAP_KEY: schema},
        "required": [WRAP_KEY],
        "additionalProperties": False,
    }
    return OutputPlan(schema=schema, kind="wrapped", model_schema=wrapped)
