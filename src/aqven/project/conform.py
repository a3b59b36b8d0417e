"""Does a value conform to a JSON Schema? Validators are built once per schema (building one is slow)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


Check = Callable[[Any], bool]
# Value types a quick check decides by exact type; anything else (a float 1.0 for an integer, a bool subclass,
# a tuple) goes to jsonschema, which knows its rules.
_EXACT: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}
_QUICK_KEYWORDS = {"type", "properties", "required", "items"}


def _quick(schema: Any) -> Check | None:
    """A check that returns True only for values that conform, for the schemas the type shorthand compiles to
    (project/types.py: type, properties, required, items); None for any other schema. False means "ask
    jsonschema", never "does not conform": only jsonschema words a problem, and decides what this one cannot."""
    if not isinstance(schema, dict) or not set(schema) <= _QUICK_KEYWORDS:
        return None
    if not schema:
        return lambda _value: True
    names = schema.get("type")
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or any(n not in _EXACT for n in names):
        return None
    exact = tuple({t for n in names for t in _EXACT[n]})
    props_schema = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props_schema, dict) or not isinstance(required, list):
        return None
    props: dict[str, Check] = {}
    for name, sub in props_schema.items():
        check = _quick(sub)
        if check is None:
            return None
        props[name] = check
    items = _quick(schema["items"]) if "items" in schema else None
    if "items" in schema and items is None:
        return None

    def conforms(value: Any) -> bool:
        if type(value) not in exact:  # exact: True is an int to isinstance, not to JSON Schema's integer
            return False
        if type(value) is dict:
            if any(k not in value for k in required):
                return False
            return all(check(value[k]) for k, check in props.items() if k in value)
        if type(value) is list and items is not None:
            return all(items(v) for v in value)
        return True

    return conforms


# Schemas by identity: the same dict is checked again and again (a flow's input type, once per case and per
# attempt), and serialising it to find its validator costs more than checking a small value. The entry keeps its
# schema alive, so the id is not reused while the entry stands; a schema is never changed once loaded.
_BY_ID: dict[int, tuple[dict[str, Any], Any, Check | None]] = {}


def _checks_of(schema: dict[str, Any]) -> tuple[Any, Check | None]:
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    validator = _validator(json.dumps(schema, sort_keys=True))
    quick = _quick(schema)
    if len(_BY_ID) >= 1024:
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, validator, quick)
    return validator, quick


def violation(value: Any, schema: dict[str, Any]) -> str | None:
    """None when `value` conforms to `schema`, else the most relevant problem in words."""
    if not schema:
        return None
    validator, quick = _checks_of(schema)
    if quick is not None and quick(value):
        return None
    if validator.is_valid(value):  # the usual case; finding the most relevant error walks every error
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"
