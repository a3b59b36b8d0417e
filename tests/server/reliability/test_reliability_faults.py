"""Faults: a live series against a fake provider that injects each provider fault at ~10% (bench/soak/soak_faults.py).

Every attempt must be classified as DESIGN §5 says (counted model failure, infrastructure error, pass or
failed check), the 429 attempts must run once more at the end, and a series with more than 5%
infrastructure errors must end with verdict invalid (infra_errors). The long version is
`bench/soak/soak_faults.py` (400 attempts).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from support.fault_soak import FAULTS, run_fault_series


def test_every_fault_is_classified_and_the_series_is_invalid(tmp_path: Path) -> None:
    report = run_fault_series(tmp_path / "relia", cases=60, seed=7, concurrency=8, limit_s=90)
    print("\n".join(report.lines()))
    # every fault kind was injected at least once, and some answers were right and some wrong
    assert set(FAULTS) | {"right", "wrong"} <= set(report.provider_kinds), report.provider_kinds
    assert report.mismatches == []
    codes = set(report.codes)
    assert {c for _o, c in FAULTS.values() if c != "PROVIDER_RATE_LIMITED"} | {"CHECK_FAILED"} <= codes
    assert report.reruns >= 1 and report.reruns_at_end  # 429 attempts ran once more, at the end
    if report.provider_kinds["429"] > report.reruns:  # some re-run was rate limited again: it counts as such
        assert "PROVIDER_RATE_LIMITED" in codes
    assert report.status == "done"
    assert report.infra_share > 0.05
    assert (report.verdict, report.reason) == ("invalid", "infra_errors")
    # every 200 answer carried the provider's own cost: the series spent exactly what the provider billed
    assert Decimal(report.spend_usd) == Decimal(report.run_cost_usd) == Decimal(report.provider_cost_usd)
