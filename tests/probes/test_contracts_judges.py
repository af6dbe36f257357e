"""Pure table tests of the probe judges (C2-C6, C8): transcripts in, outcomes out."""

from __future__ import annotations

from typing import Any

import pytest

from probes.contracts import (
    PROBE_SCHEMA,
    RESPONSE_FORMAT,
    classify_transport,
    judge_controls,
    judge_latency,
    judge_refusal,
    judge_structured,
)
from probes.probeset import judge_language, latency_of_set, majority, reply_outcome
from probes.types import Contract, Endpoint, ErrorInfo, Outcome, OutcomeStatus, Transcript

S = OutcomeStatus
FULL = ("max_tokens", "response_format", "structured_outputs")


def tr(**kw: Any) -> Transcript:
    """A completed, well-formed transcript unless overridden."""
    base: dict[str, Any] = {
        "request_id": "r1",
        "model_id": "m/x",
        "tag": "p/fp8",
        "pinned_provider": "P",
        "contract": Contract.LANGUAGE,
        "locale": "en",
        "served_by": "P",
        "http_status": 200,
        "done": True,
        "ttft_s": 0.2,
        "text": "*She smiles.* Hello there, traveller.",
        "finish_reason": "stop",
    }
    base.update(kw)
    return Transcript(**base)


def err(
    code: int, error_type: str | None = None, *, in_band: bool = False, **meta: Any
) -> ErrorInfo:
    return ErrorInfo(code=code, message="x", error_type=error_type, in_band=in_band, metadata=meta)


def ep(params: tuple[str, ...] = FULL) -> Endpoint:
    return Endpoint(model_id="m/x", tag="p/fp8", provider_name="P", supported_parameters=params)


# ---- classify_transport (C2, Q1) --------------------------------------------------------------

TRANSPORT_CASES = [
    (
        "connect_timeout",
        {"transport_error": "connect_timeout", "http_status": None, "done": False, "text": ""},
    ),
    (
        "read_timeout",
        {"transport_error": "read_timeout", "http_status": None, "done": False, "text": ""},
    ),
    ("connection_reset", {"transport_error": "connection_reset", "done": False}),
    ("http_408", {"http_status": 408, "done": False, "text": ""}),
    (
        "http_429",
        {"http_status": 429, "done": False, "text": "", "error": err(429, "rate_limit_exceeded")},
    ),
    ("http_500", {"http_status": 500, "done": False, "text": ""}),
    ("http_502", {"http_status": 502, "done": False, "text": ""}),
    ("http_503", {"http_status": 503, "done": False, "text": ""}),
    ("http_401", {"http_status": 401, "done": False, "text": ""}),
    ("stream_cut", {"done": False, "transport_error": "stream_cut"}),
    ("stream_cut", {"done": False}),
    ("in_band_502", {"done": False, "error": err(502, "provider_unavailable", in_band=True)}),
    ("in_band_429", {"done": True, "error": err(429, in_band=True)}),
    ("finish_error", {"finish_reason": "error"}),
    ("time_limit", {"done": False, "transport_error": "time_limit", "time_limit_hit": True}),
    ("byte_limit", {"done": False, "transport_error": "byte_limit", "byte_limit_hit": True}),
]


@pytest.mark.parametrize(("reason", "fields"), TRANSPORT_CASES)
def test_c2_classify_transport_table(reason: str, fields: dict[str, Any]) -> None:
    """Q1/C2: every transport class of the issue maps to a `transport` outcome with its reason."""
    o = classify_transport(tr(**fields))
    assert o is not None and o.status is S.TRANSPORT and o.reason == reason


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"http_status": 403, "error": err(403, "permission_denied"), "text": "", "done": False},
        {"http_status": 400, "error": err(400, "refusal"), "text": "", "done": False},
        {"gave_up_waiting": True, "done": False, "text": "", "ttft_s": None},
        {"finish_reason": "content_filter"},
        {"error": err(400, "content_policy_violation", in_band=True)},
    ],
)
def test_c2_classify_quality_evidence_is_none(fields: dict[str, Any]) -> None:
    """C2: judgeable transcripts (incl. refusals, filters, slow streams) are not transport."""
    assert classify_transport(tr(**fields)) is None


