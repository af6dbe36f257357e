"""One attempt on one route: build the upstream body, call, classify, accept.

The router's loop decides *whether* and *where* to attempt; this module only
runs one attempt and reports what happened (`AttemptResult`). For streaming
workloads it holds the reply's start until the canary's response-start check
decides it (at its first word when it can: routing/start_gate.py), and hands the
still-open call back so tokens can be released.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from routing.acceptance import CUT, Accepted, accept
from routing.attribution import attribute, client_shaping
from routing.budget import Budget
from routing.classify import Classification, Rejection, classify, with_side_effects
from routing.continuation import PrefixStrip
from routing.contracts import Contract
from routing.deadline import AttemptBudget
from routing.errors import FailureClass as F
from routing.errors import SlowFirstToken
from routing.providers import Allowance
from routing.response import Completion
from routing.routes import Route
from routing.schemas import SchemaRegistry
from routing.start_gate import GatePhase, StartGate
from routing.upstream import Upstream, UpstreamCall
from wire.text import Scrubber, upstream_text

log = logging.getLogger(__name__)

# what a client may not set: the gateway owns model choice, routing and streaming (ignored)
_OWNED_KEYS = {"model", "models", "provider", "stream", "stream_options", "route", "transforms"}
# what the workload's contract owns: a client value would change what acceptance checks (its
# registered tools, one choice), so a request carrying one is refused (see `refused_keys`)
CONTRACT_KEYS = ("tools", "tool_choice", "functions", "function_call", "n")


def refused_keys(body: dict[str, Any]) -> list[str]:
    """The contract-owned keys a client set (nulls are harmless and allowed; `n` is checked
    with the other parameters, routing/params.py: only 1)."""
    return [k for k in CONTRACT_KEYS if k != "n" and body.get(k) is not None]


def client_truncated(body: dict[str, Any], completion: Completion) -> bool:
    """A `length` finish caused by the client's own max_tokens, not by the route: the client
    set a limit and the reply used all of it (or did not report usage). Pure."""
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if not isinstance(limit, int) or completion.finish_reason != "length":
        return False
    _, used = completion.tokens()
    return used == 0 or used >= limit


def upstream_body(
    body: dict[str, Any],
    route: Route,
    contract: Contract,
    schemas: SchemaRegistry,
    ignore: list[str],
) -> dict[str, Any]:
    """The request for one route: client body minus owned keys, plus model, provider, schema, tools."""
    out = {k: v for k, v in body.items() if k not in _OWNED_KEYS and k not in CONTRACT_KEYS}
    out["model"] = route.model
    provider = dict(route.provider)
    merged = sorted(set(provider.get("ignore", [])) | set(ignore))
    if merged:
        provider["ignore"] = merged
    provider.setdefault("allow_fallbacks", False)  # the router is the only retry owner (R3)
    if contract.structured_output.required or contract.requires_tools:
        provider.setdefault("require_parameters", True)
    if provider:
        out["provider"] = provider
    so = contract.structured_output
    if so.required and so.schema_id:
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": so.schema_id,
                "strict": so.strict,
                "schema": schemas[so.schema_id],
            },
        }
    if contract.tools:
        out["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in contract.tools
        ]
    return out


@dataclass
class AttemptResult:
    route: Route
    started: float
    ended: float = 0.0
    classification: Classification | None = None  # None = accepted (or start check passed)
    rejection: Rejection | None = None
    completion: Completion = field(default_factory=Completion)
    accepted: Accepted | None = None
    status_code: int | None = None
    ttft_s: float | None = None
    output_started: bool = False
    head: str = ""  # streaming: the buffered start, not yet sent to the client
    call: UpstreamCall | None = None  # streaming: still open, owned by the caller now
    rest: AsyncIterator[str] | None = None
    error_provider: str | None = None  # an error envelope's metadata.provider_name
    budget: Budget | None = None  # the attempt's budgets (R13)
    excluded_before: frozenset[str] = frozenset()  # tags the request had excluded by then
    ignore: tuple[str, ...] = ()  # the provider.ignore it was sent with (the route's aside)
    excludable: tuple[str, ...] | None = None  # tags that exclude who served it for the request
    allowance: Allowance | None = None  # what it was allowed to use (routing.providers.allowance)
    provider_tag: str | None = None  # the listing's tag of who served it, when one
    probes: tuple[str, ...] = ()  # provider circuits admitted half-open for this attempt
    client_params: tuple[str, ...] = ()  # output-shaping parameters the client set (attribution)
    passive: str | None = None  # what it says of its provider as evidence (routing/passive.py)

    @property
    def served_by(self) -> str | None:
        """Who served it: the reply's `provider`, else its error envelope's."""
        return self.completion.provider or self.error_provider


async def run_attempt(
    upstream: Upstream,
    body: dict[str, Any],
    route: Route,
    contract: Contract,
    schemas: SchemaRegistry,
    budget: AttemptBudget,
    *,
    stream_release: bool,
    clock: Callable[[], float] = time.monotonic,
    result: AttemptResult | None = None,
    client_params: tuple[str, ...] = (),
) -> AttemptResult:
    """Run one attempt within `budget`; never raises for upstream failures (they are classified).

    `result` may be passed in so a caller that cancels the attempt (hedging) still sees
    how far it got. `client_params`: the output-shaping parameters the client set
    (`routing.attribution.client_shaping` of its body); an acceptance rejection carries them."""
    res = result or AttemptResult(route=route, started=clock())
    res.client_params = client_params
    judge = _Judge(contract, schemas, body, client_params)

    async def read(call: UpstreamCall) -> bool:
        if stream_release:
            return await _check_start(res, call, judge, clock)
        async for _ in call.content():
            if res.ttft_s is None:
                res.ttft_s = clock() - res.started
        judge(res, call)
        return False

    return await _call(
        upstream, body, budget, res, read, clock=clock, side_effects=contract.side_effect_tools
    )


async def _call(
    upstream: Upstream,
    body: dict[str, Any],
    budget: AttemptBudget,
    res: AttemptResult,
    read: Callable[[UpstreamCall], Awaitable[bool]],
    *,
    clock: Callable[[], float],
    side_effects: bool = False,
) -> AttemptResult:
    """One upstream call within `budget`, the part every attempt shares: send it; an error
    status is classified, else `read` reads the reply into `res` (True when it hands the
    still-open call over in `res`). Every failure is classified, never raised (a read
    timeout after acceptance is ambiguous where tools have `side_effects`); the call is
    closed unless handed over."""
    call = upstream.call(body, budget)
    handed_over = False
    try:
        async with asyncio.timeout(budget.total_s):
            err = await call.start()
            res.status_code = call.status_code
            if err is not None:
                res.error_provider = err.provider_name
                res.classification = classify(err)
            else:
                handed_over = await read(call)
            return res
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # every failure is classified, the unforeseen ones included
        res.output_started = call.output_started
        res.classification = classify_unforeseen(exc, call.output_started, upstream.scrub)
        if side_effects:
            res.classification = with_side_effects(res.classification)
        return res
    finally:
        res.ended = clock()
        res.completion = call.assembler.completion
        res.output_started = res.output_started or call.output_started
        if not handed_over:
            await call.aclose()


async def _check_start(
    res: AttemptResult, call: UpstreamCall, judge: _Judge, clock: Callable[[], float]
) -> bool:
    """A streaming workload: hold the reply's start until the start check has settled the
    whole reply's start verdict (routing/start_gate.py: at the first word when it can, when
    the emphasis it opens with closes, within `HOLD_CHARS`), and at most the budget's
    `hold_s` after its first content (else a slow first token: the user's first token would
    be that late). True when the still-open call is handed over in `res` (`call`, `rest`)
    to release the rest; False when the attempt is judged here (the whole reply already
    came, or an empty or stray start)."""
    pieces = call.content()
    gate = StartGate(judge.contract.locale)
    hold = asyncio.timeout(None)
    try:
        async with hold:
            async for piece in pieces:
                if res.ttft_s is None:
                    res.ttft_s = clock() - res.started
                    if call.hold_s is not None:
                        hold.reschedule(asyncio.get_running_loop().time() + call.hold_s)
                res.head = gate.feed(piece)
                if gate.phase is not GatePhase.HOLDING:
                    break
    except TimeoutError:
        if not hold.expired():
            raise
        raise SlowFirstToken(
            f"the reply's start was not settled within {call.hold_s:.3f} s of its first content"
        ) from None
    return _after_start(res, call, judge, gate, pieces)


def _after_start(
    res: AttemptResult,
    call: UpstreamCall,
    judge: _Judge,
    gate: StartGate,
    pieces: AsyncIterator[str],
) -> bool:
    """`_check_start` once the gate has decided or the stream has ended."""
    completion = call.assembler.completion
    if completion.done or completion.error is not None:
        res.head = gate.head
        judge(res, call)  # the whole reply is here: full acceptance
        if res.classification is None:
            res.output_started = True
        return False
    if not gate.head.strip():
        res.completion = completion
        res.output_started = call.output_started
        res.rejection = Rejection("transport_incomplete", CUT)
        res.classification = Classification(
            _ambiguous_or_invalid(call), "stream_cut" if call.output_started else "empty_stream"
        )
        return False
    if gate.phase is GatePhase.HOLDING:  # cut before its start was decided: the gate judges
        gate.end()  # what came, as a whole reply
        res.head = gate.head
    kind = gate.kind
    if kind is not None:
        res.rejection = Rejection("stray_start", kind)
        res.classification = attribute(classify(res.rejection), judge.client_params)
        return False
    _release(res, call, pieces)
    return True


def _release(res: AttemptResult, call: UpstreamCall, rest: AsyncIterator[str]) -> None:
    """Hand the still-open call and the rest of its content over in `res` (to be relayed):
    the stall cut and the deadline still bound the stream (a stall is rescued by a
    continuation, R15)."""
    res.call, res.output_started, res.rest = call, True, rest


async def run_continuation(
    upstream: Upstream,
    body: dict[str, Any],
    budget: AttemptBudget,
    sent: str,
    *,
    result: AttemptResult,
    clock: Callable[[], float] = time.monotonic,
) -> AttemptResult:
    """One continuation attempt of a released stream that failed (R15): `body` ends with
    the `sent` text as an assistant prefill; read until the first text past it (a repeat of
    `sent` dropped: `PrefixStrip`), then hand the call over in `result` (`head`, `rest`)
    without a start check: it continues a start already checked. A failure before any new
    text (a refused prefill, a cut) is classified in `result`; never raises for it."""
    res = result
    strip = PrefixStrip(sent)

    async def read(call: UpstreamCall) -> bool:
        pieces = call.content()
        async for piece in pieces:
            res.ttft_s = clock() - res.started if res.ttft_s is None else res.ttft_s
            res.head = strip.feed(piece)
            if res.head:
                break
        comp = call.assembler.completion
        if not res.head and (comp.error is not None or not comp.done):
            res.classification = (
                classify(comp.error) if comp.error is not None
                else Classification(_ambiguous_or_invalid(call), "stream_cut")
            )  # fmt: skip
            return False
        res.head = res.head or strip.end()
        _release(res, call, _stripped(pieces, strip))
        return True

    return await _call(upstream, body, budget, res, read, clock=clock)


async def _stripped(pieces: AsyncIterator[str], strip: PrefixStrip) -> AsyncIterator[str]:
    """The rest of a continuation through its `PrefixStrip`."""
    async for piece in pieces:
        if out := strip.feed(piece):
            yield out
    if tail := strip.end():
        yield tail


def classify_unforeseen(
    exc: BaseException, output_started: bool, scrub: Scrubber
) -> Classification:
    """`classify(exc)`; an exception type the classifier does not map (a reply shape no
    reader of ours foresaw) is an invalid response: logged on one line, and the router
    falls back instead of answering 500."""
    try:
        return classify(exc, output_started=output_started)
    except TypeError:
        log.warning(
            "unforeseen %s in an upstream attempt, classified invalid_response: %s",
            type(exc).__name__,
            upstream_text(str(exc), scrub, 200),
        )
        return Classification(F.INVALID_RESPONSE, f"unexpected_{type(exc).__name__}"[:64])


def end_verdict(
    completion: Completion, contract: Contract, schemas: SchemaRegistry, body: dict[str, Any]
) -> Classification | None:
    """A released stream's whole reply through the same acceptance pipeline as any other
    (R7): None = accepted. A cut caused by the client's own max_tokens is its own failure."""
    verdict = accept(completion, contract, schemas)
    if not isinstance(verdict, Rejection):
        return None
    if client_truncated(body, completion):
        return Classification(F.PERMANENT, "max_tokens_too_small")
    return attribute(classify(verdict), client_shaping(body))


