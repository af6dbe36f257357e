"""A cheap fingerprint of how a reply starts, and the endpoints whose fingerprints differ from
their peers' (`start:peer_outlier`). Pure; no rule names the defect.

    fingerprint(text)              {feature: value} of one reply
    fingerprint_outliers(samples)  per endpoint, the most over-represented feature value when it
                                   is significant against the peers and large enough

Features (each a small categorical value):

    first   class of the first non-space character: upper / lower / caseless letter, digit,
            emphasis (`*` `_`), quote, dash, open (bracket), markup (`<` `#` `>` ...), punct,
            symbol (emoji), invisible (format characters such as a BOM or U+200B)
    lead    the characters before the first letter, spaces dropped, normalised: quotes -> `"`,
            dashes -> `-`, digits -> `0`, symbols -> `S`, format characters -> `~` (max 4)
    word    the first word's script(s) and casing: `latin:title`, `cyrillic:lower`, `han+kana`
    md      emphasis markers (`*`, `_`) of the first line: none / balanced / unbalanced
    length  length class of the reply: floor(log2(characters)), `short` under 16

Endpoints answering the same prompt in the same locale are comparable (the round sends every
endpoint the same start prompts, see probes/probeset.py). For each endpoint and each
(feature, value) it shows, a one-sided Fisher exact test compares its count with the pooled
count of the other endpoints of the locale group, Bonferroni-corrected for every comparison of
the group; an endpoint is an outlier when its most significant value passes alpha *and* its
share exceeds the peers' by at least `min_effect` (a bound on how different it must look).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from probes.exact import bonferroni, fisher_greater
from probes.textutil import script_of

FEATURES = ("first", "lead", "word", "md", "length")
FINGERPRINT_ALPHA = 0.05
# The host must show the value in at least this much larger a share of its replies than the
# peers: 0.4 = e.g. 3 of 6 replies against none of the peers'.
FINGERPRINT_MIN_EFFECT = 0.4
MIN_SAMPLES = 3  # fewer start replies than this: no comparison for the endpoint
_HEAD_CHARS = 400

_QUOTES = set("\"'«»„“”‘’‚‹›「」『』《》〈〉")
_MARKUP = set("<>#`|~^")
_WORD = re.compile(r"[^\W\d_]+")
_EMPHASIS_RUN = re.compile(r"\*+|_+")


def _char_class(ch: str) -> str:
    cat = unicodedata.category(ch)
    if ch.isalpha():
        if ch.isupper() or cat == "Lt":
            return "upper"
        if ch.islower():
            return "lower"
        return "caseless"
    if ch.isdigit():
        return "digit"
    if ch in "*_":
        return "emphasis"
    if ch in _QUOTES or cat in ("Pi", "Pf"):
        return "quote"
    if cat == "Pd":
        return "dash"
    if cat == "Ps":
        return "open"
    if ch in _MARKUP:
        return "markup"
    if cat.startswith("P"):
        return "punct"
    if cat.startswith("S"):
        return "symbol"
    if cat in ("Cf", "Zl", "Zp") or ch == "\ufeff":
        return "invisible"
    if cat.startswith("M"):
        return "mark"
    return "other"


def _lead_char(ch: str) -> str:
    cls = _char_class(ch)
    return {
        "quote": '"',
        "dash": "-",
        "digit": "0",
        "symbol": "S",
        "invisible": "~",
        "mark": "M",
    }.get(cls, ch)


def _casing(word: str) -> str:
    if word.islower():
        return "lower"
    if word.isupper():
        return "upper" if len(word) > 1 else "title"
    if word[0].isupper() and word[1:].islower():
        return "title"
    return "mixed"


def _word(head: str) -> str:
    m = _WORD.search(head[:120])
    if not m:
        return "none"
    w = m.group(0)[:12]
    scripts = sorted({script_of(ch) for ch in w})
    name = "+".join(scripts)
    if any(ch.isupper() or ch.islower() for ch in w) and len(scripts) == 1:
        return f"{name}:{_casing(w)}"
    return name


def _md(head: str) -> str:
    line = head.split("\n", 1)[0][:300]
    runs = _EMPHASIS_RUN.findall(line)
    if not runs:
        return "none"
    stars = sum(len(r) for r in runs if r[0] == "*")
    unders = sum(len(r) for r in runs if r[0] == "_")
    return "balanced" if stars % 2 == 0 and unders % 2 == 0 else "unbalanced"


def fingerprint(text: str) -> dict[str, str]:
    """The start fingerprint of one reply (see the module docstring). Empty text: {}."""
    head = text[:_HEAD_CHARS].lstrip(" \t\r\n")
    if not head:
        return {}
    lead = []
    for ch in head[:24]:
        if ch.isalpha():
            break
        if not ch.isspace():
            lead.append(_lead_char(ch))
    length = len(text.strip())
    return {
        "first": _char_class(head[0]),
        "lead": "".join(lead[:4]),
        "word": _word(head),
        "md": _md(head),
        "length": "short" if length < 16 else f"2^{int(math.log2(length))}",
    }


class FingerprintOutlier(BaseModel):
    """Why one endpoint's starts look unlike its peers'."""

    model_config = ConfigDict(frozen=True)

    tag: str
    locale: str
    feature: str
    value: str
    host: str  # "k/n"
    peers: str
    p_value: float
    p_adjusted: float
    effect: float
    distance: float  # total variation distance of the feature's distributions

    def evidence(self) -> dict[str, object]:
        return {
            "feature": self.feature,
            "value": self.value,
            "host": self.host,
            "peers": self.peers,
            "p": round(self.p_value, 8),
            "p_adjusted": round(self.p_adjusted, 8),
            "effect": round(self.effect, 4),
            "distance": round(self.distance, 4),
            "locale": self.locale,
        }


def _distance(host: Counter[str], peers: Counter[str]) -> float:
    nh, np_ = sum(host.values()), sum(peers.values())
    if not nh or not np_:
        return 0.0
    keys = set(host) | set(peers)
    return 0.5 * sum(abs(host[k] / nh - peers[k] / np_) for k in keys)


def fingerprint_outliers(
    samples: Mapping[str, Sequence[tuple[str, Mapping[str, str]]]],
    *,
    alpha: float,
    min_effect: float = FINGERPRINT_MIN_EFFECT,
    min_samples: int = MIN_SAMPLES,
) -> dict[str, FingerprintOutlier]:
    """Endpoints whose start fingerprints differ from their locale group's.

    `samples`: per endpoint, (locale, fingerprint) of each judged start reply."""
    groups: dict[str, dict[str, list[Mapping[str, str]]]] = {}
    for tag, items in samples.items():
        for locale, fp in items:
            if fp:
                groups.setdefault(locale, {}).setdefault(tag, []).append(fp)
    out: dict[str, FingerprintOutlier] = {}
    for locale, by_tag in sorted(groups.items()):
        hosts = {t: fps for t, fps in by_tag.items() if len(fps) >= min_samples}
        if len(hosts) < 2:
            continue
        counts = {
            t: {f: Counter(fp.get(f, "") for fp in fps) for f in FEATURES}
            for t, fps in hosts.items()
        }
        totals = {f: sum((counts[t][f] for t in hosts), Counter[str]()) for f in FEATURES}
        # every (host, feature, value) compared in this group
        tests = sum(len(counts[t][f]) for t in hosts for f in FEATURES)
        for tag in sorted(hosts):
            n = len(hosts[tag])
            best: FingerprintOutlier | None = None
            for feature in FEATURES:
                mine = counts[tag][feature]
                others = totals[feature] - mine
                n_peers = sum(others.values())
                for value, k in mine.items():
                    kp = others[value]
                    p = fisher_greater(k, n, kp, n_peers)
                    effect = k / n - (kp / n_peers if n_peers else 0.0)
                    cand = FingerprintOutlier(
                        tag=tag,
                        locale=locale,
                        feature=feature,
                        value=value,
                        host=f"{k}/{n}",
                        peers=f"{kp}/{n_peers}",
                        p_value=p,
                        p_adjusted=bonferroni(p, tests),
                        effect=effect,
                        distance=_distance(mine, others),
                    )
                    if cand.effect >= min_effect and (best is None or p < best.p_value):
                        best = cand
            if best is not None and best.p_adjusted <= alpha:
                out[tag] = best
    return out
