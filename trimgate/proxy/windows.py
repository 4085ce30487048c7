"""Windows learned from overflows, for models neither the config nor the catalog knows.

Rules of this module:
- What an overflow teaches is decided in the core (``policy.learned_window``); this
  module only remembers it, per process: each ``--workers`` process learns on its own.
- Bounded whatever clients send: at most ``MAX_LEARNED_MODELS`` models (the oldest
  learned is forgotten first), model strings longer than ``MAX_LEARNED_MODEL_LEN`` are
  never learned (no two names share a key), and at most ``MAX_WINDOW_LABELS`` distinct
  names get a ``model`` label of their own on ``trimgate_learned_window_tokens``; the
  rest share ``other``, which holds the latest window learned among them.
- A window once learned is kept (until evicted): a later overflow of the same model does
  not change it, and the ``window_learned`` log line is written once per model.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

MAX_LEARNED_MODELS = 256
MAX_LEARNED_MODEL_LEN = 256
MAX_WINDOW_LABELS = 32
OTHER = "other"


class LearnedWindows:
    """Model string -> the window its first overflow stated."""

    def __init__(
        self, max_models: int = MAX_LEARNED_MODELS, max_labels: int = MAX_WINDOW_LABELS
    ) -> None:
        self._windows: OrderedDict[str, int] = OrderedDict()
        self._labels: set[str] = set()
        self.max_models = max_models
        self.max_labels = max_labels

    @property
    def windows(self) -> Mapping[str, int]:
        """Model string -> learned window (read it, never write it)."""
        return self._windows

    def learn(self, model: str | None, window: int) -> str | None:
        """Remember ``window`` for ``model`` if it is new; its metric label when it is
        (a learned name, or ``other``), None when nothing was learned."""
        if not model or len(model) > MAX_LEARNED_MODEL_LEN or model in self._windows:
            return None
        if len(self._windows) >= self.max_models:
            self._windows.popitem(last=False)  # the oldest learned goes first
        self._windows[model] = window
        if model in self._labels:
            return model
        if len(self._labels) < self.max_labels:
            self._labels.add(model)
            return model
        return OTHER

    def __len__(self) -> int:
        return len(self._windows)