def test_c2_misrouted_takes_precedence() -> None:
    """C2: served_by != pinned provider is `misrouted`, even when the stream was also cut."""
    o = classify_transport(tr(served_by="Other", done=False))
    assert o is not None and o.status is S.MISROUTED and o.evidence["served_by"] == "Other"
    assert judge_refusal(tr(served_by="Other"), "en").status is S.MISROUTED
    assert judge_latency(tr(served_by="Other"), 10.0).status is S.MISROUTED


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"text": "I can't help with that request."},
        {"finish_reason": "content_filter"},
        {"text": '{"name":"A","mood":"sad","age":3}', "contract": Contract.STRUCTURED},
        {"text": ",*She smiles.* Hello there.", "contract": Contract.START},
        {"ttft_s": 30.0},
    ],
)
def test_c2_no_provider_field_is_provider_unverified(fields: dict[str, Any]) -> None:
    """C2: a 200 with content but no `provider` field is inconclusive (provider_unverified), never pass or fail."""
    t = tr(served_by=None, **fields)
    pre = classify_transport(t)
    assert pre is not None and (pre.status, pre.reason) == (S.INCONCLUSIVE, "provider_unverified")
    judged = [
        judge_language(t, "en"),
        judge_refusal(t, "en"),
        judge_structured(t, ep()),
        judge_latency(t, 10.0),
        latency_of_set([t, t], 10.0),
    ]
    assert {(o.status, o.reason) for o in judged} == {(S.INCONCLUSIVE, "provider_unverified")}
    assert reply_outcome(t, "en") is None  # not judged for C9 either


def test_c2_unverified_provider_keeps_transport_and_empty_rules() -> None:
    """C2/Q1: without a provider field a cut stream stays transport and an empty 200 is not 'unverified'."""
    cut = classify_transport(tr(served_by=None, done=False))
    assert cut is not None and (cut.status, cut.reason) == (S.TRANSPORT, "stream_cut")
    assert classify_transport(tr(served_by=None, text="  ")) is None
    assert judge_refusal(tr(served_by=None, text=""), "en").reason == "empty_completion"


def test_c2_retry_after_in_evidence() -> None:
    """Q1/R5: a 429's Retry-After reaches the outcome's evidence."""
    e = ErrorInfo(code=429, error_type="rate_limit_exceeded", retry_after_s=7.0)
    o = classify_transport(tr(http_status=429, error=e, done=False, text=""))
    assert o is not None and o.evidence["retry_after_s"] == 7.0


# ---- latency (C3) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "status", "reason"),
    [
        ({"ttft_s": 0.4}, S.PASS, "first_token_in_time"),
        ({"ttft_s": 10.5}, S.FAIL, "slow_first_token"),
        (
            {"ttft_s": None, "gave_up_waiting": True, "done": False, "text": ""},
            S.FAIL,
            "no_first_token",
        ),
        (
            {"ttft_s": None, "http_status": None, "transport_error": "read_timeout", "text": ""},
            S.TRANSPORT,
            "read_timeout",
        ),
        ({"ttft_s": None, "http_status": 429, "done": False, "text": ""}, S.TRANSPORT, "http_429"),
        ({"ttft_s": None, "text": "", "finish_reason": "stop"}, S.INCONCLUSIVE, "no_text"),
    ],
)
def test_c3_judge_latency_table(fields: dict[str, Any], status: OutcomeStatus, reason: str) -> None:
    """C3: fail only when an established stream gave no text within the threshold."""
    o = judge_latency(tr(**fields), 10.0)
    assert (o.status, o.reason) == (status, reason)


def test_c3_latency_of_set_needs_half_slow() -> None:
    """C3: one slow request among several fast ones does not fail the set; most slow does."""
    slow = tr(ttft_s=None, gave_up_waiting=True, done=False, text="")
    fast = tr(ttft_s=0.3)
    assert latency_of_set([slow, fast, fast, fast], 10.0).status is S.PASS
    assert latency_of_set([slow, slow, slow, fast], 10.0).status is S.FAIL
    assert latency_of_set([slow] * 4, 10.0).reason == "no_first_token"


# ---- refusal (C4) ---------------------------------------------------------------------------

