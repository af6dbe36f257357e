"""The numbers behind a verdict, in words (pure).

An `Outcome` carries a reason code (`start:stray_start`) and an evidence dict; an analyst
needs the numbers: 3 of 4 replies anomalous and what they began with, the first-token time
against the bar, the language shares and the detected language, the schema error path, the
first words of a refusal, the HTTP status of a transport error.

    evidence_text(outcome)   one line with the numbers, for markdown and the CLI
    evidence_brief(outcome)  a few words (at most BRIEF_CHARS), for narrow table cells

Both accept an `Outcome` or its JSON form (`model_dump(mode="json")`, as the ledger keeps
it), so the round's artifacts and the history read from the ledger say the same thing.
Texts quoted from replies are cut short and made single-line; they were scrubbed of the
key by the client before they ever reached an `Outcome`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.tool_evidence import tools_text
from probes.types import Outcome

BRIEF_CHARS = 34
QUOTE_CHARS = 60  # characters of a reply quoted in evidence_text
HEAD_CHARS = 12  # first characters of an anomalous reply shown


def _as_dict(outcome: Outcome | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(outcome, Outcome):
        return outcome.model_dump(mode="json")
    return outcome


def _one_line(text: object, limit: int) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _quote(text: object, limit: int = QUOTE_CHARS) -> str:
    return "“" + _one_line(text, limit) + "”"


def _head(text: object) -> str:
    """The first characters of a reply, whitespace shown as `·` (a stray start is often
    one character before a space)."""
    raw = str(text or "")[:HEAD_CHARS]
    return "".join("·" if ch.isspace() else ch for ch in raw) or "∅"


def _secs(value: object) -> str:
    return f"{float(value):.1f} s" if isinstance(value, int | float) else "?"


def _share(value: object) -> str:
    return f"{float(value):.2f}" if isinstance(value, int | float) else "?"


def _lang(name: object) -> str:
    """A lingua language name (`PORTUGUESE`) as a word (`Portuguese`)."""
    return str(name).replace("_", " ").title() if name else "?"


def _shares(shares: object, top: int = 3) -> str:
    if not isinstance(shares, Mapping) or not shares:
        return ""
    ranked = sorted(shares.items(), key=lambda kv: (-float(kv[1]), str(kv[0])))[:top]
    return ", ".join(f"{_lang(k)} {_share(v)}" for k, v in ranked)


def _transport(status: str, reason: str, ev: Mapping[str, Any]) -> str:
    if status == "misrouted":
        return f"served by {ev.get('served_by') or '?'}, pinned {ev.get('pinned') or '?'}"
    parts = []
    if ev.get("http_status") not in (None, 200):
        parts.append(f"HTTP {ev['http_status']}")
    if ev.get("transport_error"):
        parts.append(str(ev["transport_error"]).replace("_", " "))
    if ev.get("error_type") or ev.get("error_code"):
        parts.append(str(ev.get("error_type") or ev.get("error_code")))
    if ev.get("retry_after_s") is not None:
        parts.append(f"Retry-After {ev['retry_after_s']} s")
    return "; ".join(parts) or reason.replace("_", " ")


def _start(status: str, reason: str, ev: Mapping[str, Any], brief: bool) -> str:
    if "judged" not in ev:
        return _transport(status, reason, ev)
    k, n = ev.get("anomalous", 0), ev.get("judged", 0)
    if brief:
        what = (
            _BRIEF_START.get(reason, "anomalous starts") if status == "fail" else "anomalous starts"
        )
        return f"{k}/{n} {what}"
    heads = [h for h in ev.get("anomalous_replies") or [] if isinstance(h, Mapping)]
    shown = ", ".join(f"`{_head(h.get('head'))}`" for h in heads)
    kinds = ev.get("reasons") or {}
    kind_text = ", ".join(f"{r.replace('_', ' ')} {c}" for r, c in kinds.items())
    text = (
        f"{k} of {n} replies anomalous (share {_share(ev.get('share'))}, bar {ev.get('min_share')})"
    )
    if kind_text:
        text += f": {kind_text}"
    markers = sorted({f"{h['marker']}" for h in heads if h.get("marker")})
    if markers:
        text += f"; markers {', '.join(f'`{m}`' for m in markers)}"
    leaks = [h.get("leak") for h in heads if h.get("leak")]
    seen = [h.get("at") for h in heads if h.get("at")]
    if leaks:
        text += f"; the leak began {_quote(leaks[0], 40)}"
    elif seen:
        text += f"; first seen in {_quote(seen[0], 40)}"
    elif shown:
        text += f"; began with {shown}"
    return text + _reasoning(ev.get("reasoning"))


_BRIEF_START = {
    "reasoning_leak": "reasoning leaks",
    "bpe_markers": "BPE markers",
    "literal_escapes": "literal escapes",
}


def _reasoning(reasoning: object) -> str:
    """Reasoning outside the content (evidence only, C11)."""
    if not isinstance(reasoning, Mapping):
        return ""
    parts = []
    if reasoning.get("streamed_chars"):
        parts.append(
            f"{reasoning['streamed_chars']} chars of reasoning in its own fields (not content)"
        )
    if reasoning.get("tokens_while_disabled"):
        parts.append(f"{reasoning['tokens_while_disabled']} reasoning tokens although disabled")
    return "; " + "; ".join(parts) if parts else ""


def _latency(status: str, reason: str, ev: Mapping[str, Any], ttft: object, brief: bool) -> str:
    bar = ev.get("threshold_s")
    ttfts = [t for t in ev.get("ttfts_s") or [] if isinstance(t, int | float)]
    if not ttfts and isinstance(ttft, int | float) and reason != "no_first_token":
        ttfts = [ttft]  # one request judged alone
    if status in ("transport", "misrouted") and not ttfts:
        return _transport(status, reason, ev)
    slowest = max(ttfts) if ttfts else None
    if brief:
        if slowest is None:
            return f"no text within {_secs(bar)}"
        return f"TTFT {_secs(slowest)} / bar {_secs(bar)}"
    failed, judged = ev.get("failed"), ev.get("judged")
    if not ttfts:
        text = f"no text within the {_secs(bar)} bar"
    else:
        times = ", ".join(_secs(t) for t in sorted(ttfts, reverse=True)[:6])
        text = f"first token {times} against a bar of {_secs(bar)}"
    if failed is not None and judged:
        text += f"; {failed} of {judged} requests without text in time"
    if ev.get("waited_s") is not None and reason == "no_first_token":
        text += f" (waited {_secs(ev['waited_s'])})"
    return text


def _language_detail(ev: Mapping[str, Any]) -> Mapping[str, Any]:
    """The evidence of one judged reply: the vote's `first_fail`, or the outcome itself."""
    first = ev.get("first_fail")
    return first if isinstance(first, Mapping) else ev


