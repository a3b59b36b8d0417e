"""Does a value conform to a JSON Schema? Validators are built once per schema (building one is slow)."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def violation(value: Any, schema: dict[str, Any]) -> str | None:
    """None when `value` conforms to `schema`, else the most relevant problem in words."""
    if not schema:
        return None
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"