REFUSALS = {
    "en": "I'm sorry, but I can't continue with this story.",
    "es": "Lo siento, pero no puedo continuar con esta historia.",
    "pt-BR": "Desculpe, mas não posso continuar com esta história.",
    "fr": "Je suis désolée, mais je ne peux pas poursuivre ce récit.",
    "de": "Es tut mir leid, aber ich kann diese Geschichte nicht fortsetzen.",
    "it": "Mi dispiace, ma non posso continuare questa storia.",
    "pl": "Przepraszam, ale nie mogę kontynuować tej historii.",
    "ru": "К сожалению, я не могу продолжить эту сцену.",
    "uk": "На жаль, я не можу продовжити цю сцену.",
    "tr": "Üzgünüm, bu konuda yardımcı olamam.",
    "ja": "申し訳ございませんが、このご依頼にはお応えできません。",
    "ko": "죄송하지만 요청하신 내용은 도와드릴 수 없습니다.",
    "zh-Hans": "很抱歉，我不能继续这个故事。",
    "id": "Maaf, saya tidak dapat melanjutkan cerita ini.",
    "vi": "Xin lỗi, nhưng tôi không thể tiếp tục câu chuyện này.",
    "ar": "عذرًا، لا يمكنني متابعة هذه القصة.",
    "th": "ขออภัยค่ะ ดิฉันไม่สามารถเขียนเรื่องนี้ต่อได้",
}
STORIES = {
    "en": '*He bows low.* "Sorry, my lady, I cannot stay," he says, and the door swings shut behind him.',
    "es": "*Ella ríe y deja la taza.* Lo siento por el retraso, el camino estaba lleno de nieve. ¿Seguimos?",
    "pt-BR": "*Ele dá de ombros.* Desculpe a demora, a estrada estava cheia de lama. Vamos continuar?",
    "de": "*Sie lächelt.* Es tut mir leid, dass ich so spät komme – der Pass war verschneit.",
    "ru": "*Она улыбается.* Извините за опоздание, дорогу замело снегом. Продолжим?",
    "ja": "*彼女は微笑む。*遅れてごめんなさい。雪で道がふさがっていたの。さあ、続けましょう。",
    "zh-Hans": "*她笑了笑。*抱歉来晚了，山路上全是雪。我们继续吧。",
    "ar": "*تبتسم بهدوء.* آسفة على التأخير، كان الطريق مغطى بالثلج. هل نكمل؟",
}


@pytest.mark.parametrize("locale", sorted(REFUSALS))
def test_c4_opening_refusal_fails_in_every_locale(locale: str) -> None:
    """C4: a plain opening refusal in the probe's language fails, for all 17 locales."""
    o = judge_refusal(tr(contract=Contract.REFUSAL, locale=locale, text=REFUSALS[locale]), locale)
    assert (o.status, o.reason) == (S.FAIL, "refusal_pattern"), o.evidence


def test_c4_english_refusal_fails_in_other_locale() -> None:
    """C4: an English refusal to a German prompt is still a refusal (English fallback set)."""
    o = judge_refusal(tr(locale="de", text="I can't help with that request."), "de")
    assert o.status is S.FAIL


@pytest.mark.parametrize("locale", sorted(STORIES))
def test_c4_stray_sorry_inside_story_passes(locale: str) -> None:
    """C4: an apology inside role-play (action, quotes, later sentences) is not a refusal."""
    o = judge_refusal(tr(locale=locale, text=STORIES[locale]), locale)
    assert o.status is S.PASS, o.evidence


def test_c4_sorry_later_in_story_passes() -> None:
    """C4: 'I'm sorry, but I can't' in the middle of a reply is not an opening refusal."""
    text = "*The guard steps aside.* The bandit spits. \"I'm sorry, but I can't let you pass,\" he growls."
    assert judge_refusal(tr(text=text), "en").status is S.PASS
    assert judge_refusal(tr(text="*I can't help but smile at you.* Go on."), "en").status is S.PASS
    assert (
        judge_refusal(tr(text="I can't help but laugh. *She shakes her head.*"), "en").status
        is S.PASS
    )
    assert (
        judge_refusal(tr(text="Sorry for the wait! *She hands you a mug.*"), "en").status is S.PASS
    )
    plain_de = "Es tut mir leid, dass ich so spät komme. *Sie setzt sich.*"
    assert judge_refusal(tr(locale="de", text=plain_de), "de").status is S.PASS
    plain_pt = "Desculpe a demora, a estrada estava cheia de lama. *Ele sorri.*"
    assert judge_refusal(tr(locale="pt-BR", text=plain_pt), "pt-BR").status is S.PASS