def _language(status: str, reason: str, ev: Mapping[str, Any], locale: object, brief: bool) -> str:
    if status in ("transport", "misrouted") and "attempts" not in ev:
        return _transport(status, reason, ev)
    detail = _language_detail(ev)
    votes = f"{ev.get('fails')} of {ev.get('attempts')} attempts failed" if "attempts" in ev else ""
    if reason == "encoding_corruption" or detail.get("signal"):
        signal = str(detail.get("signal") or "corruption").replace("_", " ")
        count = detail.get(str(detail.get("signal")))
        if brief:
            return f"encoding: {signal}"
        text = f"encoding corruption: {signal}" + (
            f" ({count})" if count not in (None, True) else ""
        )
        if detail.get("excerpt"):
            text += f"; {_quote(detail['excerpt'])}"
        return "; ".join(p for p in (text, votes) if p)
    shares = _shares(detail.get("language_shares"))
    detected = detail.get("detected") or detail.get("detected_script")
    if brief:
        if shares:
            return _one_line(shares, BRIEF_CHARS)
        return reason.replace("_", " ")
    parts = []
    if locale:
        parts.append(f"asked {locale}")
    if shares:
        parts.append(f"shares {shares}")
    if detail.get("foreign_share") is not None:
        parts.append(f"foreign {_share(detail.get('foreign_share'))}")
    if detected:
        parts.append(f"detected {_lang(detected)}")
    if detail.get("signal") and reason != "encoding_corruption":
        parts.append(f"signal {detail['signal']}")
    if votes:
        parts.append(votes)
    if detail.get("excerpt") and status == "fail":
        parts.append(_quote(detail["excerpt"]))
    return "; ".join(parts) or reason.replace("_", " ")


