"""Outcome codes, their classes, redaction and the shape of ModelCallError."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from aqven.errors import AqvenError, AttemptError
from aqven.models import outcomes as oc
from aqven.models.outcomes import ModelCallError, outcome_class, redact


@pytest.mark.parametrize(
    "code",
    [
        "MODEL_RETRIES_EXHAUSTED",
        "MODEL_SCHEMA_MISMATCH",
        "MODEL_INVALID_JSON",
        "OUTPUT_SCHEMA_REJECTED",
        "MODEL_REFUSAL",
    ],
)
def test_model_failures_are_counted(code: str) -> None:
    assert outcome_class(code) == "model_failure"


@pytest.mark.parametrize(
    "code",
    [
        "PROVIDER_KEY_MISSING",
        "PROVIDER_ERROR",
        "PROVIDER_RATE_LIMITED",
        "MODEL_TIMEOUT",
        "MODEL_STREAM_STALLED",
        "CODE_ERROR",
        "CODE_TIMEOUT",
        "SIMULATOR_MISSING",
    ],
)
def test_infrastructure_errors_are_not_counted(code: str) -> None:
    assert outcome_class(code) == "infra"


def test_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError):
        outcome_class("CHECK_FAILED")
    assert oc.MODEL_FAILURE_CODES.isdisjoint(oc.INFRA_CODES)
    assert len(oc.ALL_CODES) == 13


def test_model_call_error_fields() -> None:
    err = ModelCallError(
        "PROVIDER_RATE_LIMITED",
        "rate limited",
        retryable=True,
        retry_after=2.5,
        provider_status=429,
        input_tokens=3,
        output_tokens=4,
        cost_usd=Decimal("0.001"),
        cost_source="openrouter_list",
        secrets=[],
    )
    assert isinstance(err, AttemptError) and isinstance(err, AqvenError)
    assert err.code == "PROVIDER_RATE_LIMITED" and err.outcome == "infra"
    assert err.retryable and err.retry_after == 2.5 and err.provider_status == 429
    data = err.to_dict()
    assert data["cost_usd"] == "0.001" and data["outcome"] == "infra"
    json.dumps(data)  # JSON-safe: money as a string


def test_redaction_of_known_and_key_shaped_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "plainsecretvalue42")
    text = "key plainsecretvalue42, auth Bearer abcdefghijklmnop, token sk-proj-ABCDEFGHIJKLMNOPQRST"
    out = redact(text)
    assert "plainsecretvalue42" not in out
    assert "abcdefghijklmnop" not in out
    assert "ABCDEFGHIJKLMNOPQRST" not in out
    err = ModelCallError("PROVIDER_ERROR", text, hint="plainsecretvalue42")
    assert "plainsecretvalue42" not in str(err) + repr(err) + json.dumps(err.to_dict())


def test_the_key_values_follow_the_environment_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """secret_values keeps its answer while the key variables stay the same: a key set, changed or unset is
    seen by the very next call (the answer is compared with the variables' raw values, not kept for a while)."""
    from aqven.models.outcomes import KEY_ENV_VARS, secret_values

    for name in KEY_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    assert secret_values() == [] and secret_values() == []
    monkeypatch.setenv("OPENAI_API_KEY", "first-key-123456")
    assert secret_values() == ["first-key-123456"]
    assert redact("a first-key-123456 b") == "a *** b"
    monkeypatch.setenv("OPENAI_API_KEY", "second-key-98765")
    assert secret_values() == ["second-key-98765"]
    assert redact("first-key-123456 second-key-98765") == "first-key-123456 ***"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a-much-longer-key-value")
    assert secret_values() == ["a-much-longer-key-value", "second-key-98765"]  # longest first
    monkeypatch.setenv("MY_OWN_KEY", "agent-own-key-000")
    assert "agent-own-key-000" in secret_values(["MY_OWN_KEY"]) and "agent-own-key-000" not in secret_values()
    monkeypatch.delenv("OPENAI_API_KEY")
    assert secret_values() == ["a-much-longer-key-value"]