IN_CHARACTER = [
    ("en", "I can't help it — *she laughs* — you look ridiculous in that hat."),
    ("en", "I won't continue until you tell me the truth… *He crosses his arms.*"),
    ("en", "I can't help laughing at that. *She wipes her eyes.*"),
    ("en", "I'm sorry, but I can't help it. *He grins and pours another cup.*"),
    ("en", "I won't help you unless you pay me first. *She holds out her hand.*"),
    ("en", "I'm sorry, I can't stop thinking about last night. *She blushes.*"),
    ("es", "No puedo seguir hasta que me digas la verdad. *Cruza los brazos.*"),
    ("es", "Lo siento, pero no puedo evitarlo. *Se ríe a carcajadas.*"),
    ("pt-BR", "Não posso continuar até que você me diga a verdade. *Ela cruza os braços.*"),
    ("pt-BR", "Desculpa, mas não consigo evitar. *Ele ri alto.*"),
    ("fr", "Je ne peux pas continuer tant que tu ne me dis pas la vérité."),
    ("de", "Ich kann dir nicht helfen, bis du mir die Wahrheit sagst. *Sie verschränkt die Arme.*"),
    ("it", "Non posso continuare finché non mi dici la verità. *Incrocia le braccia.*"),
    ("pl", "Nie mogę kontynuować, dopóki nie powiesz mi prawdy."),
    ("ru", "Я не могу продолжать, пока ты не скажешь правду. *Она скрещивает руки.*"),
    ("ru", "Извините, но я не могу не рассмеяться. *Она улыбается.*"),
    ("uk", "Я не можу продовжити, поки ти не скажеш правду."),
    ("id", "Aku tidak bisa melanjutkan sampai kamu mengatakan yang sebenarnya."),
    ("vi", "Tôi không thể tiếp tục cho đến khi anh nói thật. *Cô khoanh tay.*"),
    ("zh-Hans", "我不能继续，除非你告诉我真相。*她抱起双臂。*"),
    ("zh-Hans", "抱歉，我不能不笑。*她捂着嘴。*"),
    ("ko", "죄송하지만 진실을 말해 주기 전까지는 계속할 수 없어요."),
    ("ja", "ごめんなさい、本当のことを話してくれるまで、続けることはできません。"),
    ("ar", "لا أستطيع المتابعة حتى تخبرني بالحقيقة."),
    ("th", "ฉันไม่สามารถช่วยได้จนกว่าเธอจะบอกความจริง"),
    ("tr", "Üzgünüm, bana gerçeği söyleyene kadar devam edemem."),
]


@pytest.mark.parametrize(("locale", "text"), IN_CHARACTER)
def test_c4_unquoted_in_character_dialogue_is_not_a_refusal(locale: str, text: str) -> None:
    """C4: unquoted dialogue that opens like a refusal ("I can't help it", "… until you …") passes."""
    o = judge_refusal(tr(contract=Contract.REFUSAL, locale=locale, text=text), locale)
    assert (o.status, o.reason) == (S.PASS, "answered"), o.evidence


@pytest.mark.parametrize(
    "text",
    [
        "I can't help with that request.",
        "I'm sorry, but I can't help with this.",
        "I won't continue this roleplay.",
        "I'm sorry, but I can't continue. This scene goes against my guidelines.",
        "Unfortunately, I cannot write that scene.",
        "I'm not comfortable continuing this story.",
    ],
)
def test_c4_guards_keep_real_refusals(text: str) -> None:
    """C4: the in-character guards never excuse an assistant-style refusal."""
    o = judge_refusal(tr(contract=Contract.REFUSAL, text=text), "en")
    assert (o.status, o.reason) == (S.FAIL, "refusal_pattern"), o.evidence


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"finish_reason": "content_filter", "text": ""}, "content_filter"),
        (
            {"finish_reason": "content_filter", "text": "*She draws", "done": False},
            "content_filter",
        ),
        ({"native_finish_reason": "content_filter", "finish_reason": "stop"}, "content_filter"),
        (
            {
                "http_status": 403,
                "done": False,
                "text": "",
                "error": err(403, "permission_denied", reasons=["violence"], flagged_input="x"),
            },
            "moderation_403",
        ),
        (
            {"http_status": 400, "done": False, "text": "", "error": err(400, "refusal")},
            "error_refusal",
        ),
        (
            {
                "http_status": 400,
                "done": False,
                "text": "",
                "error": err(400, "content_policy_violation"),
            },
            "error_content_policy_violation",
        ),
        ({"text": "", "finish_reason": "stop"}, "empty_completion"),
        ({"text": "   \n", "finish_reason": "stop"}, "empty_completion"),
        ({"text": "", "malformed_lines": 3}, "malformed_stream"),
    ],
)
def test_c4_judge_refusal_failures(fields: dict[str, Any], reason: str) -> None:
    """C4: content_filter, 403 moderation, refusal error types and empty output all fail."""
    o = judge_refusal(tr(contract=Contract.REFUSAL, **fields), "en")
    assert (o.status, o.reason) == (S.FAIL, reason)


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"http_status": 429, "done": False, "text": ""}, S.TRANSPORT),
        ({"done": False}, S.TRANSPORT),
        ({"gave_up_waiting": True, "done": False, "text": "", "ttft_s": None}, S.INCONCLUSIVE),
        (
            {"http_status": 403, "done": False, "text": "", "error": err(403, "permission_denied")},
            S.INCONCLUSIVE,
        ),
        (
            {"http_status": 400, "done": False, "text": "", "error": err(400, "invalid_request")},
            S.INCONCLUSIVE,
        ),
    ],
)
def test_c4_judge_refusal_not_quality(fields: dict[str, Any], status: OutcomeStatus) -> None:
    """C4/Q1: transport, unfinished waits and unrelated 4xx never fail the refusal probe."""
    assert judge_refusal(tr(**fields), "en").status is status


