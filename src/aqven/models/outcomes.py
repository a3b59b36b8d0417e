"""Outcome codes of a model call and the one error a failed call raises (DESIGN §5).

Two classes of failure:

* ``model_failure`` — the model itself failed the attempt (broken output after its retries, a refusal,
  a provider refusing the output schema). Counted in the metrics as a failure.
* ``infra`` — the attempt could not be judged (no key, provider down, rate limit, timeout, stalled
  response, broken project code, no simulator). Kept out of the metrics.

Every message that leaves this layer goes through `redact`, so an API key never reaches a trace, a log or
the database.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Final, Literal, get_args

from aqven.errors import AttemptError
from aqven.project import key_env
from aqven.project.providers import PROVIDERS

# ---- codes ----------------------------------------------------------------------------------------

MODEL_RETRIES_EXHAUSTED: Final = "MODEL_RETRIES_EXHAUSTED"
MODEL_SCHEMA_MISMATCH: Final = "MODEL_SCHEMA_MISMATCH"
MODEL_INVALID_JSON: Final = "MODEL_INVALID_JSON"
OUTPUT_SCHEMA_REJECTED: Final = "OUTPUT_SCHEMA_REJECTED"
MODEL_REFUSAL: Final = "MODEL_REFUSAL"

PROVIDER_KEY_MISSING: Final = "PROVIDER_KEY_MISSING"
PROVIDER_ERROR: Final = "PROVIDER_ERROR"
PROVIDER_RATE_LIMITED: Final = "PROVIDER_RATE_LIMITED"
MODEL_TIMEOUT: Final = "MODEL_TIMEOUT"
MODEL_STREAM_STALLED: Final = "MODEL_STREAM_STALLED"
CODE_ERROR: Final = "CODE_ERROR"
CODE_TIMEOUT: Final = "CODE_TIMEOUT"
SIMULATOR_MISSING: Final = "SIMULATOR_MISSING"

ModelFailureCode = Literal[
    "MODEL_RETRIES_EXHAUSTED",
    "MODEL_SCHEMA_MISMATCH",
    "MODEL_INVALID_JSON",
    "OUTPUT_SCHEMA_REJECTED",
    "MODEL_REFUSAL",
]
InfraCode = Literal[
    "PROVIDER_KEY_MISSING",
    "PROVIDER_ERROR",
    "PROVIDER_RATE_LIMITED",
    "MODEL_TIMEOUT",
    "MODEL_STREAM_STALLED",
    "CODE_ERROR",
    "CODE_TIMEOUT",
    "SIMULATOR_MISSING",
]
OutcomeCode = ModelFailureCode | InfraCode
OutcomeClass = Literal["model_failure", "infra"]
CostSource = Literal["provider", "openrouter_list", "genai_prices", "agent_price", "unknown"]

MODEL_FAILURE_CODES: Final[frozenset[str]] = frozenset(get_args(ModelFailureCode))
INFRA_CODES: Final[frozenset[str]] = frozenset(get_args(InfraCode))
ALL_CODES: Final[frozenset[str]] = MODEL_FAILURE_CODES | INFRA_CODES


def outcome_class(code: str) -> OutcomeClass:
    """``model_failure`` (counted in metrics) or ``infra`` (not counted); `ValueError` for an unknown code."""
    if code in MODEL_FAILURE_CODES:
        return "model_failure"
    if code in INFRA_CODES:
        return "infra"
    raise ValueError(f"unknown outcome code {code!r}")


# ---- secrets ------------------------------------------------------------------------------------

#: Environment variables that hold provider keys. Every agent's own `api_key_env` of a project this process loaded
#: is added (`aqven.project.key_env`), and a call may add more.
KEY_ENV_VARS: Final[tuple[str, ...]] = tuple(p.key_env for p in PROVIDERS.values() if p.key_env)

# Key-shaped tokens (sk-..., gsk_..., Bearer ...), masked even when they are not in the environment.
_KEY_PATTERN = re.compile(
    r"(?i)\b(bearer\s+)[A-Za-z0-9._\-]{8,}"
    r"|\b(sk|pk|rk|gsk|xai|csk)[-_][A-Za-z0-9._\-]{12,}"
)


def secret_values(extra_env: Iterable[str] = ()) -> list[str]:
    """The current values of every key variable (long enough to be a key), longest first."""
    global _LAST
    extra = tuple(n for n in extra_env if n)
    names = _key_names()
    raw = _raw_keys(names[1]) if not extra else None
    last = _LAST  # one read: another thread may replace it meanwhile
    if raw is not None and last[0] == raw:
        return list(last[1])
    wanted = {*names[0], *extra}
    values = sorted({v for n in wanted if (v := os.environ.get(n, "").strip()) and len(v) >= 6}, key=len, reverse=True)
    if raw is not None:
        _LAST = (raw, tuple(values))
    return values


# Every stored text and event payload is redacted, and each call read ~20 variables through os.environ (a
# fifth of an attempt's CPU on the lean path): the raw values are compared instead, read from the mapping
# os.environ keeps (its `_data`, bytes on POSIX; set and unset go through it), so a changed key is seen at once.
_Names = tuple[frozenset[str], tuple[str, ...], tuple[bytes, ...]]
_NAMES: _Names = (frozenset(), KEY_ENV_VARS, tuple(os.fsencode(n) for n in KEY_ENV_VARS))
_LAST: tuple[tuple[tuple[bytes, ...], tuple[bytes | None, ...]] | None, tuple[str, ...]] = (None, ())


def _key_names() -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    """The providers' key variables and the agents' (`api_key_env`), as text and as os.environ's raw keys."""
    global _NAMES
    agents = key_env.named()
    found = _NAMES
    if found[0] is not agents:
        names = (*KEY_ENV_VARS, *sorted(agents - set(KEY_ENV_VARS)))
        found = _NAMES = (agents, names, tuple(os.fsencode(n) for n in names))
    return found[1], found[2]


