"""Findings: the sealed verdict files of held-out series, FINDINGS.md, and whether a finding verifies."""

from __future__ import annotations

from aqven.research.findings.records import (
    FINDING_VERSION,
    FINDINGS_MD,
    finding_key,
    integrity_of,
    is_intact,
    read_findings,
    read_findings_md,
    seal_of,
    split_hash,
)
from aqven.research.findings.verify import Verifier, attempts_digest, verified_findings
from aqven.research.findings.writing import regenerate, render_findings_md, write_finding

__all__ = [
    "FINDINGS_MD",
    "FINDING_VERSION",
    "Verifier",
    "attempts_digest",
    "finding_key",
    "integrity_of",
    "is_intact",
    "read_findings",
    "read_findings_md",
    "regenerate",
    "render_findings_md",
    "seal_of",
    "split_hash",
    "verified_findings",
    "write_finding",
]
