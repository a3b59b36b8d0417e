"""Findings: the verdict of a held-out series, written once, and FINDINGS.md regenerated from all of them.

A finding file carries an integrity hash of its own canonical content, a digest of the attempt records it rests
on, and a seal: an HMAC of its content keyed by a secret the project server keeps in `.aqven/finding.key` (not in
git). Recomputing the integrity hash after an edit is easy; forging the seal needs the key, and on the machine
that holds the series `aqven check` recomputes the verdict from the stored attempts too
(`research/findings/verify.py`: E_FINDING_TAMPERED). FINDINGS.md is generated only from findings that verify.
Both files are written to temporary files first and then renamed; a crash between the renames leaves a stale
FINDINGS.md, which the next server start regenerates.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from aqven.project.paths import rel, within

FINDINGS_MD = "FINDINGS.md"
FINDING_VERSION = 2  # 2: sealed (seal, evidence, reads, judge, split)
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
    from aqven.project.paths import state_dir

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


def _dump(data: dict[str, Any]) -> str:
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


def _atomic_write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def write_finding(root: Path, data: dict[str, Any]) -> Path:
    """Write a sealed finding and the regenerated FINDINGS.md together; a finding is written once."""
    path = finding_path(root, data["experiment_id"], data["series_id"])
    if path.exists():
        return path
    sealed = seal(data, finding_key(root, create=True))
    tmp_finding = _atomic_write(path, _dump(sealed))
    others = [(p, d) for p, d in read_findings(root) if p != path]
    md = render_findings_md(root, [*others, (path, sealed)], trusted=path)
    tmp_md = _atomic_write(root / FINDINGS_MD, md)
    os.replace(tmp_finding, path)
    os.replace(tmp_md, root / FINDINGS_MD)
    return path


def regenerate(root: Path) -> bool:
    """Rewrite FINDINGS.md from the finding files when it does not match them; True when it changed.

    Run on server start, before any series is driven: temporary files a crash left behind are removed too.
    """
    for leftover in [root / f".{FINDINGS_MD}.tmp", *(root / "experiments").glob("*/findings/.*.yaml.tmp")]:
        with contextlib.suppress(OSError):
            leftover.unlink()
    text = render_findings_md(root, read_findings(root))
    md = root / FINDINGS_MD
    current = read_findings_md(root)
    if current == text or (current is None and not read_findings(root)):
        return False
    os.replace(_atomic_write(md, text), md)
    return True


SHELVES = (
    ("On holdout cases", ("confirmed", "refuted")),
    ("Inconclusive", ("inconclusive",)),
    ("Signals", ("signal",)),
)


Verified = Callable[[Path, dict[str, Any]], bool]


def render_findings_md(
    root: Path,
    findings: list[tuple[Path, dict[str, Any] | None]],
    *,
    verified: Verified | None = None,
    trusted: Path | None = None,
) -> str:
    """FINDINGS.md from the findings that verify (`verified`, by default research/findings/verify.py; `trusted`
    is the one being written now): a section per failure_mode, with the shelves On holdout cases, Inconclusive
    and Signals, then every held-out read of each experiment."""
    if verified is None:
        from aqven.research.findings.verify import Verifier

        verifier = Verifier(root)
        try:
            ok = {p: p == trusted or verifier.verify(p, d).ok for p, d in findings if d}
        finally:
            verifier.close()
    else:
        ok = {p: p == trusted or verified(p, d) for p, d in findings if d}
    valid = [(p, d) for p, d in findings if d and ok.get(p)]
    by_mode: dict[str, list[tuple[Path, dict[str, Any]]]] = defaultdict(list)
    for path, data in valid:
        by_mode[str(data.get("failure_mode", "unspecified"))].append((path, data))
    # A finding counts every held-out series of its experiment on the same cases (spec: Working and held-out cases).
    series_count: dict[tuple[str, str], list[str]] = defaultdict(list)
    for _p, data in valid:
        series_count[same_cases_key(data)].append(data["verdict"]["verdict"])
    lines = [
        "# Findings",
        "",
        "What this project knows, from held-out series. Generated by AQVEN from "
        "`experiments/*/findings/*.yaml`; do not edit (`aqven check` reports a stale file).",
        "Read it before you propose a change. Lines marked *(simulated)* ran on simulated models.",
        "",
    ]
    if not valid:
        lines += ["No findings yet: a series on held-out cases writes the first one.", ""]
    for mode in sorted(by_mode):
        lines += [f"## {mode}", ""]
        for shelf, verdicts in SHELVES:
            items = [(p, d) for p, d in by_mode[mode] if d["verdict"]["verdict"] in verdicts]
            if not items:
                continue
            lines += [f"### {shelf}", ""]
            for path, data in sorted(
                items, key=lambda pd: (pd[1]["experiment_id"], pd[1]["scope"].get("ended_at", ""))
            ):
                lines.append(_line(root, path, data, series_count[same_cases_key(data)]))
            lines.append("")
    lines += _reads_section(valid)
    return "\n".join(lines).rstrip() + "\n"


def _reads_section(valid: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Every held-out read of each experiment, as its findings list them (the latest finding's word on a series
    wins): re-reading held-out cases shows here, cancelled reads included."""
    by_exp: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for _p, data in sorted(valid, key=lambda pd: str((pd[1].get("scope") or {}).get("ended_at", ""))):
        for read in data.get("reads") or []:
            if isinstance(read, dict) and read.get("series_id"):
                by_exp[str(data.get("experiment_id"))][str(read["series_id"])] = read
    if not by_exp:
        return []
    lines = [
        "## Held-out reads",
        "",
        "Every series of an experiment on held-out cases reads them: finished, cancelled or failed, and on how "
        "many cases. More than one read of the same cases is a re-read.",
        "",
    ]
    for exp in sorted(by_exp):
        reads = sorted(by_exp[exp].values(), key=lambda r: (str(r.get("started_at", "")), str(r["series_id"])))
        parts = []
        for r in reads:
            n = int(r.get("cases") or 0)
            verdict = f", {r['verdict']}" if r.get("verdict") else ""
            when = str(r.get("ended_at") or r.get("started_at") or "")[:10]
            parts.append(f"`{r['series_id']}` {r.get('status')}{verdict} on {n} case{'' if n == 1 else 's'} {when}")
        lines.append(f"- `{exp}`: {len(reads)} held-out read{'' if len(reads) == 1 else 's'} — " + "; ".join(parts))
    lines.append("")
    return lines


