"""Honest streams (SPEC C12, issue 22), judged per probe set from the chunk times and the
reply's `model` that the client records (pure):

    buffered(t, config)          the reply came at once after a long silence (`buffered`)
    output_speed(t)              characters and tokens per second after the first token
    same_model(served, asked)    the reply's `model` names the model asked for
    judge_stream(endpoint, transcripts, config) -> [buffered, served_model]

Contract STREAM, because all three are about whether the stream is what it claims to be:
that it streams (a provider that withholds the whole reply and sends it in one final chunk
breaks every first-token promise while passing a total-time check), at the speed it
advertises, of the model asked for. They come from the same facts of every text reply
(chunk times and the chunk envelope), not from its words.

- `buffered`: the first output after at least `stream_buffered_min_s` of silence, and the
  whole content (>= BUFFERED_MIN_CHARS) within BUFFERED_SPREAD of that silence, in one chunk
  or, when the client was demonstrably listening, in a burst (`buffered`); judged by share
  (>= 2 and >= `start_anomaly_share` of the judged text replies), then against the peers.
- `served_model_mismatch`: the reply's `model`, normalised (`same_model`), is not the model
  asked for; judged by share, then against the peers (a naming every host shares is the
  model's, not a host's).
- `slow_output`: the median output speed of the start samples (the same prompt for every
  endpoint) compared with the peers' (probes/peer_round.py); the listing's
  `throughput_last_30m` p50 is evidence beside it. Evidence only unless
  `slow_output_enforce`.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from ground.settings import ProbeConfig
from probes.integrity import MIN_ANOMALOUS
from probes.shares import Bar, share_verdict
from probes.transport import classify_transport, outcome
from probes.types import Contract, Endpoint, Outcome, OutcomeStatus, Transcript
from wire.chunks import usage_tokens

BUFFERED_MIN_CHARS = 40  # a shorter reply may honestly fit in one chunk
BUFFERED_SPREAD = 0.05  # the content arrived within this share of the silence before it (an
# honest stream of a few sentences spreads over >= 15% of its first token even on a busy machine)
# faster than any model streams (the fastest hosts: ~2,000 tokens/s, ~8,000 characters/s): the
# content was generated before, and only its sending was spread
BUFFERED_MIN_CPS = 20_000
MIN_SPEED_SPAN_S = 0.02  # a shorter span measures the clock, not the stream
MIN_SPEED_CHUNKS = 3


def _text_reply(t: Transcript) -> bool:
    return (
        t.contract not in (Contract.STRUCTURED, Contract.TOOLS)
        and classify_transport(t) is None
        and t.http_status == 200
        and t.done
        and t.error is None
        and bool(t.text.strip())
    )


def buffered(t: Transcript, config: ProbeConfig) -> bool:
    """The whole output came at once, after a silence of at least the bound (from the reply's
    headers, the stream open, to the first output of any kind: reasoning streamed first is no
    silence, and a host that answers late altogether is the latency contract's), and to the
    last content within BUFFERED_SPREAD of the silence:

    - as one content chunk: no stream sends a reply so, whatever the client did meanwhile;
    - as many chunks faster than any model streams (BUFFERED_MIN_CPS), when the client read
      the stream during the second half of the silence and got nothing (`idle_read_s`): a
      client that stalled (a busy machine) reads an honest stream's chunks at once too, and
      that is not the provider's doing.

    A short reply after a slow first token that streamed at a model's speed is honest."""
    first = t.first_token_s
    if first is None or t.last_content_s is None or len(t.text) < BUFFERED_MIN_CHARS:
        return False
    opened = t.headers_s or 0.0
    silence, spread = first - opened, t.last_content_s - first
    if silence < config.stream_buffered_min_s or spread > BUFFERED_SPREAD * silence:
        return False
    if t.content_chunks == 1:
        return True
    listened = t.idle_read_s is not None and t.idle_read_s >= opened + silence / 2
    fast = spread <= 0 or (len(t.text) - t.first_chunk_chars) / spread >= BUFFERED_MIN_CPS
    return listened and fast


def output_speed(t: Transcript) -> tuple[float, float | None] | None:
    """(characters/s, tokens/s or None) after the first content chunk; None when the reply
    is too short or came at once (nothing to measure)."""
    if t.ttft_s is None or t.last_content_s is None or t.content_chunks < MIN_SPEED_CHUNKS:
        return None
    span = t.last_content_s - t.ttft_s
    if span < MIN_SPEED_SPAN_S:
        return None
    rest = len(t.text) - t.first_chunk_chars
    cps = rest / span
    _, completion = usage_tokens(t.usage)
    tps = completion * rest / len(t.text) / span if completion and t.text else None
    return round(cps, 2), (round(tps, 2) if tps is not None else None)


# version and date suffixes: -2024-08-06, -20240806, -0613, -latest, -v1, @20240620, -preview
_SUFFIX = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest|v\d+|preview))+$")


