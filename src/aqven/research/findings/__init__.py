"""Findings: the sealed verdict files of held-out series, FINDINGS.md, and whether a finding verifies."""
