"""Issue 22, item 5: the tools defaults have the power stated (exact, probes/tool_power.py):
a host whose calls fail half the time is suspended at its second failing round, a healthy
host with one bad call in twenty is not."""

from __future__ import annotations

from ground.settings import ProbeConfig
from probes.tool_power import p_round

DEFAULTS = ProbeConfig()


def test_c10_half_bad_calls_suspended_at_the_second_round() -> None:
    """C10: at the defaults a host with 50% bad calls fails a round with >= 97.5% (so both of
    two rounds with >= 95%), against 14 or 6 clean peers."""
    for peers in (14, 6):
        p = p_round(0.5, DEFAULTS, peers=peers)
        assert p >= 0.975 and p * p >= 0.95, (peers, p)


def test_c10_one_bad_call_in_twenty_is_not_suspended() -> None:
    """C10: a host with 5% bad calls fails a round with < 2.5% (two in a row < 1e-3) even when
    its peers are perfect, and < 0.5% among peers like it."""
    p = p_round(0.05, DEFAULTS, peers=14)
    assert p < 0.025 and p * p < 1e-3, p
    assert p_round(0.05, DEFAULTS, peers=14, base=0.05) < 0.005


def test_c10_fewer_samples_would_miss_the_bar() -> None:
    """C10: the default is needed: with 8 forced calls the half-bad host is suspended at its
    second round with < 95%."""
    eight = DEFAULTS.model_copy(update={"tool_samples": 8})
    assert p_round(0.5, eight) ** 2 < 0.95
