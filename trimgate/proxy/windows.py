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
- An unknown Gemini model's window may also be asked of its upstream (``models.get``,
  ``GeminiLookups``): once per model, in the background, bounded in time and number.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from urllib.parse import parse_qsl, urlencode

import orjson
from multidict import CIMultiDict
from yarl import URL

from trimgate.proxy.upstream import UpstreamClient, read_head
from trimgate.trimming.policy import learned_window

log = logging.getLogger("trimgate")

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


# --- Gemini's models.get -------------------------------------------------------------

GEMINI_LOOKUP_TIMEOUT = 5.0  # seconds for the whole exchange; the request never waits
MAX_LOOKUPS_IN_FLIGHT = 4
MAX_LOOKUP_BYTES = 64 * 1024
# A Gemini API call on a model (not Vertex AI's project paths): its models.get is the
# same path without the ":method".
_GEMINI_CALL = re.compile(r"^(/v1[a-z0-9]*/(?:models|tunedModels)/[^/:]+):[A-Za-z]+$")
# The client's credentials, sent with the lookup to the same upstream (nothing else)
_CREDENTIALS = ("x-goog-api-key", "authorization")

Learn = Callable[[str, int], None]  # (model, window) once a lookup states one


def models_get_path(path: str) -> str | None:
    """The ``models.get`` path of a Gemini API call's path, or None (not one)."""
    found = _GEMINI_CALL.match(path)
    return found.group(1) if found else None


class GeminiLookups:
    """Gemini's ``models.get`` (``inputTokenLimit``), asked once per unknown model.

    In the background: the request that starts a lookup is not held up by it, and a
    lookup gives up after ``timeout`` seconds. At most ``max_in_flight`` at once and
    ``MAX_LEARNED_MODELS`` models remembered as asked (the oldest forgotten first);
    asked only of the upstream the request was routed to, with the request's own
    credentials and nothing else of it.
    """

    def __init__(
        self,
        client: Callable[[], UpstreamClient],
        *,
        timeout: float = GEMINI_LOOKUP_TIMEOUT,
        max_in_flight: int = MAX_LOOKUPS_IN_FLIGHT,
    ) -> None:
        self._client = client
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self._asked: OrderedDict[str, None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

    def ask(
        self,
        model: str | None,
        base_url: str,
        path: str,
        raw_query: str,
        headers: Mapping[str, str],
        learn: Learn,
    ) -> bool:
        """Start the lookup of ``model`` unless it was asked already (or cannot be)."""
        get_path = models_get_path(path)
        if not model or len(model) > MAX_LEARNED_MODEL_LEN or get_path is None:
            return False
        if model in self._asked or len(self._tasks) >= self.max_in_flight:
            return False
        if len(self._asked) >= MAX_LEARNED_MODELS:
            self._asked.popitem(last=False)
        self._asked[model] = None
        keys = [v for k, v in parse_qsl(raw_query, keep_blank_values=False) if k == "key"]
        query = f"?{urlencode({'key': keys[0]})}" if keys else ""
        url = URL(base_url + get_path + query, encoded=True)
        sent: CIMultiDict[str] = CIMultiDict(
            (name, value) for name in _CREDENTIALS if (value := headers.get(name)) is not None
        )
        task = asyncio.get_running_loop().create_task(self._lookup(model, url, sent, learn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _lookup(self, model: str, url: URL, headers: CIMultiDict[str], learn: Learn) -> None:
        failure = "NoInputTokenLimit"  # an error status, or no usable inputTokenLimit
        try:
            async with asyncio.timeout(self.timeout):
                window = learned_window(await self._get(url, headers))
        except Exception as exc:  # unreachable, timed out, not JSON, a bug
            window, failure = None, type(exc).__name__
        if window is None:
            log.info(
                "models.get gave no window",
                extra={"event": "window_lookup_failed", "error_type": failure},
            )
            return
        learn(model, window)

    async def _get(self, url: URL, headers: CIMultiDict[str]) -> int | None:
        resp = await self._client().request("GET", url, headers, b"")
        try:
            if resp.status != 200:
                return None
            body, complete = await read_head(resp, MAX_LOOKUP_BYTES)
        finally:
            resp.close()
        if not complete:
            return None
        data = orjson.loads(body)
        limit = data.get("inputTokenLimit") if isinstance(data, dict) else None
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None

    async def close(self) -> None:
        """Cancel the lookups in flight (before the upstream client closes)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
