"""Quality defects as pure text transforms (the caller passes its seeded RNG).

Each function takes a healthy reply (or the pieces to build one) and returns
the defective text; none of them does I/O."""

from __future__ import annotations

import json
import math
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


# ---- reasoning in content -------------------------------------------------------------------

REASONING_SENTENCES: tuple[str, ...] = (
    "The user wants me to continue the scene.",
    "I should stay in character and match the tone of the last message.",
    "Let me keep the reply short and vivid.",
    "The last line sets the mood, so I will answer it directly.",
    "I need to reply in the language the user wrote in.",
    "Okay, I will describe the reaction first and then the words.",
    "There is no need for a tool here; a plain answer is enough.",
)


def reasoning_text(rng: random.Random) -> str:
    """A few sentences of a model's reasoning (English, as models reason)."""
    return " ".join(rng.sample(REASONING_SENTENCES, rng.randint(2, 4)))


def reasoning_leak(text: str, style: str, reasoning: str) -> str:
    """The reply with the model's reasoning left at the start of `content`."""
    if style == "thinking":
        return f"<thinking>\n{reasoning}\n</thinking>\n\n{text}"
    if style == "channel":
        return (
            f"<|channel|>analysis<|message|>{reasoning}<|end|>"
            f"<|start|>assistant<|channel|>final<|message|>{text}"
        )
    if style == "unclosed":
        return f"<think>\n{reasoning}\n\n{text}"
    return f"<think>\n{reasoning}\n</think>\n\n{text}"


# ---- broken detokenisation -----------------------------------------------------------------

BPE_WHITESPACE = {" ": "\u0120", "\n": "\u010a", "\t": "\u0109", "\r": "\u010d"}  # Ġ Ċ ĉ č


def paragraph_after_opener(text: str) -> str:
    """The reply laid out as chat models write it: a paragraph break after the `*action*`
    opener (what a broken detokeniser shows as `ĊĊ` or a literal `\\n\\n`)."""
    end = text.find("*", 1) + 1 if text.startswith("*") else 0
    if end <= 1:
        return text
    return text[:end] + "\n\n" + text[end:].lstrip(" ")


def bpe_markers(chunks: list[str], share: float) -> list[str]:
    """Stream tokens as a byte-level BPE vocabulary spells them, undecoded: the whitespace
    of the first `share` of the reply (its first whitespace characters) becomes `Ġ` (space),
    `Ċ` (newline), `ĉ` (tab), `č` (CR); letters stay. A reply with no whitespace gets the
    leading-space marker `Ġ` before its first token."""
    total = sum(1 for c in "".join(chunks) if c in BPE_WHITESPACE)
    left = max(1, math.ceil(total * share)) if total else 0
    out: list[str] = []
    for chunk in chunks:
        chars = []
        for c in chunk:
            if left and c in BPE_WHITESPACE:
                chars.append(BPE_WHITESPACE[c])
                left -= 1
            else:
                chars.append(c)
        out.append("".join(chars))
    if not total and out:
        out[0] = "\u0120" + out[0]
    return out


def _u_escape(c: str) -> str:
    code = ord(c)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def unicode_escapes(chunks: list[str]) -> list[str]:
    """Each token's non-ASCII characters written out as `\\uXXXX` (a reply with none gets
    the `newline` form instead)."""
    if all(c.isascii() for c in chunks):
        return bank.chunk_text(literal_escapes("".join(chunks), "newline"))
    return ["".join(c if ord(c) < 128 else _u_escape(c) for c in chunk) for chunk in chunks]


def literal_escapes(text: str, style: str) -> str:
    """Escape sequences written out where text belongs: `newline` (the paragraph break after
    the opener as the four characters `\\n\\n`), `unicode` (every non-ASCII character as
    `\\uXXXX`; a reply with none falls back to `newline`), `double_json` (the whole reply
    JSON-encoded once more: a quoted string with `\\"` inside)."""
    if style == "double_json":
        return json.dumps(text, ensure_ascii=False)
    if style == "unicode" and any(ord(c) > 127 for c in text):
        return "".join(c if ord(c) < 128 else _u_escape(c) for c in text)
    laid_out = paragraph_after_opener(text)
    if "\n" not in laid_out:
        return "\\n\\n" + text
    return laid_out.replace("\n", "\\n")
