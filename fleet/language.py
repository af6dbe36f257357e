"""Detect the language of the prompt's last user message, as a real model
would: from the text alone (lingua, restricted to the 17 supported locales).
Short or ambiguous text falls back to English."""

from __future__ import annotations

from functools import lru_cache

from lingua import Language, LanguageDetector, LanguageDetectorBuilder

LOCALE_OF: dict[Language, str] = {
    Language.ENGLISH: "en",
    Language.SPANISH: "es",
    Language.PORTUGUESE: "pt-BR",
    Language.FRENCH: "fr",
    Language.GERMAN: "de",
    Language.ITALIAN: "it",
    Language.POLISH: "pl",
    Language.RUSSIAN: "ru",
    Language.UKRAINIAN: "uk",
    Language.TURKISH: "tr",
    Language.JAPANESE: "ja",
    Language.KOREAN: "ko",
    Language.CHINESE: "zh-Hans",
    Language.INDONESIAN: "id",
    Language.VIETNAMESE: "vi",
    Language.ARABIC: "ar",
    Language.THAI: "th",
}
LOCALES: tuple[str, ...] = tuple(LOCALE_OF.values())
FALLBACK_LOCALE = "en"


@lru_cache(maxsize=1)
def _detector() -> LanguageDetector:
    return (
        LanguageDetectorBuilder.from_languages(*LOCALE_OF).with_preloaded_language_models().build()
    )


def warm_up() -> None:
    """Build the detector now (a few ms) so the first request does not pay for it."""
    _detector()


@lru_cache(maxsize=4096)
def detect_locale(text: str) -> str:
    """The locale of `text` among the 17 supported ones; English when unsure."""
    stripped = text.strip()
    if not stripped:
        return FALLBACK_LOCALE
    language = _detector().detect_language_of(stripped[:2000])
    return LOCALE_OF.get(language, FALLBACK_LOCALE) if language is not None else FALLBACK_LOCALE
