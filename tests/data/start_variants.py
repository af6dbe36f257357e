"""Defective reply starts per class, DERIVED from the clean corpus (seeded, never stored).

    start_cases(text, locale, rng) -> {class: [variant, ...]}

Classes (issue 14, item 3): glued_fragment (text-led and marker-led), fragment_space,
word_piece, doubled_emphasis, unbalanced_emphasis, role_label, template_token, invisible.
Fragments are foreign to the locale or, in cased scripts, lower-case pieces of words; the
locale's own script without case (ja, zh-Hans, th, ar, ko) has no fragment a rule could see
without a dictionary, so none is generated there. Nothing here knows the checks' rules.
"""

from __future__ import annotations

import random
import re

from probes.locale_spec import locale_spec

LATIN_PIECES = ["ysics", "ingly", "tion", "ment", "ung", "ción", "ção", "ären", "ness", "ologist"]
CYRILLIC_PIECES = ["ности", "ски", "ться", "ение"]
HAN_PIECES = ["的", "了", "们"]
# pieces that cannot begin a word of the locale (a token split mid-word)
WORD_PIECES = {
    "ja": ["ょう", "ってる", "ーん", "ゃない"],
    "th": ["ะครับ", "\u0e31\u0e49น", "ๆ", "าม"],
    "ar": ["ـها", "\u064eت", "ـة"],
}
COMBINING = ["\u0301", "\u0308", "\u0303"]  # a combining mark left from a split character
ROLE_LABELS = ["assistant: ", "Assistant:\n", "**Assistant:** ", "ASSISTANT: ", "assistant\n",
               "User: ", "Human: ", "model\n"]  # fmt: skip
TEMPLATE_TOKENS = [
    "<|im_start|>assistant\n", "<|im_end|>", "<|eot_id|>", "<|endoftext|>",
    "<|start_header_id|>assistant<|end_header_id|>\n\n", "<｜Assistant｜>",
    "<｜end▁of▁sentence｜>", "</s>", "<s>", "[/INST]", "[INST] ", "<<SYS>>\n",
    "<start_of_turn>model\n", "<end_of_turn>\n", "<|assistant|>\n", "<|end|>",
    "<|channel|>final<|message|>", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "[gMASK]<sop>",
    "### Response:\n", "<think>\n\n</think>\n\n", "<bos>",
]  # fmt: skip
INVISIBLE = ["\ufeff", "\u200b", "\u200c", "\u200d", "\u2060", "\u00ad"]
CLASSES = (
    "glued_fragment", "fragment_space", "word_piece", "doubled_emphasis",
    "unbalanced_emphasis", "role_label", "template_token", "invisible",
)  # fmt: skip

_LEADING = re.compile(r"^[\s*_\"'“”„«»「『—–-]+")
_EMOJI_LEAD = re.compile(r"^[^\w\s*\"'“„«「『—–-]+\s*")


def pieces(locale: str) -> list[str]:
    """Word-pieces a tokenizer could leak into `locale`'s replies that a reader can see as
    not belonging: foreign scripts, and lower-case pieces in the cased scripts."""
    scripts = locale_spec(locale).scripts
    out = list(LATIN_PIECES)
    if "cyrillic" not in scripts:
        out += CYRILLIC_PIECES
    else:
        out += CYRILLIC_PIECES[:2]  # native, but lower-case before a capitalised word
    if "han" not in scripts:
        out += HAN_PIECES
    return out


def text_led(text: str) -> str:
    """The reply with its leading emoji, markers and quotes removed: it starts with a word."""
    return _LEADING.sub("", _EMOJI_LEAD.sub("", text.lstrip()))


def _first_action(text: str) -> re.Match[str] | None:
    return re.match(r"\*([^*\n]+)\*", text)


def start_cases(text: str, locale: str, rng: random.Random) -> dict[str, list[str]]:
    """Defective openings of one clean reply, by class (a class may be empty for a reply)."""
    body = text.lstrip()
    plain = text_led(body)
    frags = rng.sample(pieces(locale), 3)
    cases: dict[str, list[str]] = {c: [] for c in CLASSES}
    cases["glued_fragment"] = [frags[0] + plain, frags[1] + plain]
    cases["fragment_space"] = [frags[2] + " " + body, frags[0] + " " + plain]
    wp = [*WORD_PIECES.get(locale, []), *COMBINING]
    cases["word_piece"] = [p + plain for p in rng.sample(wp, 2)]
    action = _first_action(body)
    if action is not None:
        inner = action.group(1).rstrip()
        if inner and inner[-1] in ".!?…。！？":
            cases["doubled_emphasis"] = ["*" + body]
        rest = body[action.end() :]
        cases["unbalanced_emphasis"] = ["_" + body]
        if rest.lstrip()[:1] in ('"', "“", "«", "„", "「", "—"):
            cases["unbalanced_emphasis"].append("*" + action.group(1) + rest)  # never closed
    cases["role_label"] = [r + body for r in rng.sample(ROLE_LABELS, 2)]
    cases["template_token"] = [t + body for t in rng.sample(TEMPLATE_TOKENS, 3)]
    cases["invisible"] = [c + body for c in rng.sample(INVISIBLE, 2)]
    return cases
