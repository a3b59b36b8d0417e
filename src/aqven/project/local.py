"""Settings local to one computer: `.aqven/local.yaml` (never in git) and environment variables."""

from __future__ import annotations

import os
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, field_validator

from aqven.errors import ProjectError
from aqven.project.money import cap_field
from aqven.project.paths import state_dir

TRUTHY = {"1", "true", "yes", "on"}


class LocalResearch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spend_cap_usd: Decimal | None = None

    @field_validator("spend_cap_usd", mode="before")
    @classmethod
    def _money(cls, v: Any) -> Decimal | None:
        return None if v is None else cap_field(v)  # the one grammar of a cap (aqven.project.money)


class LocalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    simulate: bool = False
    sim_latency_scale: float | None = None
    research: LocalResearch = LocalResearch()
    store: str | None = None  # postgresql://… or sqlite:PATH (aqven.store.location); none: .aqven/aqven.sqlite


def read_local(root: Path) -> LocalSettings:
    path = state_dir(root) / "local.yaml"
    if not path.is_file():
        return LocalSettings()
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return LocalSettings.model_validate(data)
    except (yaml.YAMLError, ValueError, AttributeError, InvalidOperation) as exc:
        raise ProjectError(
            f"cannot read .aqven/local.yaml: {exc}".splitlines()[0],
            code="E_LOCAL_SETTINGS",
            file=".aqven/local.yaml",
            hint="keys: simulate, sim_latency_scale, research.spend_cap_usd, store",
        ) from None


_scale_cache: dict[tuple[str, float], float | None] = {}


def sim_latency_scale(root: Path) -> float:
    """How simulated latency is scaled: AQVEN_SIM_LATENCY_SCALE, else local.yaml's sim_latency_scale, else 1."""
    raw = os.environ.get("AQVEN_SIM_LATENCY_SCALE", "").strip()
    if raw:
        try:
            value = float(raw)
            return value if value >= 0 else 1.0
        except ValueError:
            return 1.0
    path = state_dir(root) / "local.yaml"
    try:
        key = (str(path), path.stat().st_mtime)
    except OSError:
        return 1.0
    if key not in _scale_cache:
        try:
            _scale_cache[key] = read_local(root).sim_latency_scale
        except ProjectError:
            _scale_cache[key] = None
    scale = _scale_cache[key]
    return 1.0 if scale is None or scale < 0 else scale


def simulate_enabled(root: Path, flag: bool = False) -> bool:
    """Simulated mode: per command (flag), per shell (AQVEN_SIMULATE=1) or per computer (local.yaml)."""
    if flag or os.environ.get("AQVEN_SIMULATE", "").strip().lower() in TRUTHY:
        return True
    return read_local(root).simulate


def spend_cap(root: Path, project_cap: Decimal | None) -> tuple[Decimal, Literal["project", "override", "default"]]:
    """The project spend cap and where it came from."""
    override = read_local(root).research.spend_cap_usd
    if override is not None:
        return override, "override"
    if project_cap is not None:
        return project_cap, "project"
    return Decimal("1.00"), "default"