def normalised_model(name: str) -> str:
    """A model name without author, OpenRouter variant (`:free`, `:nitro`, ...) and
    version/date suffixes, lower case (`meta-llama/Llama-3.3-70B-Instruct:free` ->
    `llama-3.3-70b-instruct`, `gpt-4o-2024-08-06` -> `gpt-4o`)."""
    base = name.strip().lower().replace("_", "-").split(":", 1)[0]
    return _SUFFIX.sub("", base.rsplit("/", 1)[-1])


# words a provider adds to the same model's name (a serving variant, not another model)
_DECORATIONS = frozenset(
    {
        "meta",
        "instruct",
        "chat",
        "it",
        "turbo",
        "fast",
        "hf",
        "fp8",
        "fp16",
        "bf16",
        "int4",
        "int8",
        "awq",
        "gptq",
    }
)


def _words(name: str) -> frozenset[str]:
    return frozenset(normalised_model(name).split("-")) - _DECORATIONS


def same_model(served: str, asked: str) -> bool:
    """The served name is the model asked for: the same words after normalising, apart from
    serving decorations (`Llama-3.3-70B-Instruct-Turbo` is `llama-3.3-70b-instruct`;
    `gpt-4o-mini` is not `gpt-4o`)."""
    a, b = _words(served), _words(asked)
    return bool(a) and a == b


def _reply(t: Transcript, failed: bool, reason: str, **evidence: object) -> Outcome:
    status = OutcomeStatus.FAIL if failed else OutcomeStatus.PASS
    return outcome(t, Contract.STREAM, status, reason if failed else "ok", **evidence)


def buffered_reply(t: Transcript, config: ProbeConfig) -> Outcome:
    """One text reply's `buffered` outcome, with its silence, spread and length."""
    ttft, last = t.first_token_s or 0.0, t.last_content_s or 0.0
    evidence = {"ttft_s": round(ttft, 3), "spread_s": round(last - ttft, 3), "chars": len(t.text)}
    return _reply(t, buffered(t, config), "buffered", **evidence)


def model_reply(t: Transcript, asked: str) -> Outcome:
    """One reply's `served_model_mismatch` outcome, with both names."""
    served = t.served_model or ""
    mismatch = not same_model(served, asked)
    return _reply(t, mismatch, "served_model_mismatch", served_model=served, requested=asked)


def _speeds(transcripts: Sequence[Transcript]) -> dict[str, object]:
    measured = [
        s for t in transcripts if t.contract is Contract.START for s in [output_speed(t)] if s
    ]
    cps = [c for c, _ in measured]
    tps = [x for _, x in measured if x is not None]
    return {
        "output_cps": round(statistics.median(cps), 2) if cps else None,
        "output_tps": round(statistics.median(tps), 2) if tps else None,
        "speed_samples": len(measured),
    }


def judge_stream(
    endpoint: Endpoint, transcripts: Sequence[Transcript], config: ProbeConfig
) -> list[Outcome]:
    """The set's STREAM outcomes: `buffered` first (the contract's outcome), then
    `served_model` (when a reply named its model); speeds and the listing's throughput in the
    first one's evidence."""
    text = [t for t in transcripts if _text_reply(t)]
    bar = Bar(config.start_anomaly_min_replies, MIN_ANOMALOUS, config.start_anomaly_share)
    buffered_replies = [buffered_reply(t, config) for t in text]
    named = [t for t in transcripts if t.served_model is not None and classify_transport(t) is None]
    model_replies = [model_reply(t, endpoint.model_id) for t in named]
    first = share_verdict(
        buffered_replies, Contract.STREAM, bar, check="buffered", tag=endpoint.tag
    )
    speed = {**_speeds(text), "listed_tps": endpoint.throughput_p50_tps}
    first = first.model_copy(update={"evidence": {**first.evidence, **speed}})
    if not model_replies:
        return [first]  # no reply named its model: nothing to compare, and no check missing
    served = share_verdict(
        model_replies, Contract.STREAM, bar, check="served_model", tag=endpoint.tag
    )
    return [first, served]
