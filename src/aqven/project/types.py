"""Value types of flows and nodes: a compact shorthand that compiles to JSON Schema.

Shorthand:
  string | integer | number | boolean | any | null      a scalar ("?" suffix: may be null / optional field)
  [T]                                                   an array of T
  {field: T, other: T?}                                 an object; fields without "?" are required
A mapping whose keys are all JSON Schema keywords and that has "type" is taken as JSON Schema as is.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

SCALARS = {"string", "integer", "number", "boolean", "null"}
SCHEMA_KEYWORDS = {
    "type", "properties", "required", "items", "enum", "const", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "format",
    "additionalProperties", "description", "title", "default", "anyOf", "oneOf", "allOf",
    "minItems", "maxItems", "uniqueItems", "$defs", "$ref", "nullable", "examples",
}  # fmt: skip

ANY: dict[str, Any] = {}


class TypeSpecError(ValueError):
    """A type declaration that is neither shorthand nor JSON Schema; `path` locates it."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


def is_json_schema(spec: dict[str, Any]) -> bool:
    return "type" in spec and isinstance(spec["type"], str | list) and set(spec) <= SCHEMA_KEYWORDS


def to_json_schema(spec: Any, path: tuple[str | int, ...] = ()) -> dict[str, Any]:
    """Compile a shorthand (or pass through a JSON Schema) into JSON Schema."""
    if spec is None:
        return dict(ANY)
    if isinstance(spec, str):
        name = spec.strip()
        optional = name.endswith("?")
        name = name.rstrip("?").strip()
        if name == "any":
            return dict(ANY)
        if name not in SCALARS:
            raise TypeSpecError(
                f"unknown type {spec!r}; use string, integer, number, boolean, any, null, [T] or {{field: T}}",
                path,
            )
        if optional:
            return {"type": [name, "null"]}
        return {"type": name}
    if isinstance(spec, list):
        if len(spec) != 1:
            raise TypeSpecError("an array type is written [T] with exactly one item type", path)
        return {"type": "array", "items": to_json_schema(spec[0], (*path, 0))}
    if isinstance(spec, dict):
        if is_json_schema(spec):
            try:
                Draft202012Validator.check_schema(spec)
            except SchemaError as exc:
                where = "/".join(str(p) for p in exc.path)
                raise TypeSpecError(
                    f"invalid JSON Schema{' at ' + where if where else ''}: {exc.message}", path
                ) from None
            return dict(spec)
        props: dict[str, Any] = {}
        required: list[str] = []
        for key, value in spec.items():
            k = str(key)
            optional = k.endswith("?") or (isinstance(value, str) and value.strip().endswith("?"))
            k = k.rstrip("?")
            if not k:
                raise TypeSpecError(f"a field needs a name, not {str(key)!r}", (*path, key))
            props[k] = to_json_schema(value, (*path, key))
            if not optional:
                required.append(k)
        return {"type": "object", "properties": props, "required": required}
    raise TypeSpecError(f"a type must be a name, [T] or a mapping, not {type(spec).__name__}", path)


def schema_at(schema: dict[str, Any], fields: list[str]) -> dict[str, Any] | None:
    """The schema of a field path inside `schema`; ANY when unknown; None when it cannot exist."""
    current = _as_schema(schema)
    for name in fields:
        if not current:
            return dict(ANY)
        types = _types(current)
        if "array" in types and name.isdigit():
            current = _as_schema(current.get("items"))
            continue
        if "object" not in types:
            return None if types else dict(ANY)
        props = current.get("properties")
        if not isinstance(props, dict):
            return dict(ANY)
        if name not in props:
            extra = current.get("additionalProperties", False)
            return dict(ANY) if extra not in (False, None) else None
        current = _as_schema(props[name])
    return current


def _as_schema(value: Any) -> dict[str, Any]:
    """A JSON Schema as a mapping; boolean and malformed schemas are read as `any`."""
    return value if isinstance(value, dict) else dict(ANY)


def _types(schema: Any) -> set[str]:
    t = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    return set()


def compatible(source: Any, target: Any) -> bool:
    """Whether a value of schema `source` may flow into a slot of schema `target` (shallow check)."""
    source, target = _as_schema(source), _as_schema(target)
    s, t = _types(source), _types(target)
    if not s or not t:
        return True
    if "integer" in s and "number" in t:
        s = (s - {"integer"}) | {"number"}
    if not (s - {"null"}) <= t and not (s <= t):
        return False
    if "object" in s and "object" in t:
        sp, tp = _props(source), _props(target)
        required = target.get("required")
        for name in required if isinstance(required, list) else []:
            if name in tp and sp and name not in sp:
                return False
            if name in sp and name in tp and not compatible(sp[name], tp[name]):
                return False
    if "array" in s and "array" in t:
        return compatible(_as_schema(source.get("items")), _as_schema(target.get("items")))
    return True


def _props(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    return {str(k): _as_schema(v) for k, v in props.items()}


def describe(schema: Any) -> str:
    """A short human name of a schema, for messages."""
    schema = _as_schema(schema)
    types = sorted(_types(schema))
    if not types:
        return "any"
    if types == ["array"]:
        return f"[{describe(_as_schema(schema.get('items')))}]"
    if types == ["object"]:
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in _props(schema).items()) + "}"
    if len(types) == 2 and "null" in types:
        return f"{next(t for t in types if t != 'null')}?"
    return "|".join(types)
