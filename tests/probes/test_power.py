"""The smallest start-sample count a degraded round may use (SPEC C13, C9): the smallest at
which the seed's 19/20 host is still suspended at its second round with 95%, computed
exactly (`probes/power.py`, the machinery of `bench/bench_peer_power.py`)."""

from __future__ import annotations

from ground.settings import BudgetConfig, ProbeConfig
from probes.power import min_start_samples, suspended_at_second_round

CONFIG = ProbeConfig()


def test_c13_the_minimum_start_samples_is_computed_for_the_seeds_cases() -> None:
    """The incident as written (14 healthy peers) needs 1 start sample; the seed-incidents
    fleet (20 healthy peers and the mojibake host, anomalous on every reply) needs 2. The
    budget's default minimum is the larger, so a degraded round still catches the host the
    fleet's tests and demo show at its second round."""
    incident = min_start_samples(CONFIG)
    fleet = min_start_samples(CONFIG, peers=20, anomalous_peers=1)
    assert (incident, fleet) == (1, 2)
    assert incident is not None and fleet is not None
    assert BudgetConfig().min_start_samples == max(incident, fleet)
    at_minimum = suspended_at_second_round(2, CONFIG, peers=20, anomalous_peers=1)
    below = suspended_at_second_round(1, CONFIG, peers=20, anomalous_peers=1)
    assert at_minimum >= 0.95 > below
    print(f"\nsuspended at the 2nd round, seed-incidents fleet: 1 start sample {below:.3f}, "
          f"2 start samples {at_minimum:.3f}")  # fmt: skip


def test_c9_the_default_six_start_samples_catch_the_seed_host_almost_surely() -> None:
    """At the default six start samples the 19/20 host is suspended at its second round
    with more than 99.9% (README: power)."""
    assert suspended_at_second_round(CONFIG.start_samples, CONFIG) > 0.999
