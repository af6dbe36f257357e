"""Defective variants DERIVED from the clean corpus (tests/data/corpus), seeded, never stored.

Each generator takes clean texts (and a `random.Random`) and returns new texts; tests assert the
caught rate per class. Nothing here knows the checks' thresholds.

    load_clean(locale) / clean_locales()      the clean corpus
    mix_sentences(base, donor, fraction, rng) replace a fraction of sentences by donor sentences
    mojibake(text, codec, errors)             UTF-8 bytes decoded with the wrong codec
    sprinkle_replacement(text, rng)           U+FFFD where characters were lost
    stray_starts(text, locale, rng)           the stray-start kinds of C9, several per text
    repetition_loops(text, rng)               degenerate loops of several shapes
"""

from __future__ import annotations

import json
import math
import random
import re
from functools import cache
from pathlib import Path

from probes.textutil import sentences

CORPUS = Path(__file__).parent / "corpus"
SEED = 20261129


def clean_locales() -> list[str]:
    return sorted(p.stem for p in (CORPUS / "clean").glob("*.json"))


def _texts(data: object) -> list[str]:
    items = data.get("replies", data) if isinstance(data, dict) else data
    assert isinstance(items, list)
    return [it if isinstance(it, str) else str(it["text"]) for it in items]


@cache
def load_clean(locale: str) -> tuple[str, ...]:
    return tuple(_texts(json.loads((CORPUS / "clean" / f"{locale}.json").read_text("utf-8"))))


@cache
def load_file(name: str) -> tuple[str, ...]:
    """Texts of another corpus file (portunhol.json, short.json), () when not written yet."""
    path = CORPUS / name
    if not path.exists():
        return ()
    return tuple(_texts(json.loads(path.read_text("utf-8"))))


def donor_sentences(texts: tuple[str, ...], min_words: int = 4) -> list[str]:
    """Sentences of a corpus with at least `min_words` words (a lone "¡Sí!" carries no language)."""
    return [s for t in texts for s in sentences(t) if len(s.split()) >= min_words]


def mix_sentences(
    base: str, donor: list[str], fraction: float, rng: random.Random, *, thai: bool = False
) -> str:
    """`base` with ceil(fraction * n) of its n sentences (at least 1) replaced by donor ones."""
    parts = sentences(base, spaceless_thai=thai)
    k = min(len(parts), max(1, math.ceil(fraction * len(parts) - 1e-9)))
    for i in rng.sample(range(len(parts)), k):
        parts[i] = rng.choice(donor)
    return " ".join(parts)


# Portuguese word -> the Spanish word a portunhol speaker slips in (test data, not a threshold).
PT_TO_ES = {
    "não": "no", "muito": "muy", "com": "con", "uma": "una", "um": "un", "você": "usted",
    "também": "también", "mas": "pero", "ele": "él", "ela": "ella", "eu": "yo", "agora": "ahora",
    "aqui": "aquí", "sempre": "siempre", "depois": "después", "hoje": "hoy", "noite": "noche",
    "bem": "bien", "tudo": "todo", "nada": "nada", "então": "entonces", "ainda": "todavía",
    "onde": "donde", "quando": "cuando", "sem": "sin", "até": "hasta", "já": "ya", "seu": "su",
    "sua": "su", "meu": "mi", "minha": "mi", "os": "los", "as": "las", "o": "el", "e": "y",
    "é": "es", "está": "está", "do": "del", "da": "de la", "no": "en el", "na": "en la",
}  # fmt: skip
_WORDISH = re.compile(r"\w+|\W+")


def portunhol(text: str, per_sentence: int, rng: random.Random) -> str:
    """Portuguese with `per_sentence` words of each sentence swapped for their Spanish twin."""
    out = []
    for sentence in sentences(text):
        toks = _WORDISH.findall(sentence)
        spots = [i for i, w in enumerate(toks) if w.lower() in PT_TO_ES]
        for i in rng.sample(spots, min(per_sentence, len(spots))):
            toks[i] = PT_TO_ES[toks[i].lower()]
        out.append("".join(toks))
    return " ".join(out)


def mojibake(text: str, codec: str, errors: str = "replace") -> str:
    """What a client shows when it decodes UTF-8 bytes as `codec`."""
    return text.encode("utf-8").decode(codec, errors=errors)


def sprinkle_replacement(text: str, rng: random.Random) -> str:
    """Replace 1-3 characters by U+FFFD (bytes lost in transit)."""
    chars = list(text)
    for i in rng.sample(range(len(chars)), min(len(chars), rng.randint(1, 3))):
        chars[i] = "\ufffd"
    return "".join(chars)


_FRAGMENTS = ["ysics", "ing", "tion", "ed", "ment", "ness", "ly", "er", "ción", "ção", "ung", "ски"]
_PUNCT = [",", ";", ")", "]", ".", ":", "}", "|", "?", "!", "..", ",\n", ". ", ", ", "=", "/"]
_TOKENS = ["<|im_end|>", "</s>", "<|eot_id|>", "[/INST]", "<think>", "<|assistant|>"]
_CJK_PUNCT = ["、", "。", "，", "；", "）", "」", "』", "！", "？", "："]
_AR_PUNCT = ["،", "؛", "؟"]
_LEAD = re.compile(r"^\s*")


def stray_starts(text: str, locale: str, rng: random.Random) -> list[str]:
    """Corrupted openings of `text`: stray punctuation, a foreign token fragment glued to `*`
    or a quote, a lone `.`/`"` before a Markdown marker, special-token leftovers."""
    body = _LEAD.sub("", text)
    marked = body if body.startswith("*") else "*" + body
    out = [p + body for p in rng.sample(_PUNCT, 6)]
    # ,*She / .*She / "*She / '*She / ‘*She / ’*She / -*She (a hyphen glued to `*`)
    out += [p + marked for p in (",", ".", '"', ";", ")", "]", "'", "‘", "’", "-")]
    out += [f + marked for f in rng.sample(_FRAGMENTS, 3)]  # ysics*She
    out.append(rng.choice(_FRAGMENTS) + '"' + body.lstrip('"“*'))  # ics"She
    out.append(rng.choice(_TOKENS) + body)
    if locale in ("ja", "zh-Hans", "ko", "th"):
        out += [p + body for p in rng.sample(_CJK_PUNCT, 4)]
    if locale == "ar":
        out += [p + body for p in _AR_PUNCT]
    return out


def repetition_loops(text: str, rng: random.Random) -> list[str]:
    """Degenerate continuations of a clean reply: repeated sentence, clause, token, paragraph."""
    parts = [p for p in sentences(text) if sum(ch.isalpha() for ch in p) >= 3] or [text]
    last = parts[-1]
    spaced = " " in text.strip()
    chunk_words = text.split()
    start = rng.randrange(max(1, len(chunk_words) - 6))
    clause = " ".join(chunk_words[start : start + 5]) if spaced else text[:12]
    letter_runs = [w[:4] for w in re.findall(r"[^\W\d_]+", text)]  # a word, or 4 CJK letters
    token = rng.choice(letter_runs or [text[:2]])
    joiner = " " if spaced else ""
    return [
        text + joiner + joiner.join([last] * 6),
        text + joiner + joiner.join([clause] * 12),
        text + " " + " ".join([token] * 15),
        joiner.join([text] * 4),
    ]
