"""Per-locale reply banks (fleet/replies/<locale>.json) and healthy reply
composition: an `*action*` opener followed by 3-6 sentences, chosen with the
caller's seeded RNG. Also splits text into stream-sized token chunks."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPLIES_DIR = Path(__file__).parent / "replies"
_NO_SPACE_LOCALES = {"ja", "zh-Hans", "th"}


@dataclass(frozen=True)
class Bank:
    locale: str
    openers: tuple[str, ...]
    sentences: tuple[str, ...]
    refusals: tuple[str, ...]

    @property
    def joiner(self) -> str:
        return "" if self.locale in {"ja", "zh-Hans"} else " "


@cache
def bank(locale: str) -> Bank:
    """The reply bank of `locale` (KeyError for an unknown locale)."""
    path = REPLIES_DIR / f"{locale}.json"
    if not path.is_file():
        raise KeyError(f"no reply bank for locale {locale!r}")
    data = json.loads(path.read_text(encoding="utf-8"))
    return Bank(locale, tuple(data["openers"]), tuple(data["sentences"]), tuple(data["refusals"]))


def compose_sentences(locale: str, rng: random.Random, count: int | None = None) -> list[str]:
    """Distinct sentences from the bank (no repeats inside one reply)."""
    b = bank(locale)
    n = count if count is not None else rng.randint(3, 6)
    return rng.sample(b.sentences, min(n, len(b.sentences)))


def compose_reply(locale: str, rng: random.Random) -> str:
    """A healthy role-play continuation: `*action*` opener + 3-6 sentences."""
    b = bank(locale)
    opener = rng.choice(b.openers)
    return b.joiner.join([opener, *compose_sentences(locale, rng)])


def join(locale: str, parts: list[str]) -> str:
    return bank(locale).joiner.join(parts)


def refusal(locale: str, rng: random.Random) -> str:
    return rng.choice(bank(locale).refusals)


_WORDS = re.compile(r"\S+\s*|\s+")


def chunk_text(text: str, locale: str | None = None) -> list[str]:
    """Split text into small stream chunks ("tokens") whose concatenation is `text`.

    Space-separated scripts: one word (with its trailing space) per chunk.
    Japanese, Chinese and Thai: runs of up to 3 characters."""
    if not text:
        return []
    if locale in _NO_SPACE_LOCALES:
        out: list[str] = []
        for piece in _WORDS.findall(text):
            out.extend(piece[i : i + 3] for i in range(0, len(piece), 3))
        return out
    return _WORDS.findall(text)


def estimate_tokens(text: str) -> int:
    """Rough token count used for usage and context limits: characters / 4."""
    return max(1, (len(text) + 3) // 4) if text else 0


@cache
def _tool_phrases() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(
        (REPLIES_DIR / "tool_phrases.json").read_text(encoding="utf-8")
    )
    return data


def tool_result_reply(locale: str, values: list[str]) -> str:
    """A reply that quotes a tool's result values, in `locale`."""
    phrases = _tool_phrases().get(locale) or _tool_phrases()["en"]
    return phrases["result"].format(values=", ".join(values))


def no_access_reply(locale: str) -> str:
    """A reply that ignores a tool's result: it says it cannot know."""
    return (_tool_phrases().get(locale) or _tool_phrases()["en"])["unknown"]
