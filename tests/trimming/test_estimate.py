from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trimgate.trimming import estimate
from trimgate.trimming.estimate import (
    MAX_RATIO,
    MIN_RATIO,
    Calibration,
    framed_tokens,
    message_tokens,
    nonascii_utf8_len,
    observe,
    scale,
    text_tokens,
    utf8_len,
)

# every code point, lone surrogates included (a JSON "\ud800" escape decodes to one)
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None))


@pytest.mark.parametrize(
    ("nbytes", "tokens"),
    [(0, 4), (40, 14), (11, 7), (16, 8), (13, 8), (40_000, 10_004), (49, 17)],
)
def test_reference_anchors(nbytes: int, tokens: int) -> None:
    assert message_tokens(nbytes) == tokens
    assert framed_tokens(nbytes) == tokens


@given(st.integers(min_value=0, max_value=2**40), st.integers(0, 50), st.integers(0, 5000))
def test_one_formula(nbytes: int, media: int, media_tokens: int) -> None:
    """framed_tokens is message_tokens without media; both are ceil(bytes / 4) + framing."""
    assert framed_tokens(nbytes) == message_tokens(nbytes) == -(-nbytes // 4) + 4
    assert message_tokens(nbytes, media, media_tokens) == framed_tokens(nbytes) + (
        media * media_tokens
    )


def test_utf8_bytes_not_characters() -> None:
    assert utf8_len("héllo") == 6
    assert utf8_len("日本") == 6
    assert utf8_len("🙂") == 4
    assert text_tokens("🙂" * 10) == 10 + 4


@pytest.mark.parametrize(
    "text",
    [
        "\x80",  # CPython stores it one byte per code point, like Latin-1
        "\x7f\x80\xff",
        "\u07ff\u0800\uffff",  # two bytes per code point
        "\ud800\udfff",  # lone surrogates: 3 bytes each
        "\U00010000\U0010ffff\x01",  # four bytes per code point
        "a" * 1000 + "é",  # past the vectorised loop's blocks
        "é" * 1001 + "\U0001f642" * 3,
    ],
)
def test_nonascii_utf8_len_is_the_encoded_length(text: str) -> None:
    assert nonascii_utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))


@given(ANY_TEXT)
def test_utf8_len_counts_what_encoding_writes(text: str) -> None:
    expected = len(text.encode("utf-8", "surrogatepass"))
    assert utf8_len(text) == expected
    assert nonascii_utf8_len(text) == expected  # also right on ASCII, though not called there


def test_the_c_count_refuses_what_is_not_a_str() -> None:
    if estimate._utf8_len is None:
        pytest.skip("pure-Python install: texts are encoded to be sized")
    with pytest.raises(TypeError, match="takes a str, not bytes"):
        estimate._utf8_len(b"abc")  # type: ignore[arg-type]


def test_media_costs_a_fixed_price() -> None:
    assert message_tokens(0, media=2, media_tokens=1600) == 3204


def test_scale_rounds_up() -> None:
    assert scale(10, 1.0) == 10
    assert scale(10, 1.25) == 13


def test_first_observation_sets_the_ratio() -> None:
    state = observe(Calibration(), reported=1250, estimated=1000)
    assert state.ratio == pytest.approx(1.25) and state.samples == 1
    assert state.planning_ratio > state.ratio  # some headroom until the spread is known


def test_planning_ratio_covers_the_spread() -> None:
    import random

    rng = random.Random(3)
    state = Calibration()
    for _ in range(100):
        state = observe(state, round(1000 * rng.uniform(1.2, 1.3)), 1000)
    assert 1.22 <= state.ratio <= 1.28
    assert state.planning_ratio >= 1.28


def test_steady_ratio_needs_no_headroom() -> None:
    state = Calibration()
    for _ in range(40):
        state = observe(state, 1100, 1000)
    assert state.planning_ratio == pytest.approx(1.1, abs=0.001)


def test_unobserved_plans_with_one() -> None:
    assert Calibration().planning_ratio == 1.0


def test_bounded() -> None:
    state = Calibration()
    for _ in range(20):
        state = observe(state, 1_000_000, 1000)
    assert state.ratio == MAX_RATIO
    for _ in range(200):
        state = observe(state, 1, 1000)
    assert state.ratio == pytest.approx(MIN_RATIO)


def test_tiny_prompts_and_bad_reports_are_ignored() -> None:
    state = Calibration(ratio=1.1, deviation=0.01, samples=3)
    assert observe(state, 500, 50) == state
    assert observe(state, 0, 5000) == state


def test_converges_on_a_steady_ratio() -> None:
    state = Calibration()
    for reported in [1200, 1300, 1250, 1220, 1280] * 10:
        state = observe(state, reported, 1000)
    assert 1.22 <= state.ratio <= 1.30