def _structured(status: str, reason: str, ev: Mapping[str, Any], brief: bool) -> str:
    if status in ("transport", "misrouted"):
        return _transport(status, reason, ev)
    if reason == "schema_violation":
        where = ev.get("path") or "$"
        if brief:
            return _one_line(f"{where}: {ev.get('validator')}", BRIEF_CHARS)
        return (
            f"schema error at {where} ({ev.get('validator')}): {_one_line(ev.get('message'), 120)}"
            f"; {ev.get('errors')} error(s)"
        )
    if reason == "invalid_json":
        if brief:
            return f"invalid JSON at char {ev.get('pos')}"
        return f"invalid JSON at char {ev.get('pos')}: {_one_line(ev.get('error'), 80)}; {_quote(ev.get('excerpt'))}"
    if reason == "truncated":
        return f"truncated after {ev.get('chars')} chars" + (
            "" if brief else f"; {_quote(ev.get('excerpt'))}"
        )
    if reason == "not_advertised":
        return "structured output not advertised"
    return reason.replace("_", " ")


def _refusal(status: str, reason: str, ev: Mapping[str, Any], brief: bool) -> str:
    if status in ("transport", "misrouted"):
        return _transport(status, reason, ev)
    if reason in ("refusal_pattern", "content_filter"):
        words = _one_line(ev.get("excerpt"), 28 if brief else QUOTE_CHARS)
        label = "filtered" if reason == "content_filter" else "refused"
        return f"{label}: {_quote(words, 28 if brief else QUOTE_CHARS)}" if words else label
    if reason == "moderation_403":
        return "HTTP 403 moderation"
    if reason == "answered" and not brief:
        return f"answered ({ev.get('chars')} chars)"
    return reason.replace("_", " ")


def _stream(status: str, reason: str, ev: Mapping[str, Any], brief: bool) -> str:
    if status in ("transport", "misrouted") and "judged" not in ev:
        return _transport(status, reason, ev)
    if reason == "slow_output":
        if brief:
            return f"{ev.get('output_cps')} vs peers {ev.get('peers_cps')} chars/s"
        return (
            f"output {ev.get('output_cps')} chars/s after the first token, {ev.get('ratio')} of "
            f"the peers' median {ev.get('peers_cps')} (bar {ev.get('min_ratio')}); "
            f"{ev.get('output_tps') or '?'} tokens/s, listed {ev.get('listed_tps') or '?'}"
        )
    k, n = ev.get("anomalous", 0), ev.get("judged", 0)
    items = [i for i in ev.get("failed") or [] if isinstance(i, Mapping)]
    if ev.get("check") == "served_model":
        served = items[0].get("served_model") if items else None
        if brief:
            return f"served {served}" if served else f"{k}/{n} other model"
        if not items:
            return f"{n} replies named the model asked for"
        asked = items[0].get("requested")
        return f"{k} of {n} replies named `{served}`, asked `{asked}` (bar {ev.get('min_share')})"
    if brief:
        return f"{k}/{n} buffered"
    text = f"{k} of {n} replies buffered (bar {ev.get('min_share')})"
    if items:
        first = items[0]
        text += (
            f": first token after {_secs(first.get('ttft_s'))}, all {first.get('chars')} chars "
            f"within {first.get('spread_s')} s"
        )
    if ev.get("output_cps") is not None:
        text += f"; output {ev['output_cps']} chars/s, {ev.get('output_tps') or '?'} tokens/s"
        text += f" (listed {ev.get('listed_tps') or '?'})"
    return text


def _render(outcome: Outcome | Mapping[str, Any], brief: bool) -> str:
    o = _as_dict(outcome)
    contract, status = str(o.get("contract")), str(o.get("status"))
    reason = str(o.get("reason") or "")
    ev: Mapping[str, Any] = o.get("evidence") or {}
    if contract == "start":
        text = _start(status, reason, ev, brief)
    elif contract == "latency":
        text = _latency(status, reason, ev, o.get("ttft_s"), brief)
    elif contract == "language":
        text = _language(status, reason, ev, o.get("locale"), brief)
    elif contract == "structured":
        text = _structured(status, reason, ev, brief)
    elif contract == "refusal":
        text = _refusal(status, reason, ev, brief)
    elif contract == "tools":
        text = (
            _transport(status, reason, ev)
            if status in ("transport", "misrouted")
            else tools_text(status, reason, ev, brief)
        )
    elif contract == "stream":
        text = _stream(status, reason, ev, brief)
    else:
        text = reason
    return _one_line(text, BRIEF_CHARS) if brief else _one_line(text, 400)


def evidence_text(outcome: Outcome | Mapping[str, Any]) -> str:
    """The numbers behind one outcome in one line (see module docstring)."""
    return _render(outcome, brief=False)


def evidence_brief(outcome: Outcome | Mapping[str, Any]) -> str:
    """The numbers behind one outcome in at most BRIEF_CHARS characters."""
    return _render(outcome, brief=True)
