"""Regenerate the close-pair marker word lists and the common-Han list here (a dev tool).

Not a runtime dependency: needs `wordfreq` (pip install --target /tmp/wf wordfreq;
PYTHONPATH=/tmp/wf python probes/data/lang/build_markers.py). The lists it writes are
committed; probes/language.py only reads them.

A marker of language M against its close neighbour N is a word among M's 3,000 most
frequent words with Zipf frequency >= 3.3 in M and at least 1.7 lower in N (50x rarer),
and below 5.1 in English (so common English words in a quoted phrase do not count).
han_common.txt: characters of frequent zh/ja words; UTF-8 read as GBK / Shift-JIS yields mostly
characters outside it (measured: clean ja <= 1 per reply, mojibake 66-90% of Han characters).
"""

from __future__ import annotations

from pathlib import Path

PAIRS = [("es", "pt"), ("pt", "es"), ("ru", "uk"), ("uk", "ru")]
TOP_N = 3000
MIN_ZIPF = 3.3
MIN_GAP = 1.7
MAX_EN_ZIPF = 5.1
HAN_TOP_N = 25_000
KEEP_SHORT = {"y", "é", "à"}
# Interjections spelled alike in both languages ("Ha!", "He he").
EXCLUDE = {"ha", "he", "eh", "ah", "oh"}


def build(marker_lang: str, other: str) -> list[str]:
    from wordfreq import top_n_list, zipf_frequency

    out = []
    for w in top_n_list(marker_lang, TOP_N):
        if (len(w) < 2 and w not in KEEP_SHORT) or w in EXCLUDE:
            continue
        f_m, f_o = zipf_frequency(w, marker_lang), zipf_frequency(w, other)
        if f_m >= MIN_ZIPF and f_o <= f_m - MIN_GAP and zipf_frequency(w, "en") < MAX_EN_ZIPF:
            out.append(w)
    return out


def common_han(n: int = HAN_TOP_N) -> str:
    """Han characters of the `n` most frequent Chinese and Japanese words (~4,600 characters)."""
    from wordfreq import top_n_list

    chars = {
        ch
        for lang in ("zh", "ja")
        for w in top_n_list(lang, n)
        for ch in w
        if "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"
    }
    return "".join(sorted(chars))


def main() -> None:
    here = Path(__file__).parent
    han = common_han()
    header = f"# Han characters of the {HAN_TOP_N} most frequent zh and ja words (wordfreq 3.1)\n"
    (here / "han_common.txt").write_text(header + han + "\n")
    print("han", len(han))
    for m, o in PAIRS:
        words = build(m, o)
        header = (
            f"# words frequent in {m} and >=50x rarer in {o} (wordfreq 3.1; build_markers.py)\n"
        )
        (here / f"markers_{m}_not_{o}.txt").write_text(header + "\n".join(words) + "\n")
        print(m, o, len(words))


if __name__ == "__main__":
    main()
