"""The gateway's streaming start check as a decision over the prefix seen so far (issue 26). Pure.

    decide_start(prefix, locale, window_chars, complete=False) -> StartVerdict

The gateway holds a stream's first `window_chars` characters (the contract's
`start_check_chars`, 24: the *window*) and judges them with `stray_start_kind`. Most of its
rules read only the first character, the first word and the character after it
(`integrity.start_rules_settled`): once those have arrived and pass, no text that follows can
make them fail, so the decision answers PASS before the window is complete (`final` False)
and the gateway releases what it holds. Most clean replies are decided after their first word
and the character that follows it (`*She ` of `*She smiles.*`).

Two rules read the whole window: reasoning markers anywhere in it (probes/artefacts.py) and
the first line's emphasis balance (a dialogue opened, or the paragraph ended, while the
opening `*` is still open). Their kinds (`WINDOW_KINDS`) are the only ones the window may
still find after an early PASS: the gateway holds whatever arrives after an early release
until the window is complete and judges it then with the same check (routing/start_gate.py),
so that evidence never reaches a client either; the start verdict of every stream is the one
the 24-character check gives it.

NEED_MORE until then; PASS or FAIL with `final` True once the window is complete (or the reply
ended: `complete`, judged as the acceptance pipeline judges a whole reply, stripped).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from probes.integrity import opening, start_rules_settled, stray_start_kind
from probes.locale_spec import locale_spec


class StartDecision(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NEED_MORE = "need_more"


# The kinds that read the whole window: the only ones it can still find after an early PASS.
WINDOW_KINDS = frozenset({"reasoning_leak", "unbalanced_emphasis", "doubled_emphasis"})


@dataclass(frozen=True, slots=True)
class StartVerdict:
    decision: StartDecision
    kind: str | None = None  # the stray start's kind, when FAIL
    final: bool = False  # the window is complete (or the reply ended): the check's own verdict


NEED_MORE = StartVerdict(StartDecision.NEED_MORE)
EARLY_PASS = StartVerdict(StartDecision.PASS)

# Scripts in which the window holds a whole sentence (24 characters of Han, kana or Hangul):
# there the check usually decides an opening emphasis inside the window (it closes, or a
# dialogue opens while it is open), so an emphasis-led opening waits for the window. In the
# other scripts the window is a few words and an action rarely ends inside it.
_SENTENCE_SCRIPTS = frozenset({"han", "kana", "hangul"})
_ENDS = frozenset(".!?…。！？\n")  # a sentence or line end: where the balance is decided


def _emphasis_undecided(s: str, scripts: frozenset[str]) -> bool:
    """An opening emphasis the window may still find broken, as its twin with the marker
    closed is found clean: wait for the window (see `_SENTENCE_SCRIPTS`). Two marks that
    open the reply (`**`, `_*`, `*_`, `__`) always wait: the broken forms the check names
    (`**She smiles.*` closed short, `_*She smiles.*` never closed) show the stray mark in
    their first characters, which an early release would send."""
    if s[0] not in "*_":
        return False
    if len(s) > 1 and s[1] in "*_":
        return True
    return bool(scripts & _SENTENCE_SCRIPTS) or not _ENDS.isdisjoint(s)


def window_complete(prefix: str, window_chars: int) -> bool:
    """The gateway's window: `window_chars` characters of text, surrounding blanks apart."""
    return len(prefix.strip()) >= window_chars


def judged(kind: str | None) -> StartVerdict:
    """The final verdict of a check that found `kind` (None: a clean start)."""
    if kind is None:
        return StartVerdict(StartDecision.PASS, final=True)
    return StartVerdict(StartDecision.FAIL, kind, final=True)


def decide_start(
    prefix: str, locale: str, window_chars: int, *, complete: bool = False
) -> StartVerdict:
    """The start check's answer on what has arrived of a stream (see the module docstring).

    A final PASS or FAIL is `stray_start_kind` of the prefix, as the gateway judged its held
    window before (of the whole reply, stripped, when `complete`); an early PASS needs every
    rule but the window's two settled (`start_rules_settled`) and the check passing now."""
    if complete:
        return judged(stray_start_kind(prefix.strip(), locale))
    if window_complete(prefix, window_chars):
        return judged(stray_start_kind(prefix, locale))
    s, spec = opening(prefix), locale_spec(locale)
    if not s or not start_rules_settled(s, spec) or _emphasis_undecided(s, spec.scripts):
        return NEED_MORE
    if stray_start_kind(prefix, locale) is not None:
        return NEED_MORE  # failing now, but the window's verdict is the one that counts
    return EARLY_PASS
