"""Token estimates and the calibration maths.

Estimate (docs/trimming.md, "Token estimate"): per message ``ceil(utf8_bytes / 4) + 4`` over its
text-bearing content, plus a fixed price per image, audio clip or document.

Calibration learns, per model, how far the provider's real prompt count is
from the estimate: a smoothed mean of the observed ratios and of their spread.
Planning uses the mean plus twice the spread, because an estimate that is too
low costs an overflow round trip while one a little too high costs only a
little context. With a steady ratio the spread shrinks towards zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

_utf8_len: Callable[[str], int] | None
try:
    from trimgate.trimming._utf8 import utf8_len as _utf8_len
except ImportError:  # not built: a pure-Python install
    _utf8_len = None

MESSAGE_FRAMING_TOKENS: Final = 4
DEFAULT_MEDIA_TOKENS: Final = 1600

MIN_RATIO = 0.5
MAX_RATIO = 3.0
WEIGHT = 0.25  # smoothing of the mean ratio and of its deviation
HEADROOM = 2.0  # plan with mean + HEADROOM x deviation: an overflow costs a round trip
FIRST_DEVIATION = 0.02  # assumed spread until observations show the real one
MIN_OBSERVED_TOKENS = 200  # tiny prompts are dominated by hidden provider framing


def utf8_len(text: str) -> int:
    # ASCII strings (the common case) know their byte length without encoding.
    return len(text) if text.isascii() else nonascii_utf8_len(text)


def nonascii_utf8_len(text: str) -> int:
    """``len(text.encode("utf-8", "surrogatepass"))``: counted in C without encoding when
    the extension is built (``trimgate/trimming/_utf8.c``), else by encoding. The codecs call it
    for texts that are not ASCII; ASCII ones are sized by ``len``."""
    if _utf8_len is not None:
        return _utf8_len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def bytes_tokens(nbytes: int) -> int:
    """``ceil(nbytes / 4)``: the token estimate of text without message framing."""
    return (nbytes + 3) // 4


def framed_tokens(text_bytes: int) -> int:
    """The estimate of a message of text only: ``message_tokens(text_bytes)`` without the
    media term, for the codecs' hottest loops."""
    return (text_bytes + 3) // 4 + MESSAGE_FRAMING_TOKENS


def message_tokens(
    text_bytes: int, media: int = 0, media_tokens: int = DEFAULT_MEDIA_TOKENS
) -> int:
    """The estimate of one message: ``ceil(text_bytes / 4)`` plus the framing, plus
    ``media_tokens`` per image, audio clip or document. Every codec sizes its messages
    with it or ``framed_tokens``; compiled, either is a direct C call."""
    return (text_bytes + 3) // 4 + MESSAGE_FRAMING_TOKENS + media * media_tokens


def text_tokens(text: str) -> int:
    """The estimate of a message whose only content is ``text``."""
    return message_tokens(utf8_len(text))


def scale(tokens: int, ratio: float) -> int:
    """An estimate in provider tokens: ``ceil(tokens * ratio)``."""
    if ratio == 1.0:
        return tokens
    return math.ceil(tokens * ratio)


@dataclass(frozen=True, slots=True)
class Calibration:
    ratio: float = 1.0  # smoothed mean of provider tokens per estimated token
    deviation: float = 0.0  # smoothed mean absolute deviation of the observations
    samples: int = 0

    @property
    def planning_ratio(self) -> float:
        """The ratio to plan with: the mean plus headroom for the spread seen."""
        if self.samples == 0:
            return 1.0
        return min(MAX_RATIO, self.ratio + HEADROOM * self.deviation)


def observe(state: Calibration, reported: int, estimated: int) -> Calibration:
    """Fold one provider-reported prompt count into the calibration state."""
    if estimated < MIN_OBSERVED_TOKENS or reported <= 0:
        return state
    observed = min(MAX_RATIO, max(MIN_RATIO, reported / estimated))
    if state.samples == 0:
        return Calibration(observed, FIRST_DEVIATION * observed, 1)
    ratio = state.ratio + WEIGHT * (observed - state.ratio)
    deviation = state.deviation + WEIGHT * (abs(observed - state.ratio) - state.deviation)
    return Calibration(min(MAX_RATIO, max(MIN_RATIO, ratio)), deviation, state.samples + 1)