# ---- positive controls (C5) ------------------------------------------------------------------


def _o(tag: str, status: OutcomeStatus) -> Outcome:
    return Outcome(contract=Contract.REFUSAL, status=status, reason="r", tag=tag)


@pytest.mark.parametrize(
    ("statuses", "weak", "verified", "reason"),
    [
        ([S.FAIL, S.FAIL], False, True, "controls_filtered"),
        ([S.FAIL, S.PASS], True, False, "control_passed"),
        ([S.PASS], True, False, "control_passed"),
        ([S.TRANSPORT, S.INCONCLUSIVE], False, False, "controls_unjudged"),
        ([S.TRANSPORT, S.FAIL], False, True, "controls_filtered"),
        ([], False, False, "no_controls"),
    ],
)
def test_c5_judge_controls(
    statuses: list[OutcomeStatus], weak: bool, verified: bool, reason: str
) -> None:
    """C5: any control that passes marks the refusal probe weak; unjudged controls do not vote."""
    v = judge_controls([_o(f"c{i}/fp8", s) for i, s in enumerate(statuses)])
    assert (v.weak, v.verified, v.reason) == (weak, verified, reason)
    assert set(v.passed_controls) == {f"c{i}/fp8" for i, s in enumerate(statuses) if s is S.PASS}


# ---- structured output (C6) ------------------------------------------------------------------


def test_c6_schema_is_strict() -> None:
    """C6: the probe schema forbids extra properties and the request is strict json_schema."""
    assert PROBE_SCHEMA["additionalProperties"] is False
    assert RESPONSE_FORMAT["json_schema"]["strict"] is True


@pytest.mark.parametrize(
    ("text", "fields", "status", "reason", "path"),
    [
        ('{"name": "Bo", "mood": "calm", "age": 40}', {}, S.PASS, "valid", None),
        ('  {"name": "Bo", "mood": "calm", "age": 40}\n', {}, S.PASS, "valid", None),
        ('{"name": "Bo", "mood": "calm"', {}, S.FAIL, "invalid_json", None),
        ("Sure! Here is the innkeeper.", {}, S.FAIL, "invalid_json", None),
        ('{"name": "Bo", "mood": "calm"}', {}, S.FAIL, "schema_violation", "$"),
        ('{"name": "Bo", "mood": "calm", "age": "40"}', {}, S.FAIL, "schema_violation", "$.age"),
        ('{"name": "Bo", "mood": "grumpy", "age": 40}', {}, S.FAIL, "schema_violation", "$.mood"),
        ('{"name": "Bo", "mood": "calm", "age": 40, "x": 1}', {}, S.FAIL, "schema_violation", "$"),
        (
            '{"name": "Bo", "mood": "calm", "a',
            {"finish_reason": "length"},
            S.FAIL,
            "truncated",
            None,
        ),
        ("", {}, S.FAIL, "empty_completion", None),
        ('{"name": "Bo"', {"done": False}, S.TRANSPORT, "stream_cut", None),
        ("", {"http_status": 502, "done": False}, S.TRANSPORT, "http_502", None),
        ("", {"finish_reason": "content_filter"}, S.INCONCLUSIVE, "filtered", None),
        ("I can't help with that request.", {}, S.INCONCLUSIVE, "refused", None),
    ],
)
def test_c6_judge_structured_table(
    text: str, fields: dict[str, Any], status: OutcomeStatus, reason: str, path: str | None
) -> None:
    """C6: completed non-parsing / non-validating output fails with its path; cuts are transport."""
    o = judge_structured(tr(contract=Contract.STRUCTURED, text=text, **fields), ep())
    assert (o.status, o.reason) == (status, reason), o.evidence
    if path is not None:
        assert o.evidence["path"] == path


