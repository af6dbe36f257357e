"""Issue 22 end to end: canary rounds on the fleet's contracts-zoo (C9-C12, Q2) with real HTTP
to the fleet, Prefect's real API (test harness) and a real SQLite ledger: one host per new
defect kind, nine healthy hosts (one streams reasoning, one has no tools), enforce mode."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from fleet.scenario import load_scenario
from flows.canary_round import RoundSummary, canary_round
from ground.settings import load_settings
from reports.build import read_ledger
from reports.frames import endpoint_history
from tests.fixtures.canary_env import TIME_SCALE
from tests.fixtures.fleet import FleetHandle

# the zoo's endpoints under a model of their own: the test harness's Prefect state lives for
# the session, and seed-incidents' rounds of the llama model must not meet these ones
ZOO_MODEL = "canary-tests/contracts-zoo"

# defective host -> the reason it must be suspended for
DEFECTIVE = {
    "toolxml/fp8": "tools:as_text",
    "toolmistral/fp8": "tools:as_text",
    "toolkimi/fp8": "tools:as_text",
    "toolargs/fp8": "tools:bad_arguments",
    "toolschema/fp8": "tools:bad_arguments",
    "toolname/fp8": "tools:unknown_name",
    "toolsignored/fp8": "tools:ignored",
    "nonecaller/fp8": "tools:choice_none_violated",
    "resultblind/fp8": "tools:result_ignored",
    "thinkleak/fp8": "start:reasoning_leak",
    "bpe/fp8": "start:bpe_markers",
    "escapes/fp8": "start:literal_escapes",
    "buffered/fp8": "stream:buffered",
    "crawler/fp8": "stream:slow_output",
    "swapped/fp8": "stream:served_model_mismatch",
}
HEALTHY = {"deepinfra/fp8", "together/fp8", "fireworks/fp8", "lambda/bf16", "nebius/fp8",
           "parasail/fp8", "groq/fp16", "thinker/bf16", "notools/bf16"}  # fmt: skip
ROUNDS = 4


@pytest.mark.slow
async def test_c9_c12_contracts_zoo_each_defect_suspended_at_its_second_failing_round(
    canary_env: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each host of an issue-22 defect kind is suspended at its second failing round with its
    reason; no healthy host is suspended, fails or is flagged; the ledger's history says
    what was wrong in words. The stream bounds are scaled to the fleet's time scale (0.25):
    the buffered host's silence is ~1.8 s, so the first-token bar is 3 s and the buffered
    bound 0.9 s; slow output is enforced (evidence only by default)."""
    zoo = load_scenario("contracts-zoo").model_dump(mode="json", by_alias=True, exclude_none=True)
    zoo["models"][0]["id"] = ZOO_MODEL
    canary_env.load(zoo, time_scale=TIME_SCALE, seed=0)
    monkeypatch.setenv("CANARY_PROBE__TTFT_THRESHOLD_S", "3.0")
    monkeypatch.setenv("CANARY_PROBE__STREAM_BUFFERED_MIN_S", "0.9")
    monkeypatch.setenv("CANARY_PROBE__SLOW_OUTPUT_ENFORCE", "true")
    # 35 requests per endpoint (26 of them tools): four probe sets at a time keep the fleet's
    # one process (on a shared 2-core machine) from queueing healthy first tokens past the bar
    monkeypatch.setenv("CANARY_PROBE__CONCURRENCY", "4")
    tags = {e["tag"] for e in canary_env.scenario()["models"][0]["endpoints"]}
    assert tags == set(DEFECTIVE) | HEALTHY
    start = datetime(2026, 11, 2, tzinfo=UTC)
    failing_rounds: dict[str, int] = defaultdict(int)
    suspended_at: dict[str, int] = {}
    reasons: dict[str, set[str]] = defaultdict(set)
    for n in range(ROUNDS):
        summary = await canary_round(
            model=ZOO_MODEL, mode="enforce", at=start + timedelta(minutes=30 * n)
        )
        assert isinstance(summary, RoundSummary)
        for tag, _locale, verdict, why in summary.endpoints:
            if verdict == "failed":
                failing_rounds[tag] += 1
                reasons[tag].update(why.split(", "))
        assert not (set(summary.ignored) & HEALTHY), summary.ignored
        for d in summary.decisions:
            if d["kind"] == "suspended":
                suspended_at[d["tag"]] = failing_rounds[d["tag"]]
    for tag, reason in DEFECTIVE.items():
        assert suspended_at.get(tag) == 2, (tag, failing_rounds[tag], reasons[tag])
        assert reason in reasons[tag], (tag, reasons[tag])
    assert not HEALTHY & set(failing_rounds), {t: reasons[t] for t in HEALTHY & set(failing_rounds)}  # fmt: skip

    probes, decisions = read_ledger(load_settings().resolved_ledger_url, ZOO_MODEL, start)
    history = endpoint_history(probes, decisions, "toolkimi/fp8")
    assert history["evidence"].str.contains("<|tool_call", regex=False).any()
    history = endpoint_history(probes, decisions, "swapped/fp8")
    assert history["evidence"].str.contains("meta-llama/llama-3.1-8b-instruct").any()
