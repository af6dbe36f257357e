"""The round's failing transcripts (O3): for each endpoint whose verdict failed, the
requests behind its failing contracts, as one markdown artifact per round
(`canary-transcripts-<model-slug>`). Pure: transcripts in, bounded text out.

Bounded: each reply is cut to `TEXT_CHARS` characters, at most `TRANSCRIPTS_PER_ENDPOINT`
requests are shown per endpoint and the whole artifact stays under `TOTAL_CHARS`; scrubbed: every text passes the key scrubber again (the client already
scrubbed it; an artifact is kept for good, so it is checked twice). Replies are shown in
code fences longer than any backtick run inside them, so a reply cannot break out of its
block, and control characters are shown as `\\xNN`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence

from flows.render import evidence_lines
from probes.types import Contract, Outcome, OutcomeStatus, Transcript
from quarantine.verdicts import ProviderRound, RoundVerdict
from wire.text import Scrubber

TEXT_CHARS = 800
WRAP_COLUMNS = 100  # code blocks do not wrap in the UI: lines are wrapped here
TOTAL_CHARS = 60_000
TRANSCRIPTS_PER_ENDPOINT = 8
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_TEXT_CONTRACTS = {Contract.LANGUAGE, Contract.REFUSAL, Contract.START}

# which requests show the failure of a contract (TOOLS and STREAM: the failing replies
# their evidence names, `_named`)
_SHOWN_BY: dict[Contract, set[Contract]] = {
    Contract.LANGUAGE: {Contract.LANGUAGE},
    Contract.REFUSAL: {Contract.REFUSAL},
    Contract.STRUCTURED: {Contract.STRUCTURED},
    Contract.START: _TEXT_CONTRACTS,
    Contract.LATENCY: _TEXT_CONTRACTS,
    Contract.TOOLS: set(),
    Contract.STREAM: set(),
}


def _named(outcomes: Sequence[Outcome]) -> set[str]:
    """Request ids of the failing replies a failing outcome's evidence names."""
    named: set[str] = set()
    for o in outcomes:
        items = o.evidence.get("failed") if o.status is OutcomeStatus.FAIL else None
        if isinstance(items, list):  # a share check's failing replies (latency's is a count)
            named |= {
                str(i["request_id"]) for i in items if isinstance(i, dict) and i.get("request_id")
            }
    return named


def _calls(t: Transcript) -> list[str]:
    """A tool reply's calls and what did not fit, one line."""
    if not t.tool_calls and not t.tool_delta_problems:
        return []
    calls = ", ".join(f"`{c.name}({c.arguments[:120]})`" for c in t.tool_calls) or "none"
    problems = "; ".join(t.tool_delta_problems)
    return [f"tool calls: {calls}" + (f"; deltas: {problems}" if problems else ""), ""]


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _visible(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _wrapped(text: str) -> str:
    """Each line wrapped at WRAP_COLUMNS (words kept whole where possible)."""
    return "\n".join(
        "\n".join(textwrap.wrap(line, WRAP_COLUMNS, drop_whitespace=False)) or line
        for line in text.split("\n")
    )


def _shown(t: Transcript, scrub: Scrubber) -> list[str]:
    text = scrub(t.text)
    cut = len(text) > TEXT_CHARS
    text = _wrapped(_visible(text[:TEXT_CHARS])) + (" […]" if cut else "")
    fence = _fence(text)
    ttft = f"{t.ttft_s:.2f} s" if t.ttft_s is not None else "-"
    error = (
        scrub(f"{t.error.code} {t.error.error_type or ''} {t.error.message}"[:200])
        if t.error
        else ""
    )
    probe = f" ({t.probe})" if t.probe else ""
    return [
        f"#### {t.contract.value}{probe} `{t.request_id}`",
        "",
        f"HTTP {t.http_status}, served by `{t.served_by}` as model `{t.served_model}`, TTFT "
        f"{ttft}, finish `{t.finish_reason}`, {len(t.text)} chars"
        + (f", transport `{t.transport_error}`" if t.transport_error else "")
        + (f", error {error}" if error else ""),
        "",
        *[scrub(line) for line in _calls(t)],
        fence,
        text or "(no text)",
        fence,
        "",
    ]


def failing_transcripts_markdown(
    round_id: str,
    verdicts: Mapping[str, ProviderRound],
    outcomes: Mapping[str, Sequence[Outcome]],
    transcripts: Mapping[str, Sequence[Transcript]],
    scrub: Scrubber,
) -> str | None:
    """The transcripts behind every failed verdict of a round; None when nothing failed."""
    failed = sorted(t for t, v in verdicts.items() if v.verdict is RoundVerdict.FAILED)
    if not failed:
        return None
    out = [
        f"# Failing transcripts, round `{round_id}`",
        "",
        f"Replies cut to {TEXT_CHARS} characters and wrapped at {WRAP_COLUMNS} columns; "
        "key scrubbed.",
        "",
    ]
    size = sum(len(line) + 1 for line in out)
    for tag in failed:
        failing = {o.contract for o in outcomes.get(tag, ()) if o.status is OutcomeStatus.FAIL}
        wanted = set().union(*(_SHOWN_BY[c] for c in failing)) if failing else set()
        blocks = [["", f"## `{tag}`", ""]]
        blocks[0] += [f"- {line}" for line in evidence_lines(outcomes.get(tag, ()))]
        blocks[0].append("")
        named = _named(outcomes.get(tag, ()))
        shown = [
            t for t in transcripts.get(tag, ()) if t.contract in wanted or t.request_id in named
        ]
        blocks += [_shown(t, scrub) for t in shown[:TRANSCRIPTS_PER_ENDPOINT]]
        for block in blocks:
            text = "\n".join(block)
            if size + len(text) > TOTAL_CHARS:
                out.append(
                    f"\n(further transcripts left out: the artifact is kept under "
                    f"{TOTAL_CHARS} characters)"
                )
                return "\n".join(out) + "\n"
            out.append(text)
            size += len(text) + 1
    return "\n".join(out) + "\n"
