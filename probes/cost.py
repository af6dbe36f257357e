"""What the canary's own probes cost (SPEC C13), pure: transcripts and the listing's prices in,
US dollars out. Every probe is a billed request, so the canary counts them like any client.

    probe_cost(t, pricing, max_tokens)   one probe: `usage.cost` when the reply carries it;
                                         else the listing's prices times the reported tokens
                                         (prompt, completion, and the price per request);
                                         a probe without usage (cut, reset, an error before
                                         the first token) is priced by its request's
                                         estimate (the prompt's characters / 4, and
                                         `max_tokens` of completion: an upper bound) and
                                         marked estimated
    endpoint_bill(tag, transcripts, ...) one endpoint's requests, tokens and cost in a round
    round_bill(transcripts, pricing, ...) every endpoint's, and the total

The listing's prices are USD per token (`Endpoint.pricing`, parsed from the listing's decimal
strings by discovery).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from probes.prompts import prompt_for
from probes.tools import TOOLS, tool_probes
from probes.types import Contract, Pricing, Transcript
from wire.chunks import usage_cost, usage_tokens

CHARS_PER_TOKEN = 4  # the estimate of a request's prompt tokens (the fleet counts the same)
TOKENS_PER_MESSAGE = 4  # role and framing of each chat message


class CostSource(StrEnum):
    USAGE = "usage.cost"  # the provider's own figure in the reply's usage
    LISTING = "listing"  # the listing's prices times the reply's reported tokens
    ESTIMATE = "estimate"  # no usage: the request's estimate (marked estimated)


class ProbeCost(BaseModel):
    """One probe's cost and the tokens it was priced on."""

    model_config = ConfigDict(frozen=True)

    usd: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    source: CostSource = CostSource.USAGE

    @property
    def estimated(self) -> bool:
        return self.source is CostSource.ESTIMATE


def listing_usd(pricing: Pricing, prompt_tokens: float, completion_tokens: float) -> float:
    """The listing's price of one request with these tokens (USD)."""
    return prompt_tokens * pricing.prompt + completion_tokens * pricing.completion + pricing.request


def prompt_tokens_estimate(contract: Contract, locale: str | None) -> int:
    """The prompt tokens of a probe request, estimated from its messages' characters (a tool
    request: a forced call's messages and the function definitions it carries)."""
    extra = 0
    try:
        if contract is Contract.TOOLS:
            messages = list(
                tool_probes(locale or "en", samples=1, checks=0, triggers=0)[0].messages
            )
            extra = len(json.dumps(TOOLS))
        else:
            messages = prompt_for(contract, locale or "en")
    except (KeyError, ValueError, OSError):  # an unknown locale or a contract without a prompt
        messages = prompt_for(Contract.LANGUAGE, "en")
    chars = sum(len(str(m.get("content", ""))) for m in messages) + extra
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


def probe_cost(t: Transcript, pricing: Pricing, max_tokens: int) -> ProbeCost:
    """The cost of one probe (see the module docstring)."""
    if t.usage is not None:
        prompt, completion = usage_tokens(t.usage)
        reported = usage_cost(t.usage)
        if reported is not None and reported >= 0:
            return ProbeCost(usd=reported, prompt_tokens=prompt, completion_tokens=completion)
        usd = listing_usd(pricing, prompt, completion)
        return ProbeCost(
            usd=usd, prompt_tokens=prompt, completion_tokens=completion, source=CostSource.LISTING
        )
    prompt = prompt_tokens_estimate(t.contract, t.locale)
    return ProbeCost(
        usd=listing_usd(pricing, prompt, max_tokens),
        prompt_tokens=prompt,
        completion_tokens=max_tokens,
        source=CostSource.ESTIMATE,
    )


class EndpointBill(BaseModel):
    """Requests, tokens and cost of one endpoint in one round (or a total). The tokens are
    those the replies reported (usage); an estimated probe adds its cost, not tokens."""

    model_config = ConfigDict(frozen=True)

    tag: str
    requests: int = 0
    prompt_tokens: int = 0  # reported by the replies' usage
    completion_tokens: int = 0
    usd: float = 0.0
    estimated_usd: float = 0.0  # the part of `usd` priced by estimate
    estimated_requests: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: EndpointBill, tag: str | None = None) -> EndpointBill:
        return EndpointBill(
            tag=tag or self.tag,
            requests=self.requests + other.requests,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            usd=self.usd + other.usd,
            estimated_usd=self.estimated_usd + other.estimated_usd,
            estimated_requests=self.estimated_requests + other.estimated_requests,
        )


class RoundBill(BaseModel):
    """What one round's probes cost, per endpoint (controls included) and in total."""

    model_config = ConfigDict(frozen=True)

    endpoints: dict[str, EndpointBill] = Field(default_factory=dict)

    @property
    def total(self) -> EndpointBill:
        total = EndpointBill(tag="total")
        for bill in self.endpoints.values():
            total = total.plus(bill, "total")
        return total


def endpoint_bill(
    tag: str, transcripts: Sequence[Transcript], pricing: Pricing, max_tokens: int
) -> EndpointBill:
    """The bill of one endpoint's probes in a round."""
    bill = EndpointBill(tag=tag)
    for t in transcripts:
        cost = probe_cost(t, pricing, max_tokens)
        bill = bill.plus(
            EndpointBill(
                tag=tag,
                requests=1,
                prompt_tokens=0 if cost.estimated else cost.prompt_tokens,
                completion_tokens=0 if cost.estimated else cost.completion_tokens,
                usd=cost.usd,
                estimated_usd=cost.usd if cost.estimated else 0.0,
                estimated_requests=int(cost.estimated),
            )
        )
    return bill


def round_bill(
    transcripts: Mapping[str, Sequence[Transcript]],
    pricing: Mapping[str, Pricing],
    max_tokens: int,
) -> RoundBill:
    """Every endpoint's bill (an endpoint missing from `pricing` is priced at zero per
    token: only its reported `usage.cost` counts)."""
    return RoundBill(
        endpoints={
            tag: endpoint_bill(tag, items, pricing.get(tag, Pricing()), max_tokens)
            for tag, items in sorted(transcripts.items())
        }
    )
