"""The tools contract's evidence in words (pure; probes/evidence.py calls it for TOOLS).

    tools_text(status, reason, evidence, brief)

Which call, what was wrong with it, the marker of leaked markup and the first characters of
the text: `4 of 12 forced calls failed (share 0.33, bar 0.25): bad arguments 3, as text 1;
call book_table: arguments invalid at $.party.adults (minimum): 0 is less than the minimum
of 1; call get_weather: markup `<tool_call>` in the text “<tool_call> {"name": …”`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

QUOTE = 48

_WHAT = {
    "calls": "forced calls",
    "none": "`tool_choice: none` requests",
    "result": "tool-result round trips",
    "trigger_missed": "`auto` replies to a prompt that needs get_weather",
    "trigger_spurious": "`auto` replies to a prompt that needs no tool",
}
_BRIEF = {
    "calls": "bad calls",
    "none": "none violated",
    "result": "results ignored",
    "trigger_missed": "auto: no call",
    "trigger_spurious": "auto: needless call",
}


def _one_line(text: object, limit: int) -> str:
    one = " ".join(str(text or "").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _quote(text: object) -> str:
    return "“" + _one_line(text, QUOTE) + "”"


def _arguments(item: Mapping[str, Any]) -> str:
    if item.get("problem") == "not_json":
        return f"arguments not JSON ({_one_line(item.get('error'), 60)}): `{_one_line(item.get('arguments'), 40)}`"
    return (
        f"arguments invalid at {item.get('path') or '$'} ({item.get('validator')}): "
        f"{_one_line(item.get('message'), 80)}"
    )


def call_text(item: Mapping[str, Any]) -> str:
    """One failing reply in words."""
    reason, fn = str(item.get("reason")), item.get("function") or item.get("expected")
    call = f"call {fn}: " if fn else ""
    if reason == "as_text":
        return f"{call}markup `{item.get('marker')}` in the text {_quote(item.get('head'))}"
    if reason == "ignored":
        if item.get("function"):
            return f"called {item['function']}, the choice named {item.get('expected')}"
        return f"{call}answered in text, no call {_quote(item.get('head'))}"
    if reason == "unknown_name":
        return f"called unknown function `{item.get('function')}`"
    if reason == "inconsistent_deltas":
        problems = "; ".join(str(p) for p in item.get("problems") or [])
        return f"{call}deltas do not assemble: {_one_line(problems, 120)}"
    if reason == "bad_arguments":
        return call + _arguments(item)
    if reason == "finish_reason":
        return f"{call}finish reason `{item.get('finish_reason')}`, not `tool_calls`"
    if reason == "choice_none_violated":
        return f"called {item.get('function')} under `tool_choice: none`"
    if reason == "result_ignored":
        head = f" {_quote(item.get('head'))}" if item.get("head") else ""
        return f"{item.get('what') or 'result not used'}{head}"
    if reason == "trigger_missed":
        return f"no call {_quote(item.get('head'))}"
    if reason == "trigger_spurious":
        return f"called {item.get('function') or item.get('marker')}"
    return reason.replace("_", " ")


def _peer(ev: Mapping[str, Any]) -> str:
    peer = ev.get("peer")
    if not isinstance(peer, Mapping):
        return ""
    return f"; peers {peer.get('peers')}, p corrected {peer.get('p_adjusted')} ({peer.get('decision')})"


def tools_text(status: str, reason: str, ev: Mapping[str, Any], brief: bool) -> str:
    """A TOOLS outcome in words (module docstring); transport outcomes are the caller's."""
    if reason == "not_advertised":
        return "tools not advertised"
    check = str(ev.get("check") or "calls")
    k, n = ev.get("anomalous", 0), ev.get("judged", 0)
    if brief:
        return f"{k}/{n} {_BRIEF.get(check, check)}"
    if "judged" not in ev:
        return reason.replace("_", " ")
    text = f"{k} of {n} {_WHAT.get(check, check)} failed"
    if not check.startswith("trigger"):
        text += f" (share {ev.get('share')}, bar {ev.get('min_share')})"
    reasons = ev.get("reasons") or {}
    if reasons:
        text += ": " + ", ".join(f"{r.replace('_', ' ')} {c}" for r, c in reasons.items())
    items = [i for i in ev.get("failed") or [] if isinstance(i, Mapping)]
    if items:
        text += "; " + "; ".join(call_text(i) for i in items[:3])
    return text + _peer(ev)
