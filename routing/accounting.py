"""Per-request bookkeeping of the router: the request's running state and the
R10 records built from it (pure: data in, records out; `now` is passed in).

    RequestState      request and operation ids, contract, body, deadline, attempts so
                      far, cost so far, the providers it excluded per model (R13), and
                      the bookkeeping that may wait until its reply has left (`after_reply`)
    attempt_record    one AttemptRecord from an AttemptResult (cost estimated from the
                      route's prices when the upstream reported none; a cancelled hedge
                      loser is still billed for its prompt)
    request_record    the one RequestRecord at the end (prompt/output only as hashes)
    reply_tokens      a reply's (prompt, completion) tokens: reported, else estimated
    client_usage      the `usage` a client is told, its three token counts always filled
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from routing.attempt import AttemptResult
from routing.capability import estimate_needs
from routing.contracts import Contract
from routing.deadline import Deadline
from routing.records import AttemptRecord, RequestRecord, sha256_text
from routing.response import Completion
from routing.routes import Route


@dataclass
class RequestState:
    operation_id: str
    contract: Contract
    body: dict[str, Any]
    started: float
    deadline: Deadline
    stream: bool
    attempts: list[AttemptRecord] = field(default_factory=list)
    cost_usd: float = 0.0
    request_id: str | None = None  # the gateway's id of this HTTP request
    # model -> the tags of providers this request excluded after they served a failure
    excluded: dict[str, set[str]] = field(default_factory=dict)
    # None: outcomes are published at once. A list (`Router.admit(after_reply=True)`): an
    # accepted answer's verdict, metrics and events wait here until whoever sends the reply
    # runs them (`run_after_reply`), so a client never waits for the router's bookkeeping
    after_reply: list[Callable[[], None]] | None = None

    def excluded_for(self, model: str) -> set[str]:
        return self.excluded.get(model, set())

    def later(self, job: Callable[[], None]) -> None:
        """Run `job` once the reply has left when the request defers (see `after_reply`),
        else now."""
        if self.after_reply is None:
            job()
        else:
            self.after_reply.append(job)

    def run_after_reply(self) -> None:
        """Run what waited for the reply, in order, once (idempotent)."""
        jobs = self.after_reply
        if jobs:
            self.after_reply = []
            for job in jobs:
                job()


def attempt_record(
    req: RequestState,
    res: AttemptResult,
    *,
    waited_s: float,
    fallback_reason: str | None,
    circuit: str,
    cancelled: bool = False,
    hedged: bool = False,
) -> AttemptRecord:
    """Build the attempt's record; adds its cost to `req.cost_usd` and appends it to `req.attempts`."""
    comp = res.completion
    prompt_t, completion_t = comp.tokens()
    cost = comp.cost_usd
    if cost is None:
        billable = res.status_code == 200 or cancelled  # a cancelled loser may still bill
        if billable:
            prompt_t, completion_t = reply_tokens(req, comp)
        completion_t = completion_t or len(comp.content) // 4
        cost = res.route.estimate_cost(prompt_t, completion_t) if billable else 0.0
    req.cost_usd += cost
    c = res.classification
    index = len(req.attempts)
    validation = (
        None
        if cancelled
        else "accepted"
        if c is None
        else res.rejection.reason
        if res.rejection
        else None
    )
    b = res.budget
    record = AttemptRecord(
        operation_id=req.operation_id, attempt_id=f"{req.operation_id}.{index}", attempt_index=index,
        workload=req.contract.workload, route_id=res.route.id, model=res.route.model, provider=res.served_by,
        failure_class=None if c is None else c.failure_class.value, reason=None if c is None else c.reason,
        status_code=res.status_code, http_success=res.status_code == 200,
        latency_ms=(res.ended - res.started) * 1000, ttft_ms=None if res.ttft_s is None else res.ttft_s * 1000,
        prompt_tokens=prompt_t, completion_tokens=completion_t, cost_usd=cost, fallback_reason=fallback_reason,
        validation=validation, circuit_state=circuit, hedged=hedged, cancelled=cancelled, waited_s=waited_s,
        request_id=req.request_id, provider_tag=res.provider_tag,
        excluded=",".join(sorted(res.excluded_before)) or None,
        budget_ms=_ms(b.total_ms) if b else None, ttft_budget_ms=_ms(b.ttft_ms) if b else None,
        kept_ms=_ms(b.kept_ms) if b else None, passive=res.passive,
        malformed_events=comp.malformed_events,
    )  # fmt: skip
    req.attempts.append(record)
    return record


def reply_tokens(req: RequestState, comp: Completion) -> tuple[int, int]:
    """The reply's (prompt, completion) tokens as the upstream reported them (the upstream
    is always asked for usage: routing/upstream.py); one it did not report is estimated: the
    prompt from the request (`routing.capability.estimate_needs`), the completion at four
    characters a token. What an attempt is billed at without a reported cost, and what a
    client is told."""
    prompt_t, completion_t = comp.tokens()
    if not prompt_t:
        prompt_t = estimate_needs(req.contract, req.body).input_tokens
    return prompt_t, completion_t or len(comp.content) // 4


def client_usage(req: RequestState, comp: Completion) -> dict[str, Any]:
    """The `usage` a client gets: the upstream's, its `prompt_tokens`, `completion_tokens`
    and `total_tokens` always there (`reply_tokens`; a total the upstream did not report is
    their sum), never `{}`."""
    usage = dict(comp.usage or {})
    prompt_t, completion_t = reply_tokens(req, comp)
    usage["prompt_tokens"], usage["completion_tokens"] = prompt_t, completion_t
    total = usage.get("total_tokens")
    if isinstance(total, bool) or not isinstance(total, int) or total < prompt_t + completion_t:
        usage["total_tokens"] = prompt_t + completion_t
    return usage


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def request_record(
    req: RequestState,
    outcome: str,
    reason: str | None,
    route: Route | None,
    comp: Completion | None,
    *,
    now: float,
) -> RequestRecord:
    """The request-level record: outcome ("accepted" or a failure class), totals, hashes."""
    first = req.attempts[0].route_id if req.attempts else None
    return RequestRecord(
        operation_id=req.operation_id, workload=req.contract.workload, contract_version=req.contract.version,
        outcome=outcome, reason=reason, final_route=route.id if route else None,
        final_provider=comp.provider if comp else None, attempts=len(req.attempts),
        fallbacks=sum(1 for a in req.attempts if a.fallback_reason and (a.route_id != first or a.excluded)),
        latency_ms=(now - req.started) * 1000, cost_usd=req.cost_usd,
        prompt_sha256=sha256_text(req.body.get("messages")),
        output_sha256=sha256_text(comp.content) if comp is not None and outcome == "accepted" else None,
        stream=req.stream, request_id=req.request_id,
    )  # fmt: skip