def _raw_keys(names: tuple[bytes, ...]) -> tuple[tuple[bytes, ...], tuple[bytes | None, ...]] | None:
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict) or os.name != "posix":
        return None  # elsewhere: read the variables every time
    return names, tuple(map(data.get, names))


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every known key value and every key-shaped token replaced by ``***``."""
    for value in secret_values() if secrets is None else secrets:
        if value:
            text = text.replace(value, "***")

    def _mask(m: re.Match[str]) -> str:
        return f"{m.group(1)}***" if m.group(1) else f"{m.group(2)}-***"

    return _KEY_PATTERN.sub(_mask, text)


def redact_value(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """`redact` applied to every string inside a JSON-like value (for event payloads)."""
    keys = list(secret_values() if secrets is None else secrets)
    if isinstance(value, str):
        return redact(value, keys)
    if isinstance(value, dict):
        return {str(k): redact_value(v, keys) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, keys) for v in value]
    return value


# ---- the error ----------------------------------------------------------------------------------


class ModelCallError(AttemptError):
    """A model call that ended without an output, classified per DESIGN §5.

    `provider_status` is the provider's HTTP status when there was one (429, 500...). It is not named
    `http_status`, which `AqvenError` keeps for the status a REST surface would answer with.
    Tokens and cost are what the failed call used before it failed (retries included), when known.
    """

    code: str = PROVIDER_ERROR

    def __init__(
        self,
        code: OutcomeCode,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        provider_status: int | None = None,
        hint: str = "",
        input_tokens: int = 0,
        output_tokens: int = 0,
        requests: int = 0,
        cost_usd: Decimal | None = None,
        cost_source: CostSource = "unknown",
        model_name: str | None = None,
        simulated: bool = False,
        output_retries: int = 0,
        secrets: Iterable[str] | None = None,
    ) -> None:
        keys = list(secret_values() if secrets is None else secrets)
        self.outcome: OutcomeClass = outcome_class(code)
        self.retryable = retryable
        self.retry_after = retry_after
        self.provider_status = provider_status
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.requests = requests
        self.cost_usd = cost_usd
        self.cost_source: CostSource = cost_source
        self.model_name = model_name
        self.simulated = simulated
        self.output_retries = output_retries
        super().__init__(redact(message, keys), code=code, hint=redact(hint, keys), http_status=502)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.update(
            {
                "outcome": self.outcome,
                "retryable": self.retryable,
                "retry_after": self.retry_after,
                "provider_status": self.provider_status,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "requests": self.requests,
                "cost_usd": None if self.cost_usd is None else str(self.cost_usd),
                "cost_source": self.cost_source,
                "model_name": self.model_name,
                "simulated": self.simulated,
                "output_retries": self.output_retries,
            }
        )
        return out

    def __repr__(self) -> str:
        return f"ModelCallError(code={self.code!r}, outcome={self.outcome!r}, message={self.message!r})"
