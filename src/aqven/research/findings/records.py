"""Finding files: the verdict of a held-out series, written once, sealed, and read back.

A finding file carries an integrity hash of its own canonical content, a digest of the attempt records it rests
on, and a seal: an HMAC of its content keyed by a secret the project server keeps in `.aqven/finding.key` (not in
git). Recomputing the integrity hash after an edit is easy; forging the seal needs the key, and on the machine
that holds the series `aqven check` recomputes the verdict from the stored attempts too
(`research/findings/verify.py`: E_FINDING_TAMPERED). FINDINGS.md is generated only from findings that verify.
Both files are written to temporary files first and then renamed; a crash between the renames leaves a stale
FINDINGS.md, which the next server start regenerates.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

import yaml

from aqven.project.paths import state_dir, within

FINDINGS_MD = "FINDINGS.md"
FINDING_VERSION = 2  # written into every finding; 2: sealed (seal, evidence, reads, judge, split)
SEALED_FROM = 2  # findings of this version on carry a seal and evidence: one without is tampered with
KEY_FILE = "finding.key"
SEAL_PREFIX = "hmac-sha256:"
_NOT_CONTENT = ("integrity", "seal")


def canonical(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k not in _NOT_CONTENT}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def integrity_of(data: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical(data).encode()).hexdigest()


def split_hash(package: str | None) -> str | None:
    """The salt of the dev/holdout split, hashed (a finding records it; the package name itself is in aqven.yaml)."""
    if package is None:
        return None
    return "sha256:" + hashlib.sha256(f"aqven-split\0{package}".encode()).hexdigest()


def key_path(root: Path) -> Path:
    return state_dir(root) / KEY_FILE


def finding_key(root: Path, *, create: bool = False) -> bytes | None:
    """The project's sealing secret, from `.aqven/finding.key` (created on the first finding when asked: 32
    random bytes, readable by the owner only, and `.aqven/` kept out of git). None when there is none."""
    path = key_path(root)
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        if not create:
            return None
    except (OSError, ValueError):
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# the project database and the findings' sealing key: never in git\n*\n", encoding="utf-8")
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(key.hex() + "\n")
    return key


def seal_of(data: dict[str, Any], key: bytes) -> str:
    return SEAL_PREFIX + hmac.new(key, canonical(data).encode(), hashlib.sha256).hexdigest()


def seal_matches(data: dict[str, Any], key: bytes) -> bool:
    found = data.get("seal")
    return isinstance(found, str) and hmac.compare_digest(found, seal_of(data, key))


def seal(data: dict[str, Any], key: bytes | None = None) -> dict[str, Any]:
    out = dict(data)
    out["integrity"] = integrity_of(out)
    if key is not None:
        out["seal"] = seal_of(out, key)
    return out


def is_intact(data: dict[str, Any]) -> bool:
    return isinstance(data, dict) and data.get("integrity") == integrity_of(data)


def finding_path(root: Path, experiment_id: str, series_id: str) -> Path:
    return root / "experiments" / experiment_id / "findings" / f"{series_id}.yaml"


def dump_finding(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def read_findings(root: Path) -> list[tuple[Path, dict[str, Any] | None]]:
    """Every finding file under experiments/*/findings/, parsed (None when it is not readable YAML, or when it
    is a link that leaves the project: such a file is never read)."""
    out: list[tuple[Path, dict[str, Any] | None]] = []
    for path in sorted((root / "experiments").glob("*/findings/*.yaml")):
        if not within(root, path):
            out.append((path, None))
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            data = None
        out.append((path, data if isinstance(data, dict) else None))
    return out


def read_findings_md(root: Path) -> str | None:
    """FINDINGS.md's text; None when there is none, or when it is a link that leaves the project (not read)."""
    md = root / FINDINGS_MD
    if not md.is_file() or not within(root, md):
        return None
    return md.read_text(encoding="utf-8")


def atomic_write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp
