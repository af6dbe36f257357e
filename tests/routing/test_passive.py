"""Production traffic as evidence (SPEC O8), the pure parts: what an attempt says of its
provider, the sliding window per (model, provider), the suspect rule (the canary's own peer
comparison), and the bounded ejection (Envoy's growing interval, the share ceiling, the
capacity floor, an end that needs nothing to run)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ground.settings import PassiveConfig, ProbeConfig
from probes.exact import bonferroni, fisher_greater
from probes.peers import Rate
from routing.breaker import BreakerBoard
from routing.classify import Classification
from routing.ejection import Ejection, EjectionBook, Held, ejection_length_s, share_allows
from routing.errors import FailureClass as F
from routing.listing import ListingBook
from routing.passive import OK, PassiveBook, Reason, Suspicion, passive_verdict
from routing.providers import ListedEndpoint, allowed
from routing.response import Completion, ToolCall
from routing.routes import parse_routes
from routing.steer import Steering

MODEL = "acme/alpha"
CONFIG = PassiveConfig()


def _reply(content: str = "*She smiles.*", finish: str = "stop", **kw: object) -> Completion:
    return Completion(content=content, finish_reason=finish, done=True, provider="P", **kw)  # type: ignore[arg-type]


def _rejected(reason: str, cls: F = F.INVALID_RESPONSE, **kw: object) -> Classification:
    return Classification(cls, reason, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("c", "comp", "expected"),
    [
        (None, _reply(), OK),
        (_rejected("stray_start"), _reply(",*She"), "start"),
        (_rejected("schema_invalid"), _reply("{}"), "schema"),
        (_rejected("malformed_json"), _reply("{"), "schema"),
        (_rejected("tool_args_invalid"), _reply(""), "tool_call"),
        (_rejected("unknown_tool"), _reply(""), "tool_call"),
        (_rejected("finish_length"), _reply("cut", "length"), "truncation"),
        (None, _reply("cut", "length"), "truncation"),  # a contract that takes a cut
        (None, _reply("  "), "empty"),  # a contract that takes an empty reply
        (None, _reply("", "tool_calls", tool_calls=[ToolCall("c1", "f", "{}")]), OK),
        (_rejected("rate_limit_exceeded", F.CAPACITY), Completion(), None),
        (_rejected("connect_error", F.TRANSIENT), Completion(), None),
        (_rejected("in_band_error"), _reply(), None),  # no reason of the five
        (_rejected("stray_start", client_params=("stop",)), _reply(",x"), None),
        (_rejected("max_tokens_too_small", F.PERMANENT), _reply("x", "length"), None),
    ],
)
def test_o8_what_an_attempt_says_of_its_provider(
    c: Classification | None, comp: Completion, expected: str | None
) -> None:
    """Judged replies are evidence (accepted, or failing for one of the five reasons);
    transport, capacity, other rejections and a client's own doing are none."""
    assert passive_verdict(c, comp, client_shaped=False, cancelled=False) == expected


def test_o8_client_shaped_and_cancelled_attempts_are_no_evidence() -> None:
    """A request whose client set output-shaping parameters counts neither way, accepted or
    not (routing/attribution.py); nor does a cancelled attempt."""
    assert passive_verdict(None, _reply(), client_shaped=True, cancelled=False) is None
    assert passive_verdict(_rejected("stray_start"), _reply(","), client_shaped=True,
                           cancelled=False) is None  # fmt: skip
    assert passive_verdict(None, _reply(), client_shaped=False, cancelled=True) is None


def _feed(
    book: PassiveBook, provider: str, n: int, every: int, reason: str, now: float
) -> list[Suspicion]:
    """`n` judged replies of `provider`, every `every`-th failing for `reason` (0: none)."""
    found = []
    for i in range(1, n + 1):
        verdict = reason if every and i % every == 0 else OK
        s = book.observe(MODEL, provider, verdict, ttft_ms=300.0, now=now)
        if s is not None:
            found.append(s)
    return found


def test_o8_an_outlier_becomes_suspect_with_the_canarys_own_test() -> None:
    """Peers answer 300 clean replies; a provider whose every fourth start is stray is
    suspect at its 20th reply (the minimum), 5 of 20 against 0 of 300, with the p-value the
    canary's peer comparison gives (one-sided Fisher exact, Bonferroni over the three
    providers compared)."""
    book = PassiveBook(CONFIG, ProbeConfig())
    _feed(book, "B", 150, 0, "start", 0.0)
    _feed(book, "C", 150, 0, "start", 0.0)
    found = _feed(book, "A", 30, 4, "start", 1.0)
    assert found, "a 25% stray-start provider against 0 of 300 is an outlier"
    s = found[0]
    assert (s.provider, s.reason, s.host, s.peers) == ("A", Reason.START, Rate(k=5, n=20), Rate(k=0, n=300))  # fmt: skip
    assert s.p_adjusted == pytest.approx(bonferroni(fisher_greater(5, 20, 0, 300), 3))
    assert s.words() == "5 of 20 replies rejected for a stray start, peers 0 of 300"
    assert list(book.suspects(MODEL, 2.0)) == ["A"]
    figures = book.figures(MODEL, 2.0)
    assert figures["A"].failures[Reason.START] == 7 and figures["A"].ttft_p50_ms == 300.0


def test_o8_no_suspect_below_the_minimum_nor_for_a_shared_defect() -> None:
    """Below `min_requests` nothing is judged; a defect every provider shows (the model's)
    makes no provider suspect; one odd failure among hundreds is nothing."""
    book = PassiveBook(PassiveConfig(min_requests=20), ProbeConfig())
    _feed(book, "B", 200, 0, "start", 0.0)
    assert not _feed(book, "A", 19, 2, "start", 0.0)  # 9 of 19: under the minimum of 20
    shared = PassiveBook(CONFIG, ProbeConfig())
    for name in ("A", "B", "C"):
        assert not _feed(shared, name, 100, 3, "truncation", 0.0)
    assert not shared.suspects(MODEL, 1.0)
    odd = PassiveBook(CONFIG, ProbeConfig())
    _feed(odd, "B", 300, 300, "schema", 0.0)
    assert not _feed(odd, "A", 300, 150, "schema", 0.0)


def test_o8_the_window_forgets_and_the_suspicion_ages_out() -> None:
    """After `window_s` the provider's figures are gone and it is no longer suspect."""
    book = PassiveBook(CONFIG, ProbeConfig())
    _feed(book, "B", 300, 0, "start", 0.0)
    assert _feed(book, "A", 30, 3, "start", 0.0)
    later = CONFIG.window_s + 1
    assert book.suspects(MODEL, later) == {}
    assert all(f.replies == 0 for f in book.figures(MODEL, later).values())


# ---- ejection ---------------------------------------------------------------------------------


def _listing(n: int) -> tuple[ListedEndpoint, ...]:
    return tuple(ListedEndpoint(f"p{i}/fp8", f"P{i}") for i in range(n))


def test_o8_the_ejection_grows_with_each_one_is_capped_and_forgotten() -> None:
    """Base x times ejected, capped at the maximum; a provider not ejected for
    `eject_forget_s` starts again at the base."""
    c = PassiveConfig(eject_base_s=30, eject_max_s=100, eject_forget_s=1000)
    book = EjectionBook(c, floor=2)
    ends = _listing(5)
    lengths, now = [], 0.0
    for _ in range(5):
        e = book.decide(MODEL, "P0", "start", ends, now)
        assert isinstance(e, Ejection)
        lengths.append(e.length_s)
        now = e.until + 1
    assert lengths == [30, 60, 90, 100, 100]
    e = book.decide(MODEL, "P0", "start", ends, now + 1000)
    assert isinstance(e, Ejection) and (e.times, e.length_s) == (1, 30)
    assert [ejection_length_s(t, c) for t in (1, 2, 3, 4)] == [30, 60, 90, 100]


def test_o8_the_ejection_ends_by_itself() -> None:
    """In force from its decision until `until`, then gone: nothing has to run (the
    clock is injected)."""
    book = EjectionBook(CONFIG, floor=2)
    e = book.decide(MODEL, "P1", "start", _listing(4), 100.0)
    assert isinstance(e, Ejection)
    assert [x.provider for x in book.ejected(MODEL, 100.0 + CONFIG.eject_base_s - 0.01)] == ["P1"]
    assert book.ejected(MODEL, 100.0 + CONFIG.eject_base_s) == []
    assert book.decide(MODEL, "P1", "start", _listing(4), 101.0) is Held.ALREADY


def test_o8_share_ceiling_and_capacity_floor() -> None:
    """At most max(1, floor(share x providers)) at once: 8 providers at 0.25 -> 2; three ->
    1; never below the floor of two allowed endpoints (two providers: none ejected)."""
    book = EjectionBook(PassiveConfig(max_ejected_share=0.25), floor=2)
    ends = _listing(8)
    assert isinstance(book.decide(MODEL, "P0", "start", ends, 0.0), Ejection)
    assert isinstance(book.decide(MODEL, "P1", "start", ends, 0.0), Ejection)
    assert book.decide(MODEL, "P2", "start", ends, 0.0) is Held.SHARE
    three = EjectionBook(PassiveConfig(max_ejected_share=1.0), floor=2)
    assert isinstance(three.decide(MODEL, "P0", "start", _listing(3), 0.0), Ejection)
    assert three.decide(MODEL, "P1", "start", _listing(3), 0.0) is Held.FLOOR
    two = EjectionBook(PassiveConfig(max_ejected_share=1.0), floor=2)
    assert two.decide(MODEL, "P0", "start", _listing(2), 0.0) is Held.FLOOR
    assert share_allows(0, 3, 0.25) and not share_allows(1, 3, 0.25)


def test_o8_observe_only_and_an_unlisted_provider_are_held() -> None:
    """With ejection off a suspect is only recorded; a provider no listing names cannot be
    ignored by slug."""
    assert (
        EjectionBook(PassiveConfig(eject=False), floor=2).decide(
            MODEL, "P0", "start", _listing(5), 0.0
        )
        is Held.OBSERVE
    )
    assert EjectionBook(CONFIG, floor=2).decide(MODEL, "Nobody", "start", _listing(5), 0.0) is (
        Held.UNLISTED
    )


@settings(max_examples=200, deadline=None)
@given(
    providers=st.integers(min_value=1, max_value=10),
    share=st.floats(min_value=0.05, max_value=1.0),
    floor=st.integers(min_value=0, max_value=4),
    steps=st.lists(
        st.tuples(st.integers(min_value=0, max_value=9), st.floats(min_value=0, max_value=200)),
        max_size=40,
    ),
)
def test_o8_ejections_never_pass_the_ceiling_or_the_floor(
    providers: int, share: float, floor: int, steps: list[tuple[int, float]]
) -> None:
    """Whatever the suspicions and their times, the ejections in force never exceed the share
    ceiling, and the endpoints they leave never fall below the floor."""
    config = PassiveConfig(max_ejected_share=share, eject_base_s=20, eject_max_s=60)
    book = EjectionBook(config, floor=floor)
    ends = _listing(providers)
    now = 0.0
    for who, dt in sorted(steps, key=lambda s: s[1]):
        now = max(now, dt)
        book.decide(MODEL, f"P{who % providers}", "start", ends, now)
        active = book.ejected(MODEL, now)
        assert len(active) <= max(1, int(share * providers))
        if active:
            assert len(allowed(ends, [t for e in active for t in e.tags])) >= floor


def test_o8_r13_the_router_adds_an_ejection_only_above_the_request_floor() -> None:
    """The steering puts an ejected provider into a request's provider.ignore, unless the
    quarantine's list already leaves only the floor (then that request still reaches it)."""
    routes = parse_routes(
        {"version": 1, "routes": [{"id": "alpha", "model": MODEL, "context_length": 8192}],
         "groups": {"text": ["alpha"]}}
    )  # fmt: skip
    route = routes.routes[0]
    listings = ListingBook(None)
    listings.put(MODEL, _listing(4))
    ejections = EjectionBook(CONFIG, floor=2)
    assert isinstance(ejections.decide(MODEL, "P0", "start", _listing(4), 0.0), Ejection)
    steering = Steering(BreakerBoard(), listings, 2, ejections)
    ignore, _ = steering.ignore_for(route, "chat", [], [], 1.0)
    assert ignore == ["p0/fp8"]
    ignore, _ = steering.ignore_for(route, "chat", ["p1/fp8", "p2/fp8"], [], 1.0)
    assert ignore == ["p1/fp8", "p2/fp8"]  # two left: the floor keeps P0 reachable
    ignore, _ = steering.ignore_for(route, "chat", [], [], 1.0 + CONFIG.eject_base_s)
    assert ignore == []  # ended by itself


def test_o8_each_reason_names_the_canary_contract_that_confirms_it() -> None:
    """A triage of a suspect runs the contract of its reason (start, structured, tools when
    this canary has it), or every contract when it has none of that name."""
    from probes.types import Contract

    known = {c.value for c in Contract}
    assert Reason.START.contracts == ["start"] and Reason.SCHEMA.contracts == ["structured"]
    assert Reason.TRUNCATION.contracts == Reason.EMPTY.contracts == ["start"]
    assert Reason.TOOL_CALL.contracts == (["tools"] if "tools" in known else [])
    assert all(set(r.contracts) <= known for r in Reason)


def test_o8_a_client_shaped_request_counts_for_nobody_in_the_gateway() -> None:
    """The router's shell: an attempt whose client set output-shaping parameters leaves no
    evidence (its record's `passive` is None, the window unchanged); a plain one counts."""
    from routing.attempt import AttemptResult
    from routing.metrics import RouterMetrics
    from routing.passive_watch import PassiveWatch

    route = parse_routes(
        {"version": 1, "routes": [{"id": "alpha", "model": MODEL, "context_length": 8192}],
         "groups": {"text": ["alpha"]}}
    ).routes[0]  # fmt: skip
    watch = PassiveWatch(CONFIG, ProbeConfig(), floor=2, listings=None, sink=None,
                         metrics=RouterMetrics(), clock=lambda: 5.0)  # fmt: skip
    shaped = AttemptResult(route=route, started=0.0, completion=_reply(",*She"),
                           classification=_rejected("stray_start"), client_params=("stop",))  # fmt: skip
    watch.observe(shaped, cancelled=False)
    assert shaped.passive is None and watch.book.figures(MODEL, 5.0) == {}
    plain = AttemptResult(route=route, started=0.0, completion=_reply())
    watch.observe(plain, cancelled=False)
    assert plain.passive == OK and watch.book.figures(MODEL, 5.0)["P"].replies == 1
