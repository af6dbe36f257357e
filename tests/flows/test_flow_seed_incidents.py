"""The canary round end to end on the seed-incidents fleet (C1-C9, Q1, Q2, O1):
real HTTP to the fleet, real Prefect API (test harness), real SQLite ledger."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from flows.canary_round import RoundSummary, canary_round
from flows.roundplan import next_slot_with_locale
from ground.settings import DEFAULT_LOCALES, load_settings
from quarantine.adapters.ledger import Ledger
from tests.fixtures.canary_env import SEED_MODEL
from tests.fixtures.fleet import FleetHandle

# defective host -> what its failing reasons must mention
DEFECTIVE = {
    "startcorrupt/fp8": ("start:stray_start",),
    "mixhost/fp8": ("language:language_mixing",),
    "slowpoke/bf16": ("latency:no_first_token",),
    "policywall/fp8": ("refusal:",),
    "schemabreak/fp8": ("structured:",),
    "mojibake/fp8": ("encoding_corruption",),
    "toolparse/fp8": ("tools:as_text",),  # issue 22: its tool parser leaks <tool_call> markup
}
NEVER_SUSPENDED = {"flaky/fp8", "nostruct/bf16"}
# two rounds to suspend, two more in which the suspended hosts keep failing (never suspended
# twice) and every healthy and the flaky host stay in; that a healthy host never fails is
# shown at the probe sets' level over 20 sets in all locales
# (tests/probes/test_probeset_fleet.py), that transport never counts and one bad round is
# never enough by the pure policy (tests/quarantine/test_policy.py, Q1 and Q2)
ROUNDS = 4


@pytest.mark.slow
async def test_c1_c9_q1_q2_seed_incidents_over_4_enforce_rounds(canary_env: FleetHandle) -> None:
    """Each defective host is suspended after exactly its second failing round, with the
    right reason; the flaky host and every healthy host stay in; probes were pinned."""
    tags = [e["tag"] for e in canary_env.scenario()["models"][0]["endpoints"]]
    start = next_slot_with_locale(
        tags, DEFAULT_LOCALES, "mixhost/fp8", "pt-BR", datetime(2026, 11, 1, tzinfo=UTC)
    )
    assert start is not None
    failing_rounds: dict[str, int] = defaultdict(int)
    suspended_at_failure: dict[str, int] = {}
    reasons: dict[str, set[str]] = defaultdict(set)
    summaries: list[RoundSummary] = []
    for n in range(ROUNDS):
        summary = await canary_round(
            model=SEED_MODEL, mode="enforce", at=start + timedelta(minutes=30 * n)
        )
        assert isinstance(summary, RoundSummary)
        summaries.append(summary)
        for tag, _locale, verdict, why in summary.endpoints:
            if verdict == "failed":
                failing_rounds[tag] += 1
                reasons[tag].add(why)
        for d in summary.decisions:
            if d["kind"] == "suspended":
                assert d["tag"] not in suspended_at_failure, f"{d['tag']} suspended twice"
                suspended_at_failure[d["tag"]] = failing_rounds[d["tag"]]

    for tag, expected in DEFECTIVE.items():
        assert suspended_at_failure.get(tag) == 2, (tag, failing_rounds[tag], reasons[tag])
        joined = " ".join(reasons[tag])
        assert any(e in joined for e in expected), (tag, reasons[tag])
    wrongly = set(suspended_at_failure) - set(DEFECTIVE)
    assert not wrongly, f"healthy/flaky hosts suspended: {wrongly}"
    assert NEVER_SUSPENDED.isdisjoint(suspended_at_failure)
    assert "filterctl/fp8" not in {t for s in summaries for t, *_ in s.endpoints}  # control

    final_ignore = {e["tag"]: e for e in summaries[-1].ignore}
    assert set(final_ignore) == set(DEFECTIVE)
    assert all(e["layer"] == "canary" for e in final_ignore.values())

    # C2: every probe request was pinned to one endpoint with fallbacks off
    log = canary_env.requests()
    assert len(log) >= ROUNDS * len(tags) * 3
    for entry in log:
        provider = entry["body"]["provider"]
        assert provider["allow_fallbacks"] is False
        assert provider["only"] == [entry["tag"]], entry

    # the ledger holds one row per endpoint per round and one per decision
    ledger = Ledger(load_settings().resolved_ledger_url)
    probes = ledger.probes_frame(SEED_MODEL)
    decisions = ledger.decisions_frame(SEED_MODEL)
    ledger.close()
    assert len(probes) == ROUNDS * (len(tags) - 1)
    assert set(decisions[decisions.kind == "suspended"].tag) == set(DEFECTIVE)
