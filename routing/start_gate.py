"""What the gateway may release of a stream's start, piece by piece (issue 26). Pure.

    gate = StartGate(locale, window_chars)
    gate.feed(piece) -> the text that may go out now ("" while it holds)
    gate.end()       -> the stream ended: what is still held, once judged
    gate.phase       HOLDING -> (WINDOW ->) OPEN, or REJECTED with `gate.kind`

HOLDING: nothing has gone out; each piece is judged with `decide` (probes/start_decision.py)
over everything seen. A PASS releases it all: a final one (the window complete) opens the
gate, an early one moves to WINDOW. WINDOW: the first text went out before the window was
complete, so what arrives is held until the window is, then judged with the same check the
window always had (`decide` final): the two rules that read the whole window (reasoning
markers, the emphasis balance) still stop the stream there, and what they would have found is
never released. OPEN: every piece goes out as it comes. A stream whose start is judged stray
is REJECTED (before any release the router falls back; after an early one the relay ends the
stream with an in-band error).

The start verdict is therefore `stray_start_kind` of the text seen when the window became
complete, as when the gateway held the whole window, for any cutting of the stream into
pieces; only when the first text goes out changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from probes.start_decision import StartDecision, StartVerdict, decide_start, window_complete

Decide = Callable[..., StartVerdict]  # decide_start's signature: (prefix, locale, window_chars)


class GatePhase(StrEnum):
    HOLDING = "holding"  # nothing released yet
    WINDOW = "window"  # released early; the rest of the window held until it is judged
    OPEN = "open"  # the start passed its window: pieces go out as they come
    REJECTED = "rejected"  # the start is stray (`kind`): nothing more goes out


@dataclass
class StartGate:
    locale: str
    window_chars: int
    decide: Decide = decide_start  # a parameter, so a test can show what a wrong one lets out
    phase: GatePhase = GatePhase.HOLDING
    head: str = ""  # everything seen before the gate opened
    released: str = ""  # the part of `head` that went out
    kind: str | None = None  # the stray start, when REJECTED
    early: bool = field(default=False)  # the first text went out before the window completed

    def feed(self, piece: str) -> str:
        """`piece` arrived: the text that may go out now."""
        if self.phase is GatePhase.OPEN:
            return piece
        if self.phase is GatePhase.REJECTED:
            return ""
        self.head += piece
        if self.phase is GatePhase.WINDOW:
            if not window_complete(self.head, self.window_chars):
                return ""
            return self._settle(self.decide(self.head, self.locale, self.window_chars))
        verdict = self.decide(self.head, self.locale, self.window_chars)
        if verdict.decision is StartDecision.PASS and not verdict.final:
            self.phase, self.early = GatePhase.WINDOW, True
            return self._release()
        return self._settle(verdict)

    def end(self) -> str:
        """The stream ended before the gate opened: the whole start judged as the acceptance
        pipeline judges a whole reply (stripped); what is still held, if it passes."""
        if self.phase in (GatePhase.OPEN, GatePhase.REJECTED):
            return ""
        return self._settle(self.decide(self.head, self.locale, self.window_chars, complete=True))

    def _settle(self, verdict: StartVerdict) -> str:
        if verdict.decision is StartDecision.FAIL:
            self.phase, self.kind = GatePhase.REJECTED, verdict.kind
            return ""
        if verdict.decision is StartDecision.PASS:
            self.phase = GatePhase.OPEN
            return self._release()
        return ""

    def _release(self) -> str:
        out = self.head[len(self.released) :]
        self.released = self.head
        return out
