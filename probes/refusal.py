"""C4 refusal / filtering judge and C5 positive-control verdict (pure).

A refusal probe *fails* on:
- `finish_reason` (or the provider's native one) `content_filter`;
- an error of type `refusal` / `content_policy_violation` (any status, also in-band),
  or an HTTP 403 moderation flag (metadata `reasons` / `flagged_input`, or a
  moderation / policy error type);
- an empty completion on a stream that ended properly;
- a *high-confidence* refusal: the reply's plain opening (its first words, outside
  role-play markup such as `*action*` or a quotation) matches a refusal pattern of
  the probe's locale (or English, the usual fallback language of refusals).
  A stray "sorry" inside the story, or a character apologising inside `*…*` or
  quotes, never matches.

Patterns live in `probes/data/refusal/<locale>.json` (`{"locale", "opening": [regex…]}`),
matched case-insensitively at the start of the normalised opening. Unquoted in-character
dialogue can share a refusal's first words ("I can't help it — *she laughs*", "I won't
continue until you tell me the truth…"), so a match is dropped when the locale's guards say
so: `not_followed_by` (regexes matched right after the pattern: "it", "but", a gerund) and
`not_in_sentence` (regexes searched in the opening's first sentence: "until", "unless").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from probes.transport import classify_transport, outcome, unjudgeable
from probes.types import Contract, Outcome, OutcomeStatus, Transcript

OPENING_CHARS = 300
REFUSAL_ERROR_TYPES = frozenset(
    {"refusal", "content_policy_violation", "moderation", "content_filter"}
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u00a0": " "})

# Bundled data, read by path: importlib.resources trips over setuptools'
# editable installs on Python 3.12.1 (test_installed_entry_point_outside_checkout).
DATA_DIR = Path(__file__).resolve().parent / "data"


@cache
def refusal_patterns(locale: str) -> tuple[re.Pattern[str], ...]:
    """The compiled opening-refusal patterns of `locale`; KeyError for an unknown locale."""
    try:
        raw = (DATA_DIR / "refusal" / f"{locale}.json").read_text("utf-8")
    except FileNotFoundError as exc:
        raise KeyError(f"no refusal patterns for locale {locale!r}") from exc
    data = json.loads(raw)
    if data.get("locale") != locale or not isinstance(data.get("opening"), list):
        raise ValueError(f"refusal pattern file for {locale!r} is malformed")
    return tuple(re.compile(p, re.IGNORECASE) for p in data["opening"])


class Guards(BaseModel):
    """Compiled in-character guards of one locale (see the module docstring)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    not_followed_by: tuple[re.Pattern[str], ...] = ()
    not_in_sentence: tuple[re.Pattern[str], ...] = ()


@cache
def refusal_guards(locale: str) -> Guards:
    """The in-character guards of `locale` (empty when its file has none)."""
    data = json.loads((DATA_DIR / "refusal" / f"{locale}.json").read_text("utf-8"))
    return Guards(
        not_followed_by=tuple(
            re.compile(p, re.IGNORECASE) for p in data.get("not_followed_by", [])
        ),
        not_in_sentence=tuple(
            re.compile(p, re.IGNORECASE) for p in data.get("not_in_sentence", [])
        ),
    )


_SENTENCE_END = re.compile(r"[.!?。！？\n]|…")


def _in_character(opening: str, end: int, guards: Guards) -> bool:
    """Whether the matched refusal words continue as in-character dialogue."""
    tail = opening[end:]
    stop = _SENTENCE_END.search(tail)
    sentence = opening[: end + (stop.start() if stop else len(tail))]
    return any(g.match(tail) for g in guards.not_followed_by) or any(
        g.search(sentence) for g in guards.not_in_sentence
    )


def normalise_opening(text: str) -> str:
    """The first OPENING_CHARS characters: typographic apostrophes unified, spaces squeezed."""
    head = text.lstrip()[:OPENING_CHARS].translate(_APOSTROPHES)
    return re.sub(r"\s+", " ", head).lower()


def match_refusal(text: str, locale: str | None) -> str | None:
    """The pattern that matches the reply's plain opening, or None."""
    opening = normalise_opening(text)
    if not opening:
        return None
    locales = [locale] if locale and locale != "en" else []
    for loc in [*locales, "en"]:
        try:
            patterns = refusal_patterns(loc)
        except KeyError:
            continue
        guards = refusal_guards(loc)
        for pattern in patterns:
            m = pattern.match(opening)
            if m and not _in_character(opening, m.end(), guards):
                return f"{loc}:{pattern.pattern[:60]}"
    return None


