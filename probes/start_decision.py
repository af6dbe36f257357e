"""The gateway's streaming start check as a decision over the prefix seen so far. Pure.

    decide_start(prefix, locale, complete=False) -> StartVerdict

One decision for the canary and the gateway (issue 31): the start verdict of a reply is
`stray_start_kind` of the *whole* reply, as the canary's `check_response_start` and the
gateway's acceptance judge it. Over a prefix of a stream the decision is PASS or FAIL only
once no text that may follow can change that verdict (*settled*), and NEED_MORE until then;
so a final verdict never changes as more text arrives, and the gateway releases a stream
only when the check of the whole reply passes its start (a property test over every cutting
of the reply bank and every stray form).

Settled means each rule has what it reads (`integrity.start_rules_settled`): the first
character and word, a token or role label or quote that may still complete
(`textutil.may_still_match`), the emphasis the reply opens with until it closes, shows a
defect, or its first line is fixed (`start_fragments.emphasis_settled`), and no think tag
that may still open the reply (`artefacts.reasoning_may_open`); a reasoning finding in the
prefix is final at once (no text that follows removes it). What the rules read is bounded:
the opening (`integrity.START_CHARS`, 600 characters), so a prefix that long is settled
whatever it holds (`HOLD_CHARS`). Most clean replies settle at their first word and the
character after it; one that opens with emphasis settles when the emphasis closes
(`*She wipes the counter.*`).

The one rule no prefix settles: reasoning markers anywhere in the first 20,000 characters
(C11: a closing `</think>` after reasoning streamed as text). The gateway's acceptance judges
the whole reply when it ends, and a stream released before such a marker came ends with an
in-band error there.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from probes.artefacts import reasoning_leak, reasoning_may_open
from probes.integrity import START_CHARS, opening, start_rules_settled, stray_start_kind
from probes.locale_spec import locale_spec
from probes.start_fragments import emphasis_settled
from probes.textutil import BOM


class StartDecision(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NEED_MORE = "need_more"


# The bound in characters: the opening every start rule reads within. A prefix of this many
# characters (of the analysed text) is settled whatever it holds.
HOLD_CHARS = START_CHARS


@dataclass(frozen=True, slots=True)
class StartVerdict:
    decision: StartDecision
    kind: str | None = None  # the stray start's kind, when FAIL
    final: bool = False  # settled: no text that follows changes it


NEED_MORE = StartVerdict(StartDecision.NEED_MORE)


def judged(kind: str | None) -> StartVerdict:
    """The final verdict of a check that found `kind` (None: a clean start)."""
    if kind is None:
        return StartVerdict(StartDecision.PASS, final=True)
    return StartVerdict(StartDecision.FAIL, kind, final=True)


def start_settled(prefix: str, locale: str) -> bool:
    """True when no text that may follow `prefix` changes `stray_start_kind` of it (but for
    a reasoning marker later in the reply, see the module docstring). The common wait (an
    emphasis still open) is asked first: it is the cheapest answer while a start is held."""
    if len(prefix) - prefix.startswith(BOM) >= HOLD_CHARS:
        return True
    s = opening(prefix)
    if not s:
        return False
    if reasoning_leak(prefix) is not None:
        return True
    if not emphasis_settled(s) or reasoning_may_open(prefix):
        return False
    return start_rules_settled(s, locale_spec(locale))


def decide_start(prefix: str, locale: str, *, complete: bool = False) -> StartVerdict:
    """The start check's answer on what has arrived of a stream (see the module docstring):
    `stray_start_kind` of the prefix once it is settled, else NEED_MORE; of the whole reply,
    stripped as acceptance reads it, when `complete`. A reply may end at the blanks a prefix
    ends with, and is read stripped then: a settled prefix that reads otherwise without them
    (`assistant\n`, `*She smiles.\n\n`) waits for more."""
    whole = prefix.strip()
    if complete:
        return judged(stray_start_kind(whole, locale))
    if not start_settled(prefix, locale):
        return NEED_MORE
    kind = stray_start_kind(prefix, locale)
    if prefix[-1].isspace() and stray_start_kind(whole, locale) != kind:
        return NEED_MORE
    return judged(kind)
