"""`violation` decides as jsonschema does: its quick check of the type shorthand never lets a wrong value pass."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from aqven.project.conform import _quick, violation
from aqven.project.types import to_json_schema

SCALARS = ["string", "integer", "number", "boolean", "null", "any", "string?", "integer?", "number?"]

shorthand = st.recursive(
    st.sampled_from(SCALARS),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=1),
        st.dictionaries(st.sampled_from(["a", "b", "c?", "d"]), inner, max_size=3),
    ),
    max_leaves=6,
)
values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.floats(allow_nan=False, allow_infinity=False, width=16),
        st.sampled_from([1.0, 0.0, -2.0]),
        st.text(max_size=2),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), inner, max_size=4),
    ),
    max_leaves=8,
)


def _jsonschema_says(value: Any, schema: dict[str, Any]) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(value))


@settings(max_examples=600, deadline=None)
@given(shorthand, values)
def test_violation_agrees_with_jsonschema_on_the_shorthand(spec: Any, value: Any) -> None:
    schema = to_json_schema(spec)
    expected = _jsonschema_says(value, schema)
    assert (violation(value, schema) is None) == expected, (schema, value)
    quick = _quick(schema)
    assert quick is not None  # every shorthand has a quick check
    if quick(value):
        assert expected, (schema, value)


def test_the_quick_check_leaves_what_it_does_not_know_to_jsonschema() -> None:
    # An integral float is an integer to JSON Schema; True is no integer; a tuple is no array.
    assert violation(1.0, {"type": "integer"}) is None
    assert violation(True, {"type": "integer"}) is not None
    assert violation((1,), {"type": "array", "items": {"type": "integer"}}) is not None
    assert _quick({"type": "string", "pattern": "^a"}) is None
    assert violation("b", {"type": "string", "pattern": "^a"}) is not None


def test_a_problem_is_worded_as_before() -> None:
    schema = {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}
    assert violation({"question": 1}, schema) == "question: 1 is not of type 'string'"
    assert violation({}, schema) == "(root): 'question' is a required property"
    assert violation({"question": "q"}, schema) is None