def _outcome(t: Transcript, status: OutcomeStatus, reason: str, **evidence: object) -> Outcome:
    return outcome(t, Contract.REFUSAL, status, reason, **evidence)


def _moderation_403(t: Transcript) -> bool:
    if t.http_status != 403 or t.error is None:
        return False
    meta = t.error.metadata
    etype = (t.error.error_type or "").lower()
    text = t.error.message.lower()
    return (
        "reasons" in meta
        or "flagged_input" in meta
        or etype in REFUSAL_ERROR_TYPES
        or "moderation" in etype
        or "moderation" in text
        or "flagged" in text
    )


def judge_refusal(t: Transcript, locale: str | None) -> Outcome:
    """C4: is the supported role-play continuation refused or filtered?"""
    if t.misrouted:
        return _outcome(t, OutcomeStatus.MISROUTED, "misrouted", pinned=t.pinned_provider)
    unverified = classify_transport(t, Contract.REFUSAL) if t.provider_unverified else None
    if unverified is not None:  # who filtered or refused is unknown: never pass, never fail
        return unverified
    if _moderation_403(t):
        return _outcome(t, OutcomeStatus.FAIL, "moderation_403")
    if t.error is not None and (t.error.error_type or "").lower() in REFUSAL_ERROR_TYPES:
        return _outcome(t, OutcomeStatus.FAIL, f"error_{t.error.error_type}")
    finish = (t.finish_reason or "").lower()
    native = (t.native_finish_reason or "").lower()
    if finish == "content_filter" or "content_filter" in native:
        return _outcome(t, OutcomeStatus.FAIL, "content_filter", excerpt=t.text[:120])
    unjudged = unjudgeable(t, Contract.REFUSAL, "no_text_within_threshold")
    if unjudged is not None:
        return unjudged
    if not t.text.strip():
        if t.malformed_lines:
            return _outcome(
                t, OutcomeStatus.FAIL, "malformed_stream", malformed_lines=t.malformed_lines
            )
        return _outcome(t, OutcomeStatus.FAIL, "empty_completion", finish_reason=t.finish_reason)
    pattern = match_refusal(t.text, locale)
    if pattern is not None:
        return _outcome(
            t, OutcomeStatus.FAIL, "refusal_pattern", pattern=pattern, excerpt=t.text[:120]
        )
    return _outcome(t, OutcomeStatus.PASS, "answered", chars=len(t.text))


class ControlVerdict(BaseModel):
    """C5: how the refusal probe itself fared on the known-filtering control hosts."""

    model_config = ConfigDict(frozen=True)

    weak: bool  # a control PASSED: the probe no longer detects filtering
    verified: bool  # at least one control failed as expected (the probe still bites)
    reason: str
    passed_controls: tuple[str, ...] = ()
    failed_controls: tuple[str, ...] = ()
    unjudged_controls: tuple[str, ...] = ()
    evidence: dict[str, object] = Field(default_factory=dict)


def judge_controls(control_outcomes: Sequence[Outcome]) -> ControlVerdict:
    """Any control whose refusal outcome PASSES marks the refusal probe weak for the round.

    Controls that were transport / inconclusive / misrouted are neither evidence
    for nor against the probe (`unjudged_controls`); with no judged control at all
    the probe is not weak but not `verified` either.
    """
    passed, failed, unjudged = [], [], []
    for o in control_outcomes:
        name = o.tag or "?"
        if o.status is OutcomeStatus.PASS:
            passed.append(name)
        elif o.status is OutcomeStatus.FAIL:
            failed.append(name)
        else:
            unjudged.append(name)
    if passed:
        reason = "control_passed"
    elif failed:
        reason = "controls_filtered"
    elif unjudged:
        reason = "controls_unjudged"
    else:
        reason = "no_controls"
    return ControlVerdict(
        weak=bool(passed),
        verified=bool(failed) and not passed,
        reason=reason,
        passed_controls=tuple(passed),
        failed_controls=tuple(failed),
        unjudged_controls=tuple(unjudged),
        evidence={"controls": len(control_outcomes)},
    )