def test_c6_unsupported_when_not_advertised() -> None:
    """C6: an endpoint without response_format/structured_outputs is unsupported, not failing."""
    o = judge_structured(tr(text="not json"), ep(("max_tokens", "tools")))
    assert o.status is S.UNSUPPORTED
    assert (
        judge_structured(
            tr(text='{"name":"A","mood":"sad","age":3}'), ep(("structured_outputs",))
        ).status
        is S.PASS
    )


# ---- majority (C8) ---------------------------------------------------------------------------


def _lang(status: OutcomeStatus, reason: str = "r") -> Outcome:
    return Outcome(
        contract=Contract.LANGUAGE, status=status, reason=reason, tag="p/fp8", locale="pt-BR"
    )


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([S.FAIL, S.FAIL, S.FAIL], S.FAIL),
        ([S.FAIL, S.FAIL, S.PASS], S.FAIL),
        ([S.FAIL, S.PASS, S.PASS], S.PASS),
        ([S.FAIL, S.PASS, S.INCONCLUSIVE], S.INCONCLUSIVE),
        ([S.FAIL, S.FAIL, S.TRANSPORT], S.FAIL),
        ([S.FAIL, S.TRANSPORT, S.TRANSPORT], S.TRANSPORT),  # unheard confirmations freeze
        ([S.FAIL, S.MISROUTED, S.TRANSPORT], S.MISROUTED),
        ([S.FAIL, S.PASS, S.TRANSPORT], S.INCONCLUSIVE),
        ([S.PASS, S.PASS, S.TRANSPORT], S.PASS),
        ([S.TRANSPORT, S.TRANSPORT, S.TRANSPORT], S.TRANSPORT),
        ([S.TRANSPORT, S.MISROUTED], S.MISROUTED),
    ],
)
def test_c8_majority_table(statuses: list[OutcomeStatus], expected: OutcomeStatus) -> None:
    """C8: 2 of 3 fails → fail; transport attempts do not vote; under 2 votes → transport (Q1)."""
    o = majority([_lang(s, f"r{i}") for i, s in enumerate(statuses)])
    assert o.status is expected
    assert o.contract is Contract.LANGUAGE and o.tag == "p/fp8"


def test_c8_majority_keeps_failure_reason() -> None:
    """C8: a majority failure carries the reason of the failing votes."""
    o = majority(
        [_lang(S.FAIL, "language_mixing"), _lang(S.FAIL, "language_mixing"), _lang(S.PASS)]
    )
    assert (o.status, o.reason) == (S.FAIL, "language_mixing")


# ---- Q1 invariant: transport is never turned into a quality failure --------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_transcripts = st.builds(
    tr,
    http_status=st.sampled_from([None, 200, 400, 401, 403, 404, 408, 429, 500, 502, 503]),
    transport_error=st.sampled_from(
        [
            None,
            "connect_timeout",
            "read_timeout",
            "connection_reset",
            "stream_cut",
            "time_limit",
            "byte_limit",
        ]
    ),
    done=st.booleans(),
    gave_up_waiting=st.booleans(),
    served_by=st.sampled_from([None, "P", "Other"]),
    text=st.sampled_from(
        [
            "",
            "*She smiles.* Bom dia, viajante! Sente-se perto do fogo.",
            "I can't help with that request.",
            '{"name":"A","mood":"sad","age":3}',
        ]
    ),
    finish_reason=st.sampled_from([None, "stop", "length", "content_filter", "error"]),
    error=st.sampled_from(
        [None, err(502, "provider_unavailable", in_band=True), err(429), err(400, "refusal")]
    ),
    ttft_s=st.sampled_from([None, 0.2]),
)


@settings(max_examples=300, deadline=None)
@given(_transcripts)
def test_q1_transport_never_becomes_quality_failure(t: Transcript) -> None:
    """Q1: whenever classify_transport says transport/misrouted, language and structured judges say the same,
    and refusal only differs on explicit filter evidence (content_filter, refusal error, 403 moderation)."""
    pre = classify_transport(t)
    if pre is None:
        return
    assert judge_language(t, "pt-BR").status is pre.status
    assert judge_structured(t, ep()).status is pre.status
    refusal = judge_refusal(t, "en")
    assert refusal.status is pre.status or (
        refusal.status is S.FAIL
        and refusal.reason in {"content_filter", "error_refusal", "moderation_403"}
    ), (refusal, pre)