def same_cases_key(data: dict[str, Any]) -> tuple[str, str]:
    """(experiment, the cases it ran on): the hash of the case names, else the dataset and the number of cases."""
    scope = data.get("scope") or {}
    cases = scope.get("cases_hash") or f"{scope.get('dataset')}:{scope.get('tags')}:{scope.get('cases')}"
    return str(data.get("experiment_id")), str(cases)


def _line(root: Path, path: Path, data: dict[str, Any], verdicts: list[str]) -> str:
    scope = data.get("scope", {})
    sim = " *(simulated)*" if scope.get("simulated") else ""
    confirmed = sum(v == "confirmed" for v in verdicts)
    tally = (
        f" {confirmed} of {len(verdicts)} held-out series of this experiment on these cases confirmed."
        if len(verdicts) > 1
        else ""
    )
    when = str(scope.get("ended_at", ""))[:10]
    cases, repeats = scope.get("cases"), scope.get("repeats")
    return (
        f"- **{data['experiment_id']}**{sim}: “{data['verdict']['text']}” — {cases} case{'' if cases == 1 else 's'}"
        f" × {repeats} repeat{'' if repeats == 1 else 's'} of `{scope.get('dataset')}`, {when}.{tally} "
        f"[{data['series_id']}]({rel(root, path)})"
    )