def _ambiguous_or_invalid(call: UpstreamCall) -> F:
    return F.AMBIGUOUS if call.output_started else F.TRANSIENT


@dataclass(frozen=True, slots=True)
class _Judge:
    """The whole reply of one attempt through the acceptance pipeline (R7)."""

    contract: Contract
    schemas: SchemaRegistry
    body: dict[str, Any]  # the client's request (its own max_tokens may explain a cut)
    client_params: tuple[str, ...]

    def __call__(self, res: AttemptResult, call: UpstreamCall) -> None:
        comp = call.assembler.completion
        res.completion = comp
        if not comp.done and comp.error is None:
            # the stream ended before its end: a cut; after output it is ambiguous
            res.rejection = Rejection("transport_incomplete", CUT)
            res.classification = Classification(_ambiguous_or_invalid(call), "stream_cut")
            return
        if comp.error is not None:
            res.rejection = Rejection("in_band_error", comp.error.error_type or "")
            res.classification = classify(comp.error)
            return
        verdict = accept(comp, self.contract, self.schemas)
        if isinstance(verdict, Rejection):
            res.rejection = verdict
            res.classification = attribute(classify(verdict), self.client_params)
            if client_truncated(self.body, comp):
                # the client's own max_tokens cut the reply: its request, not the route (R9)
                res.classification = Classification(F.PERMANENT, "max_tokens_too_small")
        else:
            res.accepted = verdict
