"""Quality defects as pure text transforms (the caller passes its seeded RNG).

Each function takes a healthy reply (or the pieces to build one) and returns
the defective text; none of them does I/O."""

from __future__ import annotations

import random
import re

from fleet import bank

STRAY_PUNCTUATION: tuple[str, ...] = (",", ";", ".", '"', ")", "]", ":", "'", "-")
FOREIGN_FRAGMENTS: tuple[str, ...] = (
    "ysics",
    "ingly",
    "tion",
    "ción",
    "ologist",
    "ment",
    "ären",
    "ности",
    "ung",
)


def stray_start(text: str, rng: random.Random) -> str:
    """Glue a stray punctuation mark or a foreign token fragment before the text
    (`,*She…`, `ysics*She…`)."""
    if rng.random() < 0.5:
        return rng.choice(STRAY_PUNCTUATION) + text
    return rng.choice(FOREIGN_FRAGMENTS) + text


# Portuguese -> Spanish swaps for "portunhol" inside Portuguese sentences.
PT_TO_ES: dict[str, str] = {
    "não": "no", "você": "usted", "muito": "mucho", "com": "con", "ela": "ella",
    "ele": "él", "mas": "pero", "também": "también", "agora": "ahora", "onde": "donde",
    "então": "entonces", "cada": "cada", "uma": "una", "um": "un", "para": "para",
    "desta": "esta", "vez": "vez", "tempo": "tiempo", "noite": "noche", "porta": "puerta",
    "eu": "yo", "me": "me", "conte": "cuente", "verdade": "verdad", "chave": "llave",
    "velho": "viejo", "luzes": "luces", "ontem": "ayer", "tinha": "tenía", "razão": "razón",
    "sozinho": "solo", "começo": "principio", "rio": "río", "vila": "pueblo",
    "antes": "antes", "escurecer": "anochecer", "coisa": "cosa", "lugar": "lugar",
    "carta": "carta", "palavra": "palabra", "deles": "de ellos", "rua": "calle",
}  # fmt: skip


def _portunhol(sentence: str, rng: random.Random, share: float = 0.45) -> str:
    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        target = PT_TO_ES.get(word.lower())
        if target is None or target == word.lower() or rng.random() > share:
            return word
        return target.capitalize() if word[0].isupper() else target

    return re.sub(r"[^\W\d_]+", swap, sentence)


def language_mix(
    source: str, intruder: str, rng: random.Random, sentence_share: float = 0.5
) -> str:
    """A reply in `source` whose sentences alternate with whole `intruder`
    sentences, and whose remaining source sentences carry intruder words."""
    b = bank.bank(source)
    opener = rng.choice(b.openers)
    own = bank.compose_sentences(source, rng, rng.randint(4, 6))
    foreign = bank.compose_sentences(intruder, rng, len(own))
    out: list[str] = []
    for i, sentence in enumerate(own):
        swapped = (i % 2 == 1) if sentence_share >= 0.5 else (rng.random() < sentence_share)
        if swapped:
            out.append(foreign[i])
        else:
            out.append(_portunhol(sentence, rng) if source == "pt-BR" else sentence)
    return bank.join(source, [opener, *out])


def mojibake(text: str, codec: str) -> str:
    """UTF-8 bytes decoded with the wrong codec (undecodable bytes become U+FFFD)."""
    return text.encode("utf-8").decode(codec, errors="replace")


def replacement_chars(text: str, rng: random.Random, count: int = 4) -> str:
    """Replace `count` letters after the opening with U+FFFD."""
    chars = list(text)
    positions = [i for i, c in enumerate(chars) if c.isalpha() and i > 3]
    for i in rng.sample(positions, min(count, len(positions))):
        chars[i] = "\ufffd"
    return "".join(chars)


def repetition(locale: str, rng: random.Random, repeats: int = 8) -> str:
    """An opener, one sentence, then the same sentence looping `repeats` times."""
    b = bank.bank(locale)
    opener = rng.choice(b.openers)
    first, loop = bank.compose_sentences(locale, rng, 2)
    return bank.join(locale, [opener, first, *([loop] * repeats)])


def truncate(text: str, keep_fraction: float) -> str:
    """Cut the text mid-way (the caller reports finish_reason `length`)."""
    cut = max(1, int(len(text) * keep_fraction))
    return text[:cut]
