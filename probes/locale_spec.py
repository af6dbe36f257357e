"""The 17 supported UI locales and the text facts the checks need about each. Pure data.

LOCALES           locale code -> LocaleSpec
locale_spec(code) the spec, or ValueError naming the unknown locale
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LocaleSpec:
    code: str  # UI locale, e.g. "pt-BR"
    language: str  # lingua Language member name, e.g. "PORTUGUESE"
    scripts: frozenset[str]  # letter scripts a clean reply is written in (textutil.script_of)
    spaceless: bool = False  # no spaces between words (ja, zh, th)
    # The close neighbour whose words are counted as intrusions (marker list in data/lang).
    marker_file: str | None = None

    @property
    def latin(self) -> bool:
        return self.scripts == frozenset({"latin"})


_L = frozenset({"latin"})

LOCALES: dict[str, LocaleSpec] = {
    s.code: s
    for s in (
        LocaleSpec("en", "ENGLISH", _L),
        LocaleSpec("es", "SPANISH", _L, marker_file="markers_pt_not_es.txt"),
        LocaleSpec("pt-BR", "PORTUGUESE", _L, marker_file="markers_es_not_pt.txt"),
        LocaleSpec("fr", "FRENCH", _L),
        LocaleSpec("de", "GERMAN", _L),
        LocaleSpec("it", "ITALIAN", _L),
        LocaleSpec("pl", "POLISH", _L),
        LocaleSpec("ru", "RUSSIAN", frozenset({"cyrillic"}), marker_file="markers_uk_not_ru.txt"),
        LocaleSpec("uk", "UKRAINIAN", frozenset({"cyrillic"}), marker_file="markers_ru_not_uk.txt"),
        LocaleSpec("tr", "TURKISH", _L),
        LocaleSpec("ja", "JAPANESE", frozenset({"han", "kana"}), spaceless=True),
        LocaleSpec("ko", "KOREAN", frozenset({"hangul", "han"})),
        LocaleSpec("zh-Hans", "CHINESE", frozenset({"han"}), spaceless=True),
        LocaleSpec("id", "INDONESIAN", _L),
        LocaleSpec("vi", "VIETNAMESE", _L),
        LocaleSpec("ar", "ARABIC", frozenset({"arabic"})),
        LocaleSpec("th", "THAI", frozenset({"thai"}), spaceless=True),
    )
}


def locale_spec(code: str) -> LocaleSpec:
    """The spec of a supported locale; ValueError naming it (and the supported ones) otherwise."""
    try:
        return LOCALES[code]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported locale {code!r}; supported: {', '.join(LOCALES)}") from None
