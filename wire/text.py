"""Where upstream bytes become strings of ours: scrub the key first, then cut.

Every string we keep from a provider's reply (an error message, a metadata value, a
provider name, a reply text) passes through `upstream_text` or a `Scrubber`, in that order:
scrubbing after a cut would let the part of the key before the cut survive.

A `Scrubber` removes, case-insensitively:
- the key itself, and so its `Bearer <key>` header form;
- any fragment of it of `MIN_FRAGMENT` (8) or more characters (a provider that echoes the
  header cut to its first 20 characters still leaks 20 characters of it).
Each removed run becomes `***`. Keys shorter than `MIN_FRAGMENT` are removed whole only.

A reply that arrives in pieces (a stream relayed to a client) goes through a
`StreamScrubber`: it holds back the last few characters of each piece, so a key split across
two pieces is still found whole. Text out of either is valid Unicode (a lone surrogate,
which no UTF-8 encoder accepts, becomes `?`), so it can always be re-encoded.
"""

from __future__ import annotations

import math
from typing import Any

MIN_FRAGMENT = 8
REDACTED = "***"
MAX_TEXT_CHARS = 500  # an error message or metadata value kept from upstream


class Scrubber:
    """Removes one secret, its case variants and its 8+ character fragments from text."""

    __slots__ = ("_gram_set", "_grams", "_secret", "_starts")

    def __init__(self, secret: str | None) -> None:
        self._secret = (secret or "").lower()
        s = self._secret
        n = MIN_FRAGMENT if len(s) >= MIN_FRAGMENT else len(s)
        self._grams: tuple[str, ...] = (
            tuple(dict.fromkeys(s[i : i + n] for i in range(len(s) - n + 1))) if s else ()
        )
        self._gram_set = frozenset(self._grams)
        # what a text may end with that a following text could complete into a gram
        self._starts = frozenset(g[:m] for g in self._grams for m in range(1, len(g)))

    def __bool__(self) -> bool:
        return bool(self._secret)

    def __repr__(self) -> str:  # never the secret
        return f"Scrubber(active={bool(self)})"

    @property
    def gram_chars(self) -> int:
        """The length of the shortest piece removed (0 without a secret)."""
        return len(self._grams[0]) if self._grams else 0

    def __call__(self, text: str) -> str:
        spans = self.runs(text)
        if not spans:
            return text
        out: list[str] = []
        keep_from = 0
        for i, j in spans:
            out.append(text[keep_from:i])
            out.append(REDACTED)
            keep_from = j
        out.append(text[keep_from:])
        return "".join(out)

    def open_tail(self, text: str, most: int) -> int:
        """How many of the last characters of `text` (at most `most`) could begin a piece of
        the secret that the text after them completes: the longest such suffix that is the
        start of a gram, folded as `runs` folds (so a word that no gram begins with is not
        held: the gateway releases `*She ` at once)."""
        if not self._starts or most <= 0:
            return 0
        tail = text[-most:]
        if tail.isascii():
            folded = tail.lower()
        else:  # fold the whole text, as `runs` does (a case mapping may read its context)
            whole = text.lower()
            folded = whole[-most:] if len(whole) == len(text) else tail
        for k in range(len(folded), 0, -1):
            if folded[-k:] in self._starts:
                return k
        return 0

    def runs(self, text: str) -> list[tuple[int, int]]:
        """The spans `[i, j)` of `text` that are pieces of the secret, left to right, each
        extended as far as it stays one."""
        if not self._grams or len(text) < len(self._grams[0]):
            return []  # no piece fits (a provider name, a usage key, a finish reason)
        folded = text.lower()
        if len(folded) != len(text):  # a case mapping changed the length: match exactly
            folded = text
        n = len(self._grams[0])
        windows = len(folded) - n + 1
        if windows * 3 < len(self._grams):  # a short text: its windows looked up (a usage
            # key or a provider name has a few; an OpenRouter key has 66 grams to search for)
            if self._gram_set.isdisjoint([folded[i : i + n] for i in range(windows)]):
                return []
        elif not any(g in folded for g in self._grams):  # the common case, at C speed
            return []
        spans: list[tuple[int, int]] = []
        i = 0
        while i <= len(folded) - n:
            if folded[i : i + n] not in self._secret:
                i += 1
                continue
            j = i + n  # extend the run while it is still part of the secret
            while j < len(folded) and folded[i : j + 1] in self._secret:
                j += 1
            spans.append((i, j))
            i = j
        return spans

    def deep(self, value: Any, *, limit: int = MAX_TEXT_CHARS, depth: int = 8) -> Any:
        """`value` (JSON-like) with every string, keys included, passed through
        `upstream_text`; containers deeper than `depth` become one scrubbed, cut string."""
        if isinstance(value, str):
            return upstream_text(value, self, limit)
        if value is None or isinstance(value, bool | int):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else None  # NaN / Infinity are not JSON
        if depth <= 0 or not isinstance(value, dict | list | tuple):
            return upstream_text(_short_repr(value), self, limit)
        if isinstance(value, dict):
            return {
                upstream_text(str(k), self, 100): self.deep(v, limit=limit, depth=depth - 1)
                for k, v in list(value.items())[:50]
            }
        return [self.deep(v, limit=limit, depth=depth - 1) for v in list(value)[:50]]


NO_SECRET = Scrubber(None)


def valid_unicode(text: str) -> str:
    """`text` with lone surrogates replaced by `?` (unchanged when it has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


class StreamScrubber:
    """Scrubs a text that arrives in pieces: `feed(piece)` returns what may be released
    now, `flush()` the rest at the end. Of the last `gram_chars - 1` characters, those that
    could begin a piece of the secret (`Scrubber.open_tail`), and a run of the secret that
    reaches them, are held back until the next piece, so no piece of the secret of
    `MIN_FRAGMENT` or more characters survives a split between pieces: a piece split at the
    end of a text either has a whole gram before the end (a run, held from its start) or
    ends with the start of a gram (held)."""

    __slots__ = ("_held", "_hold", "_scrub")

    def __init__(self, scrub: Scrubber) -> None:
        self._scrub = scrub
        self._hold = max(0, scrub.gram_chars - 1)
        self._held = ""

    def feed(self, piece: str) -> str:
        if not self._scrub:
            return valid_unicode(piece)
        buf = self._held + piece
        cut = len(buf) - self._scrub.open_tail(buf, self._hold)
        out: list[str] = []
        keep_from = 0
        for i, j in self._scrub.runs(buf):
            if j > cut:  # reaches the held tail: it may go on in the next piece
                cut = min(cut, i)
                break
            out.append(buf[keep_from:i])
            out.append(REDACTED)
            keep_from = j
        out.append(buf[keep_from:cut])
        self._held = buf[max(cut, keep_from) :]
        return valid_unicode("".join(out))

    def flush(self) -> str:
        held, self._held = self._held, ""
        return valid_unicode(self._scrub(held))


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ is not ours to debug
        text = f"<{type(value).__name__}>"
    return text[: MAX_TEXT_CHARS * 4]


def upstream_text(value: object, scrub: Scrubber, limit: int = MAX_TEXT_CHARS) -> str:
    """`value` as a string of ours: decoded (bytes as UTF-8 with replacements, lone
    surrogates replaced), scrubbed of the key, then cut to `limit` characters."""
    if isinstance(value, bytes | bytearray):
        text = bytes(value[: limit * 8 + 256]).decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        text = _short_repr(value)
    # Cut generously before scrubbing (bounded work), scrub, then cut exactly.
    text = valid_unicode(scrub(text[: limit * 4 + 256]))  # lone surrogates -> ?
    return text[:limit]
