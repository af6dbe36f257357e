"""The suspect rule over simulated production traffic (SPEC O8, issue 25): no healthy
provider is ever suspect in 10,000 requests with realistic, differing base rates (three
seeds), and a provider that starts failing 30% of its replies for one reason is suspect
within a stated number of requests (tests/fixtures/passive_sim.py; bench/bench_passive.py
runs more seeds and rates)."""

from __future__ import annotations

import pytest

from routing.passive import Reason
from tests.fixtures.passive_sim import Defect, simulate

# a 30% defect on one of 14 providers is suspect within this many requests of all traffic
# (measured over seeds 0-19 by bench/bench_passive.py: median ~760-820, at most 1,317; the
# window's older clean replies dilute the new failures until about half of it is new)
DETECT_WITHIN = 1400


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_o8_clean_traffic_of_10000_requests_marks_no_provider_suspect(seed: int) -> None:
    """Fourteen healthy providers, load-balanced by price, each at its own base rates: no
    suspicion in 10,000 requests."""
    result = simulate(seed, requests=10_000)
    assert sum(result.served.values()) == 10_000 and len(result.served) == 14
    assert result.suspicions == []


@pytest.mark.parametrize("reason", [Reason.START, Reason.TOOL_CALL])
def test_o8_a_30_percent_defect_is_suspect_within_the_stated_requests(reason: Reason) -> None:
    """From request 3,000 one provider fails 30% of its replies for `reason`: it (and no
    other) is suspect within DETECT_WITHIN requests."""
    defect = Defect(provider=3, reason=reason, rate=0.3, from_request=3000)
    result = simulate(4, requests=6000, defect=defect)
    after = result.first_after(3000, "P3")
    assert after is not None and after <= DETECT_WITHIN, after
    assert {s.provider for _, s in result.suspicions} == {"P3"}
    assert {s.reason for _, s in result.suspicions} == {reason}
