"""What the gateway may release of a stream's start, piece by piece. Pure.

    gate = StartGate(locale)
    gate.feed(piece) -> the text that may go out now ("" while it holds)
    gate.end()       -> the stream ended: what is still held, once judged
    gate.phase       HOLDING -> OPEN, or REJECTED with `gate.kind`

HOLDING: nothing has gone out; each piece is judged with `decide` (probes/start_decision.py)
over everything seen. The decision is final only once the whole reply's start verdict is
settled, so a PASS opens the gate for good (everything held goes out, then every piece as
it comes) and a FAIL rejects the stream before any of it went out (the router falls back).
A stream that ends while held is judged as a whole reply. The start verdict is therefore
the one the canary's check gives the whole reply, for any cutting of the stream into
pieces; nothing is released that a later piece could show stray.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from probes.start_decision import StartDecision, StartVerdict, decide_start

Decide = Callable[..., StartVerdict]  # decide_start's signature: (prefix, locale, complete=)


class GatePhase(StrEnum):
    HOLDING = "holding"  # nothing released yet
    OPEN = "open"  # the start passed: pieces go out as they come
    REJECTED = "rejected"  # the start is stray (`kind`): nothing goes out


@dataclass
class StartGate:
    locale: str
    decide: Decide = decide_start  # a parameter, so a test can show what a wrong one lets out
    phase: GatePhase = GatePhase.HOLDING
    head: str = ""  # everything seen before the gate opened
    kind: str | None = None  # the stray start, when REJECTED

    def feed(self, piece: str) -> str:
        """`piece` arrived: the text that may go out now."""
        if self.phase is GatePhase.OPEN:
            return piece
        if self.phase is GatePhase.REJECTED:
            return ""
        self.head += piece
        return self._settle(self.decide(self.head, self.locale))

    def end(self) -> str:
        """The stream ended before the gate opened: the whole start judged as the acceptance
        pipeline judges a whole reply (stripped); what is held, if it passes."""
        if self.phase is not GatePhase.HOLDING:
            return ""
        return self._settle(self.decide(self.head, self.locale, complete=True))

    def _settle(self, verdict: StartVerdict) -> str:
        if verdict.decision is StartDecision.FAIL:
            self.phase, self.kind = GatePhase.REJECTED, verdict.kind
        elif verdict.decision is StartDecision.PASS:
            self.phase = GatePhase.OPEN
            return self.head
        return ""
