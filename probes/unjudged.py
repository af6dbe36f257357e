"""Probe sets the canary cannot judge, as typed outcomes (pure).

    unjudged_set(endpoint, locale, exc)  a probe set that raised: every contract TRANSPORT,
                                         reason `invalid_response` (the exception's type
                                         name in the evidence, never its message)
    unjudged_outcomes(...)               the same for the language confirmations
    refused_everything(result)           a probe set whose every request ended in a 4xx
                                         other than a rate limit: no contract is clean

Both end in the round verdict `frozen` (quarantine/verdicts.py): one misbehaving provider,
or one reply our readers could not take, neither fails the round nor clears the endpoint.

Why `refused_everything` freezes: a 400/403/422 to every probe says the endpoint did not
serve the canary's requests at all, so each judge finds no text and concludes
`inconclusive`, and a round of only inconclusive contracts would read as clean and count
towards early reinstatement (Q5). Failures stay failures (a 403 moderation flag on the
refusal probe still fails it); everything else becomes TRANSPORT `http_4xx_only`.
401/402/404/408/429 are transport already (probes/transport.py).
"""

from __future__ import annotations

from probes.probeset import ProbeSetResult
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus

INVALID_RESPONSE = "invalid_response"
HTTP_4XX_ONLY = "http_4xx_only"


def _unjudged(contract: Contract, tag: str, locale: str, error: str) -> Outcome:
    return Outcome(
        contract=contract,
        status=OutcomeStatus.TRANSPORT,
        reason=INVALID_RESPONSE,
        tag=tag,
        locale=locale,
        evidence={"error": error[:80]},
    )


def unjudged_set(endpoint: Endpoint, locale: str, exc: BaseException) -> ProbeSetResult:
    """The probe set of `endpoint` when probing or judging it raised `exc`."""
    error = type(exc).__name__
    return ProbeSetResult(
        tag=endpoint.tag,
        locale=locale,
        outcomes={c: _unjudged(c, endpoint.tag, locale, error) for c in Contract},
    )


def unjudged_outcomes(
    endpoint: Endpoint, locale: str, exc: BaseException, attempts: int
) -> list[Outcome]:
    """Language confirmations that raised: `attempts` outcomes that do not vote."""
    error = type(exc).__name__
    return [_unjudged(Contract.LANGUAGE, endpoint.tag, locale, error) for _ in range(attempts)]


def _client_error(status: int | None) -> bool:
    return status is not None and 400 <= status < 500 and status != 429


def _refused(o: Outcome, statuses: list[int]) -> Outcome:
    if o.status is OutcomeStatus.FAIL:
        return o
    return o.model_copy(
        update={
            "status": OutcomeStatus.TRANSPORT,
            "reason": HTTP_4XX_ONLY,
            "evidence": {**o.evidence, "http_statuses": statuses, "was": o.reason},
        }
    )


def refused_everything(result: ProbeSetResult) -> ProbeSetResult:
    """`result` unchanged unless every request of the set ended in a 4xx other than 429;
    then every outcome that is not a failure becomes TRANSPORT `http_4xx_only`."""
    if not result.transcripts or not all(_client_error(t.http_status) for t in result.transcripts):
        return result
    statuses = sorted({t.http_status for t in result.transcripts if t.http_status is not None})
    outcomes = {contract: _refused(o, statuses) for contract, o in result.outcomes.items()}
    extra = [_refused(o, statuses) for o in result.extra_outcomes]
    return result.model_copy(update={"outcomes": outcomes, "extra_outcomes": extra})
