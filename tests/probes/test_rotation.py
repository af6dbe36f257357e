"""Contracts rotated across rounds for the budget (SPEC C13), pure: which single-request
contract each endpoint gets in turn, enough start samples for the start contract, and the
judge, which marks what was not sent `rotated_out` instead of skipping it."""

from __future__ import annotations

from ground.settings import ProbeConfig
from probes.rotation import (
    ROTATED_OUT,
    judge_rotated,
    rotated_contracts,
    rotated_requests,
    rotated_start_samples,
    tool_requests,
)
from probes.types import Contract, Endpoint, OutcomeStatus, Transcript

CONFIG = ProbeConfig()
STRUCTURED = Endpoint(model_id="m/x", tag="s/fp8", provider_name="S",
                      supported_parameters=("response_format",))  # fmt: skip
PLAIN = Endpoint(model_id="m/x", tag="p/fp8", provider_name="P")
REPLY = "*She smiles and sets the lantern down.* The road ahead is quiet tonight, traveller."


def _t(endpoint: Endpoint, contract: Contract, text: str = REPLY) -> Transcript:
    return Transcript(
        request_id="r", model_id="m/x", tag=endpoint.tag, pinned_provider=endpoint.provider_name,
        served_by=endpoint.provider_name, contract=contract, locale="en", http_status=200,
        ttft_s=0.1, text=text, finish_reason="stop", done=True,
    )  # fmt: skip


def test_c13_each_endpoint_gets_one_single_contract_in_turn_staggered_across_endpoints() -> None:
    """Round after round an endpoint cycles through its single-request contracts (structured
    only where advertised); neighbours are one step apart, so a round covers them all."""
    turns = [rotated_contracts(STRUCTURED, 0, index) for index in range(3)]
    assert turns == [{Contract.LANGUAGE}, {Contract.REFUSAL}, {Contract.STRUCTURED}]
    assert [rotated_contracts(PLAIN, 0, i) for i in range(2)] == [
        {Contract.LANGUAGE},
        {Contract.REFUSAL},
    ]
    assert rotated_contracts(STRUCTURED, 1, 0) == {Contract.REFUSAL}


def test_c13_a_failing_contract_is_sent_again_on_top_of_the_turn() -> None:
    """A host failing a contract in its current streak is probed on it every rotated round,
    so it is decided at its next round."""
    assert rotated_contracts(STRUCTURED, 0, 0, failing=("structured",)) == {
        Contract.LANGUAGE,
        Contract.STRUCTURED,
    }


def test_c13_enough_start_samples_for_the_start_contract() -> None:
    """With a text single the minimum start samples leave C9 its minimum replies; with only
    the structured probe one more start sample is sent."""
    minimum = 2
    assert rotated_start_samples({Contract.LANGUAGE}, minimum, CONFIG) == 2
    assert rotated_start_samples({Contract.STRUCTURED}, minimum, CONFIG) == 3
    assert rotated_requests({Contract.STRUCTURED}, 3) == 4


def test_c13_what_a_rotated_round_did_not_send_is_unjudged_not_skipped() -> None:
    """The judge gives every single contract an outcome: those sent are judged as in a full
    probe set, the others are inconclusive `rotated_out`; latency and start are judged on
    the replies sent."""
    sent = [_t(STRUCTURED, Contract.REFUSAL), *(_t(STRUCTURED, Contract.START) for _ in range(2))]
    result = judge_rotated(STRUCTURED, "en", sent, CONFIG, {Contract.REFUSAL})
    statuses = {c: (o.status, o.reason) for c, o in result.outcomes.items()}
    assert statuses[Contract.REFUSAL] == (OutcomeStatus.PASS, "answered")
    assert statuses[Contract.LANGUAGE] == (OutcomeStatus.INCONCLUSIVE, ROTATED_OUT)
    assert statuses[Contract.STRUCTURED] == (OutcomeStatus.INCONCLUSIVE, ROTATED_OUT)
    assert statuses[Contract.LATENCY][0] is OutcomeStatus.PASS
    assert statuses[Contract.START][0] is OutcomeStatus.PASS and len(result.reply_outcomes) == 3
    plain = judge_rotated(PLAIN, "en", [_t(PLAIN, Contract.LANGUAGE)], CONFIG, {Contract.LANGUAGE})
    assert plain.outcomes[Contract.STRUCTURED].status is OutcomeStatus.UNSUPPORTED


def test_c10_c12_a_rotated_round_rotates_tools_out_unless_failing_and_judges_the_stream() -> None:
    """Issue 22: the tools contract (26 requests) is rotated out of a rotated round, unless
    the host is failing it (then every tool request is sent and counted); it is unsupported
    where not advertised; the stream is judged on the replies sent."""
    tools = Endpoint(model_id="m/x", tag="t/fp8", provider_name="T", supported_parameters=("tools",))  # fmt: skip
    assert Contract.TOOLS not in rotated_contracts(tools, 0, 0)
    chosen = rotated_contracts(tools, 0, 0, failing=("tools",))
    assert Contract.TOOLS in chosen and Contract.TOOLS not in rotated_contracts(PLAIN, 0, 0, failing=("tools",))  # fmt: skip
    assert rotated_requests(chosen, 2, tool_requests(CONFIG)) == 2 + 1 + 26
    sent = [_t(tools, Contract.LANGUAGE), *(_t(tools, Contract.START) for _ in range(2))]
    result = judge_rotated(tools, "en", sent, CONFIG, {Contract.LANGUAGE})
    assert (result.outcomes[Contract.TOOLS].status, result.outcomes[Contract.TOOLS].reason) == (OutcomeStatus.INCONCLUSIVE, ROTATED_OUT)  # fmt: skip
    assert result.outcomes[Contract.STREAM].status is OutcomeStatus.PASS
    plain = judge_rotated(PLAIN, "en", sent, CONFIG, {Contract.LANGUAGE})
    assert plain.outcomes[Contract.TOOLS].status is OutcomeStatus.UNSUPPORTED
