"""How an error is read: the JSON walk that collects an error's messages, codes and
counts (success bodies never read), and the decision on them (overflow.py's rules).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final

from trimgate.providers.overflow_wordings import (
    _ADVICE_SENTENCE_RE,
    _ADVICE_TELLS_RE,
    _CLAIM_COUNT_FIRST_RE,
    _CLAIM_FOR_WINDOW_RE,
    _CLAIM_LIMIT_FIRST_RE,
    _CLAIM_ONLY_RE,
    _CLAIM_SETTING_RE,
    _CLAIM_TOKENS_RE,
    _CODE_COUNT_RE,
    _CODE_EXCESSES,
    _CODE_EXCLUDES,
    _CODE_KEYS,
    _CODE_SUBJECTS,
    _COUNT_RE,
    _CTX_SIZE_RE,
    _ECHO_KEYS,
    _GEN_ADVICE_RE,
    _GEN_CONTEXT_RE,
    _GEN_EXCESS_RE,
    _GEN_EXCLUDE_RE,
    _GEN_HEDGE_RE,
    _GEN_LIMIT_RE,
    _GEN_LIMIT_STATED_RE,
    _GEN_SHAPE_EXCLUDE_RE,
    _GEN_SUBJECT_RE,
    _GEN_TOO_LONG_RE,
    _GEN_ZH_EXCESS_RE,
    _GEN_ZH_EXCLUDE_RE,
    _GEN_ZH_SUBJECT_RE,
    _GENERIC_STATUSES,
    _HINTS,
    _ITEM_GATE_RE,
    _ITEM_LIMIT_RE,
    _ITEM_OUTPUT_AFTER_RE,
    _ITEM_OUTPUT_BEFORE_RE,
    _ITEM_PROMPT_AFTER_RE,
    _ITEM_PROMPT_BEFORE_RE,
    _KV_SIZE_RE,
    _LIMIT_ONLY_RE,
    _LIMIT_PAREN_RE,
    _MAX_CODE_LENGTH,
    _NEGATIVE_LIMIT_RE,
    _NEST_KEYS,
    _NEVER_CODES,
    _NEVER_STATUSES,
    _NEVER_WORDS,
    _NO_ROOM_RE,
    _OUTPUT_SETTING_RE,
    _OUTPUT_WORD_RE,
    _OVERFLOW_CODES,
    _PAIR_RE,
    _PART_RE,
    _PATTERNS,
    _PLAIN_STATUSES,
    _PROMPT_PARTS,
    _PROMPT_PARTS_2,
    _PROMPT_SIDE_RE,
    _PROMPT_WORD_RE,
    _RATE_HINTS,
    _RATE_RE,
    _REMEDY_NOUNS_RE,
    _REMEDY_SENTENCE_RE,
    _SENTENCE_END_RE,
    _SETTING_OVER_WINDOW_RE,
    _SIZE_COUNT_RE,
    _STATUS_COUNT_RE,
    _STATUS_KEYS,
    _STRONG_RE,
    _SUM_COUNTS_RE,
    _SUM_OUTPUT_RE,
    _SUM_RE,
    _SUM_SUBJECT_RE,
    _SUSPECT_413_RE,
    _SUSPECT_ID_RE,
    _SUSPECT_KEY_CHARS,
    _SUSPECT_NUMBER_RE,
    _SUSPECT_SUBJECT_RE,
    _TEXT_KEYS,
    _WINDOW_NAME_RE,
    _ZERO_LIMIT_RE,
)

Patterns = tuple[re.Pattern[str], ...]  # compiled operator patterns (compile_patterns)


@dataclass(frozen=True, slots=True)
class Overflow:
    real: int | None  # prompt tokens the provider says the request had (None if not stated)
    maximum: int | None  # the limit it states (None if not stated)
    # real is the prompt alone, and maximum a whole window that must hold the request's
    # output limit too (a wording that says so: Anthropic's "prompt is too long: P tokens
    # > L maximum", checked before the prompt and max_tokens together): the retry takes
    # that limit out of it (reserve_output_tokens). Not set where the maximum is an input
    # cap, already net of a reservation, or beside a total that holds one. How the counts
    # were read, not what they are: two readings of the same counts are equal
    whole: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class Suspect:
    """An error no reader recognises whose words point at the prompt's size (or, not
    ``worded``, a plain client error that only the request's growth can make a suspect)."""

    wording: str  # its status and messages, ids and numbers blanked: the wording's key
    numbers: tuple[int, ...]  # the numbers its messages state, in order
    # its words point at the prompt's size; False: a plain 400, 413 or 422 with a message
    # (``detect_suspect(plain=True)``), which the shell probes only for a request larger
    # than the largest its upstream answered with success. Not part of the wording's key
    worded: bool = field(default=True, compare=False)


# --------------------------------------------------------------------------- JSON walking

_MAX_DEPTH: Final = 6
_MAX_ITEMS: Final = 16

_decoder: Final = json.JSONDecoder()
# Counts an error object states as fields of its own, beside a recognised wording that
# states none: llama.cpp's n_prompt_tokens / n_ctx, a gateway's input_tokens /
# available_tokens (linto's llm-gateway: the window less its output reservation), or
# estimated_input_tokens / requested_output_tokens / context_window (llm_gateway's
# "details": the window holds the output asked for)
_COUNT_FIELDS: Final = (
    ("n_prompt_tokens", "prompt"),
    ("input_tokens", "prompt"),
    ("prompt_tokens", "prompt"),
    ("estimated_input_tokens", "prompt"),
    ("n_ctx", "window"),
    ("available_tokens", "window"),
    ("context_window", "window"),
    ("requested_output_tokens", "output"),
)
_CAMEL_RE: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A Python or Java exception's class name, two words or more ("PromptTooLongError"), or
# a code in square brackets ("Failed to start sampling: [input_too_large] ...", xAI)
_EXCEPTION_NAME_RE: Final = re.compile(
    r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+(?:Error|Exception)\b|(?<=\[)[a-z]+(?:_[a-z]+)+(?=\])"
)


class _Facts:
    __slots__ = ("attempts", "codes", "counts", "named", "raw", "room", "statuses", "texts")

    def __init__(self, raw: bytes = b"") -> None:
        self.raw = raw  # the body or event read, whole (``_waits``)
        self.texts: list[str] = []
        self.codes: set[str] = set()
        self.statuses: list[int] = []
        # the status an SDK exception names as the first message (``_walk_error``)
        self.named: int | None = None
        self.counts: dict[str, int] = {}
        self.room = _TEXT_ROOM
        # the messages each error object of a list of several said, as slices of ``texts``
        # (a failover's attempts, each read alone: ``_failed_attempt``)
        self.attempts: list[tuple[int, int]] = []

    def say(self, text: str) -> None:
        """Keep a message, within what is left of ``_TEXT_ROOM``: the readers' cost grows
        with the text they scan, and an error's own words come first."""
        if self.room > 0 and text not in self.texts:  # (an error's words said twice)
            kept = text[: self.room]
            self.room -= len(kept)
            if "&" in kept:  # (HTML's escapes, as WordPress writes "tokens &gt; 200000")
                kept = html.unescape(kept)
            if "\xa0" in kept:  # (a no-break space, "rate&nbsp;limit", is a space)
                kept = kept.replace("\xa0", " ")
            self.texts.append(kept)


# The characters of messages one answer's readers scan, all its messages together: the
# longest the corpus and held-out sets hold is 1,249. A 64 KiB message cost the readers
# 150-180 ms of the event loop; this much, about 10 ms (pure Python, a 2-core VM).
_TEXT_ROOM: Final = 4096


def _walk_error(node: Any, facts: _Facts, depth: int) -> None:
    """Collect messages, codes and counts from an error object and the errors inside it."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, str):
        _add_text(node, facts, depth)
        return
    if isinstance(node, list):
        for item in node[:_MAX_ITEMS]:
            first = len(facts.texts)
            _walk_error(item, facts, depth + 1)
            if len(node) > 1 and isinstance(item, dict) and len(facts.texts) > first:
                facts.attempts.append((first, len(facts.texts)))
        return
    if not isinstance(node, dict):
        return
    texts = len(facts.texts)
    for key in _TEXT_KEYS:
        value = node.get(key)
        if isinstance(value, str):
            _add_text(value, facts, depth)
    said = len(facts.texts) > texts  # the object has a message of its own
    named = _named_status(facts.texts[texts]) if said else None
    if named is not None:
        # the status it names is the upstream's, and stands for the status, code and type
        # beside it, the gateway's guess (``_named_status``); what its body holds is kept
        facts.statuses.append(int(named.group(1)))
        if texts == 0:
            facts.named = facts.statuses[-1]
    else:
        _node_codes(node, facts, depth, said=said)
    for key, side in _COUNT_FIELDS:
        value = node.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            facts.counts.setdefault(side, value)
    for key in _NEST_KEYS:
        value = node.get(key)
        if isinstance(value, (dict, list)):
            _walk_error(value, facts, depth + 1)
    _walk_upstream_answers(node, facts, depth)
    response = node.get("response")  # Responses API: response.failed carries response.error
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        _walk_error(response["error"], facts, depth + 1)
    elif isinstance(response, dict) and _error_body(response):
        # an upstream's error body a relay keeps whole (Lemonade's cloud backend: {"error":
        # {"message": "cloud (fastchat) request failed", "details": {"response": {"object":
        # "error", "message": ...}}}}), as vLLM and FastChat or FastAPI servers send it
        _walk_error(response, facts, depth + 1)


def _walk_upstream_answers(node: dict[str, Any], facts: _Facts, depth: int) -> None:
    """An upstream's answer an error object holds under a key that names it (or under a
    bare ``body`` where the error says it is the upstream's: llm-security-gates' {"error":
    "upstream", "status": 400, "body": "<the upstream's answer>"}, lumynax-marama-route's
    {"ok": false, "error": "backend_http_error", "body": ...}), whole or as its JSON text."""
    upstream = isinstance(node.get("error"), str) and _UPSTREAM_NAME_RE.match(node["error"])
    for key, value in islice(node.items(), _MAX_KEYS):
        bare = key == "body" and bool(upstream)
        if key in _NEST_KEYS or (not bare and _UPSTREAM_KEY_RE.fullmatch(key) is None):
            continue
        if isinstance(value, str) and key not in _TEXT_KEYS and (bare or not _may_echo(key)):
            if _named_status(value) is not None:
                # the openai SDK's exception as a relay kept it (Sunbird AI's 502:
                # {"details": [{"original_error": "Error code: 400 - {...}"}]})
                _walk_error({"message": value}, facts, depth + 1)
                continue
            value = _json_object(value)  # (a text key's JSON is read as its text already)
        if isinstance(value, dict) and (
            any(inner in value for inner in _VALUE_ERROR_KEYS) or _typed_error(value)
        ):  # (earcon's {"upstream_body": "{\"object\": \"error\", ...}"}: vLLM's own)
            _walk_error(value, facts, depth + 1)


def _error_body(doc: dict[str, Any]) -> bool:
    """An upstream's whole error body as vLLM and FastChat send it (``{"object": "error",
    "message": ...}``), as Ollama and TGI do (``{"error": "..."}``), or FastAPI's."""
    if doc.get("object") == "error" and isinstance(doc.get("message"), str):
        return True
    return isinstance(doc.get("error"), str) or _fastapi_error(doc)


def _node_codes(node: dict[str, Any], facts: _Facts, depth: int, *, said: bool) -> None:
    """An error object's own codes and statuses; with no message (``said``), a sentence
    where a code goes is read as the message (Vapor's {"error": true, "reason": "..."})."""
    for key in _CODE_KEYS:
        value = node.get(key)
        if isinstance(value, str):
            if not said and " " in value.strip():
                _add_text(value, facts, depth)
            if value:
                facts.codes.add(value.lower())
                if len(value) <= _MAX_CODE_LENGTH and _CAMEL_RE.search(value) is not None:
                    # "InputTooLong" is also read as "input_too_long"
                    facts.codes.add(_CAMEL_RE.sub("_", value).lower())
        elif isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            facts.statuses.append(value)
    for key in _STATUS_KEYS:
        value = node.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            facts.statuses.append(value)


# An object beside an error's own keys that holds an error of its own, under a key that
# names an upstream's answer, is the one a gateway passes on: Vercel AI Gateway's {"name":
# "AI_TypeValidationError", "value": {"error_type": ..., "error_message": "{\"error\": ...}"}}
# (a validation error's "value" is otherwise the request's own, express-validator's), a relay
# that answers with axios's error ({"message": "Request failed with status code 400", "data":
# {"error": ...}, "status": 400, "headers": ...}, juzibot's openai-proxy), gcligo's
# {"error": {"message": "upstream error", "details": {"upstream": {"error": ...}}}},
# MemoryRouter's {"error": "Provider error", "provider_error": {"error": ...}}: a key that
# names a value, the data, an upstream, a provider, an original, a cause or an error, never
# one that may echo the request (a validation error's "input", "body", "payload"... may hold
# a client's own {"error": ...}). The first ``_MAX_KEYS`` keys are looked at.
_UPSTREAM_KEY_RE: Final = re.compile(
    r"value|data|cause|(?:upstream|provider|original|inner|backend)\w*|\w*error\w*",
    re.IGNORECASE,
)
_VALUE_ERROR_KEYS: Final = ("error", "error_message", "error_type")
_MAX_KEYS: Final = 32
# A string under a key that may echo the request is never parsed: a validation error's
# "value" may be a JSON text a client sent. A key that names the upstream ("upstream_
# message", "providerErrorData") holds its answer unless it names a request, an input, a
# value or parameters too; any other ("errorData", "error_payload") unless it names data,
# a payload, content, a message or a bare body as well.
_ECHO_WORDS_RE: Final = re.compile(r"value|input|request|param|arg|prompt", re.IGNORECASE)
_UPSTREAM_NAME_RE: Final = re.compile(r"upstream|provider|original|inner|backend", re.IGNORECASE)
_ECHO_OTHER_RE: Final = re.compile(r"data|payload|content|message|msg|^body$", re.IGNORECASE)


def _may_echo(key: str) -> bool:
    if _ECHO_WORDS_RE.search(key) is not None:
        return True
    return _UPSTREAM_NAME_RE.match(key) is None and _ECHO_OTHER_RE.search(key) is not None


def _json_object(text: str) -> Any:
    """The JSON object a string under such a key holds whole, as a gateway keeps the
    upstream's body it relays (llm-budget-gateway's ``{"error": {"message": "upstream
    provider error: openai (HTTP 400)", "provider_body": "{\\n \\"error\\": ...}"}}``),
    or a list of one such object, as Google's OpenAI-compatible endpoints send their
    errors (lumynax-marama-route keeps one so); None for any other string."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, list):
        return doc[0] if len(doc) == 1 and isinstance(doc[0], dict) else None
    return doc


def _stray_texts(node: Any, facts: _Facts, depth: int = 0) -> None:
    """An error body's sentences under keys no reader names (``{"detail": {"response":
    "...", "explanation": "..."}}``), for a body whose named keys hold none: strings with
    a space, by any key but those that echo the request (``_ECHO_KEYS``: a validation
    error's offending value, ids, the model's name), at most ``_MAX_STRAY`` of them."""
    if depth > _MAX_DEPTH or len(facts.texts) >= _MAX_STRAY:
        return
    if isinstance(node, list):
        for item in node[:_MAX_ITEMS]:
            _stray_texts(item, facts, depth + 1)
    elif isinstance(node, dict):
        for key, value in list(node.items())[:_MAX_ITEMS]:
            if key in _ECHO_KEYS:
                continue
            if isinstance(value, str):
                if " " in value.strip() and len(facts.texts) < _MAX_STRAY:
                    _add_text(value, facts, depth)
            else:
                _stray_texts(value, facts, depth + 1)


_MAX_STRAY: Final = 4


def _add_text(text: str, facts: _Facts, depth: int) -> None:
    # A message that itself holds JSON (gateways relaying the provider's body).
    start = text.find("{")
    if start < 0 or depth >= _MAX_DEPTH:
        facts.say(text)
        return
    first_list = text.find("[")
    if 0 <= first_list < start and text[first_list + 1 : start].strip() == "":
        start = first_list
    try:
        inner, end = _decoder.raw_decode(text, start)
    except (ValueError, RecursionError):  # not JSON, or nested past the decoder's depth
        facts.say(text)
        return
    if (
        isinstance(inner, dict)
        and "error" not in inner
        and any(key in inner for key in _SUCCESS_KEYS)
        and text[:start].strip() == ""
        and text[end:].strip() == ""
    ):
        # a relayed success body, whole: its words are the model's, only an error in a
        # choice counts
        _walk_document(inner, facts, depth + 1, error_status=False)
        return
    facts.say(text)
    if isinstance(inner, (dict, list)):
        _walk_document(inner, facts, depth + 1, error_status=True)


_SUCCESS_KEYS: Final = ("choices", "candidates", "content", "output")


def _walk_document(doc: Any, facts: _Facts, depth: int, *, error_status: bool) -> bool:
    """Walk the error parts of a parsed body; False when it holds no error at all.

    A success body (``choices``, ``candidates``, ``content``...) is never read, so an
    assistant reply that quotes an overflow message cannot trigger a retry.
    """
    if isinstance(doc, list):
        found = False
        for item in doc[:_MAX_ITEMS]:
            found = _walk_document(item, facts, depth + 1, error_status=error_status) or found
        return found
    if isinstance(doc, str):
        if error_status:
            _add_text(doc, facts, depth)
            return True
        return False
    if not isinstance(doc, dict):
        return False
    error = doc.get("error")
    if error is None and isinstance(doc.get("Error"), dict):  # ParagonAPI's {"Error": {...}}
        doc = {"error": doc["Error"]}
        error = doc["error"]
    if error not in (None, False, "", {}, []) and _streamed_output(doc):
        return False  # the window filled while it wrote: an answer cut short, not refused
    if error not in (None, False, "", {}, []) or _typed_error(doc):
        _walk_error(doc, facts, depth)
        _engine_status_reply(doc, facts, depth)  # (LMDeploy's failed Responses object)
        return True
    if _lobehub_error(doc, facts, depth):
        return True
    if _fastapi_error(doc):
        _walk_error(doc, facts, depth)
        return True
    if _returned_response(doc, facts, depth) or _status_errors(doc, facts, depth):
        return True
    if doc.get("event") == "error":
        # Flowise's stream event {"event": "error", "data": "Error: ... 400 {...}"}; Dify's
        # {"event": "error", "code": ..., "status": 400, "message": ...}
        data = doc.get("data")
        if isinstance(data, str) and data:
            _add_text(data, facts, depth)
        else:
            _walk_error(data if isinstance(data, dict) else doc, facts, depth)
        return True
    choices = doc.get("choices")
    if isinstance(choices, list) and _walk_choices(choices, facts, depth):
        return True
    if _error_as_reply(doc, facts, depth):
        return True
    if _window_stop(doc) or _empty_length_reply(doc) or _unspent_max_tokens(doc):
        facts.codes.add(WINDOW_STOP)
        return True
    if _flat_error(doc, facts, depth):
        return True
    if error_status:
        _walk_error(doc, facts, depth)
        return True
    return False


def _lobehub_error(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """LobeHub's error answer, ``{"body": {"error": <the upstream's>, "message": ...},
    "errorType": ...}``: its class and the upstream's own words, which decide."""
    body = doc.get("body")
    if not isinstance(doc.get("errorType"), str) or not isinstance(body, dict):
        return False
    if not isinstance(body.get("error"), (dict, str)):
        return False
    _walk_error(doc, facts, depth)
    _walk_error(body, facts, depth + 1)
    return True


def _streamed_output(doc: dict[str, Any]) -> bool:
    """Whether a failed job's record holds the text it streamed before it failed: the
    output list of strings of a Replicate prediction (cog-vllm fails one with "E1002
    PromptTooLong" once the window fills after its first tokens)."""
    output = doc.get("output")
    return (
        doc.get("status") == "failed"
        and isinstance(output, list)
        and any(isinstance(item, str) and item for item in output[:_MAX_ITEMS])
    )


def _fastapi_error(doc: dict[str, Any]) -> bool:
    """FastAPI's error body outside an error status: ``{"detail": ...}`` alone, written as
    a stream event (Refact's chat stream), or an HTTPException returned rather than raised,
    ``{"status_code": 400, "detail": ..., "headers": null}`` sent with 200 (gallama)."""
    detail = doc.get("detail")
    if not isinstance(detail, str) or not detail:
        return False
    if len(doc) == 1:
        return True
    return doc.keys() <= {"status_code", "detail", "headers"} and _error_status(doc)


def _error_status(doc: dict[str, Any]) -> bool:
    """Whether a body's ``status_code`` is an HTTP error status written as a number."""
    status = doc.get("status_code")
    return type(status) is int and 400 <= status <= 599


def _returned_response(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A Starlette response serialised as data rather than sent, ``{"status_code": 400,
    "background": null, "body": "<the error's JSON>", "raw_headers": [...]}``: openchat's
    server answers 200 with its length check's error so, beside the prompt's token ids,
    when a handler returns both. Read with the status it names. (The relay reads a 200
    body whose start shows no error only up to 64 KiB, so behind a prompt of some 10,000
    token ids this answer goes to the client as it came.)"""
    body = doc.get("body")
    if (
        not _error_status(doc)
        or not isinstance(body, str)
        or not body
        or "raw_headers" not in doc
        or not doc.keys() <= _RESPONSE_KEYS
    ):
        return False
    facts.statuses.append(doc["status_code"])
    _add_text(body, facts, depth)
    return True


_RESPONSE_KEYS: Final = frozenset(
    {"status_code", "background", "body", "raw_headers", "media_type"}
)


def _status_errors(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """IBM watsonx's errors, ``{"errors": [{"code": ..., "message": ...}], "trace": ...,
    "status_code": 400}``, also as a stream's chunk (with ``"choices": []``): a list of
    errors with their messages under the HTTP error status they name, and nothing else
    beside them (a GraphQL answer's "data" holds one). Read with that status (``_walk_error``
    takes it from ``status_code``)."""
    errors = doc.get("errors")
    if (
        not isinstance(errors, list)
        or not errors
        or not isinstance(errors[0], dict)
        or not isinstance(errors[0].get("message"), str)
        or not _error_status(doc)
        or not doc.keys() <= _STATUS_ERRORS_KEYS
        or _answered(doc)
    ):
        return False
    _walk_error(doc, facts, depth)
    return True


_STATUS_ERRORS_KEYS: Final = frozenset({"errors", "trace", "status_code", "choices"})


def _flat_error(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """An error whose message sits beside the answer's other fields, under a key of its
    own, read whatever the status."""
    message = doc.get("error_message") or (
        "error_code" not in doc and not _answered(doc) and doc.get("error_msg")
    )
    if isinstance(message, str) and message:
        # DeepInfra's {"error_type": ..., "error_message": ...}, also as a stream chunk;
        # Onyx's answer {"answer": "", ..., "error_msg": ...} sent with 200 (with an
        # "error_code", Baidu's shape below: 0 there means no error)
        _walk_error(doc, facts, depth)
        return True
    if doc.get("error_code") not in (None, False, 0, "", "0") and any(
        isinstance(doc.get(key), str) and doc[key] for key in ("error_msg", "message", "text")
    ):
        # Baidu Qianfan's native {"error_code": 336103, "error_msg": ...} sent with 200,
        # rtp-llm's {"error_code": 511, "message": ...} and DB-GPT's {"error_code": 1,
        # "text": ...} as stream events
        _walk_error(doc, facts, depth)
        if isinstance(doc.get("text"), str):
            _add_text(doc["text"], facts, depth)
        return True
    return _status_envelope(doc, facts, depth)


def _status_envelope(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A platform's own envelope that a status field marks as an error, sent with 200:
    ``{"status": "error", "msg": ...}`` (Casibase, Beego-style APIs), ``{"status_code":
    500, "status_message": ...}`` (Bisheng), ``{"code": 500, "msg": ..., "data": null}``
    (Java and Go platforms' result objects) or ``{"success": false, "data": ...}``
    (BRConnector: a message under ``data``), with no answer beside it. Read with the
    status it names."""
    message = next(
        (doc[key] for key in _ENVELOPE_MESSAGE_KEYS if isinstance(doc.get(key), str) and doc[key]),
        None,
    )
    if message is None or _answered(doc):
        return False
    code = _http_code(doc.get("status_code")) or _http_code(doc.get("code"))
    if code:
        facts.statuses.append(code)
    elif doc.get("status") not in ("error", "fail") and doc.get("success") is not False:
        return False
    _add_text(message, facts, depth)
    for key in _NEST_KEYS:
        # the upstream's answer it nests: OpenRouter's error object unwrapped by a relay,
        # {"message": "Provider returned error", "code": 400, "metadata": {"raw": "{...}"}}
        value = doc.get(key)
        if isinstance(value, (dict, list)):
            _walk_error(value, facts, depth + 1)
    return True


_ENVELOPE_MESSAGE_KEYS: Final = ("msg", "status_message", "message", "data")


def _http_code(code: Any) -> int:
    """An envelope's code when it is an HTTP error status (an int or a string of digits,
    400-599), else 0: APIs whose envelope's "code" means success as 0 or 200 send their
    business codes there too, which say nothing here."""
    if type(code) is str and len(code) == 3 and code.isascii() and code.isdigit():
        code = int(code)
    return code if type(code) is int and 400 <= code <= 599 else 0


def _answered(doc: dict[str, Any]) -> bool:
    """Whether a body holds an answer beside its other fields (Onyx's "answer", or a success
    body's choices, candidates, content or output): an "error_msg" beside one is a note."""
    return any(doc.get(key) for key in ("answer", *_SUCCESS_KEYS))


def _typed_error(doc: dict[str, Any]) -> bool:
    """An object typed as an error: ``"type": "error"``, ``"object": "error"``, the
    Responses API's ``response.failed`` (or another ``response.*`` event whose response
    failed with an error: codex-cc sends its upstream's error as ``response.completed``),
    or a type that ends in "error" beside a message (eurouter's stream event
    ``{"message": ..., "type": "stream_error", "code": ...}``)."""
    kind = doc.get("type")
    if kind in ("error", "response.failed") or doc.get("object") == "error":
        return True
    if not isinstance(kind, str):
        return False
    if kind.endswith("error") and "message" in doc:
        return True
    response = doc.get("response") if kind.startswith("response.") else None
    return (
        isinstance(response, dict)
        and response.get("status") == "failed"
        and response.get("error") not in (None, False, "", {}, [])
    )


# Anthropic's stop_reason, and GLM's finish_reason, for a stop at the context window
WINDOW_STOP: Final = "model_context_window_exceeded"


def _window_stop(doc: dict[str, Any]) -> bool:
    """An answer that stopped at the context window before any output (Z.ai's way of
    reporting an overflow, also Claude's when the prompt leaves no room): an Anthropic
    message with that ``stop_reason`` and no content (or a Bedrock Converse answer with
    that ``stopReason``, as a router relays it raw), the stream's ``message_delta``
    saying so (the relay asks only before the first output), or an OpenAI-format choice
    finished so with nothing in it. With output it is a truncated answer, not an
    overflow."""
    if doc.get("stop_reason") == WINDOW_STOP:
        return _no_content(doc.get("content"))
    if doc.get("stopReason") == WINDOW_STOP:  # Bedrock's Converse answer, relayed raw
        said = doc.get("output")
        message = said.get("message") if isinstance(said, dict) else None
        return isinstance(message, dict) and _no_content(message.get("content"))
    if doc.get("type") == "message_delta":
        delta = doc.get("delta")
        return isinstance(delta, dict) and delta.get("stop_reason") == WINDOW_STOP
    if doc.get("object") == "response":
        return _window_stopped_response(doc)
    # ... and its OpenAI-format spelling: GLM's OpenAI-compatible API ends a prompt over its
    # window with one chunk (or completion) whose only choice finished so and whose delta
    # is the opener alone, {"role": "assistant", "content": ""}, counting no output. Not a
    # gateway's translated tail ("delta": {}), which may close thinking or tool calls it
    # wrote in keys a reader does not know. (one-api writes Claude's thinking as openers
    # and passes the stop through: a reply it emptied so is resent trimmed, on purpose)
    choice = _sole_choice(doc, WINDOW_STOP)
    if choice is None or choice.get("index", 0) != 0 or choice.get("logprobs"):
        return False
    said = choice.get("delta", choice.get("message"))
    if not isinstance(said, dict) or said.get("role") != "assistant":
        return False
    if any(value for key, value in said.items() if key != "role"):
        return False
    usage = doc.get("usage")
    return not isinstance(usage, dict) or _is_zero(usage.get("completion_tokens"))


def _unspent_max_tokens(doc: dict[str, Any]) -> bool:
    """An Anthropic message stopped at "max_tokens" with nothing written, its usage
    counting the prompt alone (``_prompt_alone``: a cache's replay is not): whole, with no
    content but empty text blocks, or the stream's ``message_delta`` (its usage stating the
    prompt, as text-generation-webui, hebo-gateway and Pollinations write it). No model
    stops at its output limit before a token (max_tokens is at least 1, and counts
    thinking): the window stopped it, as Messages bridges over a server that stopped at
    "length" answer. A gateway that hid thinking and counted it apart would write the
    same (as a chat answer with no total): read so too."""
    kind = doc.get("type")
    if kind == "message_delta":
        delta = doc.get("delta")
        stopped = isinstance(delta, dict) and delta.get("stop_reason") == "max_tokens"
        return stopped and _window_sized_prompt(doc.get("usage"))
    if kind != "message" or doc.get("stop_reason") != "max_tokens":
        return False
    return _no_content(doc.get("content")) and _window_sized_prompt(doc.get("usage"))


def _window_sized_prompt(usage: Any) -> bool:
    """A Messages usage that counts the prompt alone (``_prompt_alone``), a prompt of at
    least ``_FLOOR_PROMPT`` tokens: no window is smaller, and a bridge over a thinking model
    that hid its thinking counts a short prompt's stop at a small max_tokens so
    (Api-Conversion over Gemini: 14 input tokens, 0 output, max_tokens 64)."""
    if not _prompt_alone(usage):
        return False
    prompt = usage.get("input_tokens", usage.get("prompt_tokens"))
    return type(prompt) is int and prompt >= _FLOOR_PROMPT


def _no_content(content: Any) -> bool:
    """Whether an Anthropic message's content holds nothing: no block but empty text (or
    null, as Ollama's Messages route writes it)."""
    if content is None:
        return True
    if not isinstance(content, list) or len(content) > _MAX_ITEMS:
        return False
    return all(
        isinstance(block, dict) and block.get("type") == "text" and not block.get("text")
        for block in content
    )


def _window_stopped_response(doc: dict[str, Any]) -> bool:
    """... and its Responses spelling, as api2api translates Claude's stop: a response left
    "incomplete" for that reason with nothing produced (``incomplete_unspent``), or, as
    rosetta-llm writes it, with that reason as its status."""
    if doc.get("status") == WINDOW_STOP:
        return _produced_nothing(doc)
    if "max_output_tokens" in doc and doc["max_output_tokens"] is None and window_filled(doc):
        return True  # (the request set no output limit: the window stopped it)
    return incomplete_unspent(doc, WINDOW_STOP)


def incomplete_unspent(doc: dict[str, Any], reason: str) -> bool:
    """Whether a Responses object was left "incomplete" for ``reason`` with nothing
    produced (``_produced_nothing``)."""
    details = doc.get("incomplete_details")
    if doc.get("status") != "incomplete" or not isinstance(details, dict):
        return False
    return details.get("reason") == reason and _produced_nothing(doc)


def window_filled(doc: dict[str, Any]) -> bool:
    """Whether a Responses object was left "incomplete" for ``max_output_tokens`` with no
    text written (reasoning at most) and a usage whose prompt is nearly all of it: output
    at most 1/256 of the input. For a request that set no output limit this is the
    window's stop (vLLM's default budget is what the window leaves: LiteLLM's answer over
    Claude, foveance's over gpt-oss spending the last 128 tokens on reasoning), not a
    server's default cap of a few hundred tokens spent on reasoning after a short prompt."""
    details = doc.get("incomplete_details")
    if doc.get("status") != "incomplete" or not isinstance(details, dict):
        return False
    if details.get("reason") != "max_output_tokens" or doc.get("output_text"):
        return False
    output = doc.get("output")
    if not isinstance(output, list) or len(output) > _MAX_ITEMS:
        return False
    if not all(empty_message_item(item) or _reasoning_item(item) for item in output):
        return False
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        return False
    prompt, spent, total = (usage.get(k) for k in ("input_tokens", "output_tokens", "total_tokens"))
    if type(prompt) is not int or type(spent) is not int:
        return False
    if type(total) is int:  # (a total may count hidden reasoning the output count leaves out)
        spent = max(spent, total - prompt)
    return 0 <= spent * 256 <= prompt


def _reasoning_item(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "reasoning"


def _produced_nothing(doc: dict[str, Any]) -> bool:
    """Whether a Responses object holds no output: at most empty messages (no text, no
    other item: a reasoning item is output spent), and a usage, if it states one (not
    null, not ``{}``), that counts no output token and nothing beyond the input, or one
    output token and nothing beyond the input and it (RKLLM's floor of one), as a chat
    answer's usage is read."""
    if doc.get("output_text"):
        return False
    output = doc.get("output")
    if not isinstance(output, list) or len(output) > _MAX_ITEMS:
        return False
    if not all(empty_message_item(item) for item in output):
        return False
    usage = doc.get("usage")
    if usage is None or usage == {}:
        return True
    return isinstance(usage, dict) and counts_unspent(usage, "input_tokens", "output_tokens")


def counts_unspent(usage: dict[str, Any], prompt_key: str, output_key: str) -> bool:
    """Whether a usage counts no output token and nothing beyond the prompt, or one output
    token and nothing beyond the prompt and it: a server's floor (RKLLM's max(1, n)), or
    the one token a full window left (Ollama), where nothing was written."""
    output, prompt = usage.get(output_key), usage.get(prompt_key)
    if _is_zero(output):
        return bool(usage.get("total_tokens", prompt) == prompt)
    if type(output) is not int or output != 1 or type(prompt) is not int:
        return False
    return bool(usage.get("total_tokens", prompt + 1) == prompt + 1)


def empty_message_item(item: Any) -> bool:
    """Whether a Responses output item is a message with no text: its parts, if any,
    empty ``output_text``."""
    if not isinstance(item, dict) or item.get("type") != "message":
        return False
    content = item.get("content")
    if not isinstance(content, list) or len(content) > _MAX_ITEMS:
        return False
    return all(empty_text_part(part) for part in content)


def empty_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "output_text" and not part.get("text")


def _empty_length_reply(doc: dict[str, Any]) -> bool:
    """A look-alike of that stop finished "length": LMDeploy (to 0.9) answers a prompt that
    leaves no room in its session ("run out of tokens") as one whole completion whose text
    is empty and which holds nothing else (no tool call, reasoning, refusal, audio or
    log-probabilities), finished "length", whose usage counts the prompt alone
    (``prompt_only_usage``): a model stops at its output limit only after writing
    something. LMDeploy 0.6 may finish it "stop" and count its output below zero (its
    total less the prompt): no answer writes fewer than no tokens."""
    choice = _sole_choice(doc, "length") or _sole_choice(doc, "stop")
    if choice is None or choice.get("index", 0) != 0 or choice.get("logprobs"):
        return False
    message = choice.get("message")
    if not isinstance(message, dict) or message.get("content") != "":
        return False
    if any(value for key, value in message.items() if key not in ("role", "content")):
        return False
    usage = doc.get("usage")
    if choice.get("finish_reason") == "length" and prompt_only_usage(usage):
        return True
    if not isinstance(usage, dict):
        return False
    prompt, output = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return type(prompt) is int and prompt > 0 and type(output) is int and output < 0


def prompt_only_usage(usage: Any) -> bool:
    """A usage that counts a prompt, no output token, nothing beyond the prompt (a total
    above it: reasoning counted apart, as gateways over Gemini write when thinking spent a
    small max_tokens; a total below it is a server's slip, LlamaEdge 0.11's 0) and no
    cached prompt (a cache's replay). Or one output token, nothing beyond it, after a
    prompt of at least 256: Ollama's floor when the prompt fills its window (32767 of
    32768, nothing written), no request's one-token probe."""
    if not isinstance(usage, dict):
        return False
    prompt, output = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is not int or prompt <= 0:
        return False
    if type(output) is int and output == 1 and prompt >= _FLOOR_PROMPT:
        prompt += 1  # (the total may count it)
    elif not _is_zero(output):
        return False
    total = usage.get("total_tokens", prompt)
    if type(total) is not int or total > prompt:
        return False
    details = [usage.get("completion_tokens_details"), usage.get("prompt_tokens_details")]
    output_details, prompt_details = (d if isinstance(d, dict) else {} for d in details)
    return not any(output_details.values()) and not prompt_details.get("cached_tokens")


_FLOOR_PROMPT: Final = 256


def _sole_choice(doc: dict[str, Any], finish_reason: str) -> dict[str, Any] | None:
    """An answer's only choice when it finished with ``finish_reason``."""
    choices = doc.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    return choice if choice.get("finish_reason") == finish_reason else None


def _walk_choices(choices: list[Any], facts: _Facts, depth: int) -> bool:
    """Gateways that report an error inside a 200 answer's choice: ``finish_reason``
    ``"error"`` with an ``error`` object (or message) in the choice. A choice without
    an error is never read (its text is the model's answer)."""
    found = False
    for choice in choices[:_MAX_ITEMS]:
        if not isinstance(choice, dict):
            continue
        error = choice.get("error")
        if error in (None, False, "", {}, []):
            continue
        if choice.get("finish_reason") not in (None, "error"):
            continue
        _walk_error(error, facts, depth + 1)
        found = True
    return found


_SPOOF_MARK: Final = "<!-- oai-proxy-error -->"
_SPOOF_REASON_RE: Final = re.compile(r"Proxy error \(HTTP ([1-5]\d\d)\b")
_SPOOF_HEADING_RE: Final = re.compile(r"\s*#+ \*\*Proxy error \(HTTP ([1-5]\d\d)\b")


def _error_as_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A server's or gateway's error written as a success's reply, told by a mark no model
    writes."""
    return (
        _spoofed_error(doc, facts, depth)
        or _api_error_chunk(doc, facts, depth)
        or _relayed_exception(doc, facts, depth)
        or _engine_status_reply(doc, facts, depth)
        or _error_finish_reply(doc, facts, depth)
        or _bracketed_error(doc, facts, depth)
        or _error_line_reply(doc, facts, depth)
        or _uncounted_reply(doc, facts, depth)
        or _unwritten_error_line(doc, facts, depth)
        or _cli_refusal_reply(doc, facts, depth)
        or _refusal_said_twice(doc, facts, depth)
        or _proxy_tagged_reply(doc, facts, depth)
    )


def _refusal_said_twice(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A gateway's error written into a reply twice: as its ``refusal``, and as its text,
    "Error: <the refusal>" (bold in Markdown or not). AI-Gateway (yihuanlin) streams an
    upstream's failure so, one chunk finished "stop". No model writes a refusal and a
    text both, the text the refusal behind an error's label. Read as an error's message."""
    choice = _first_choice(doc)
    said = choice.get("delta", choice.get("message")) if choice is not None else None
    if not isinstance(said, dict):
        return False
    refusal, text = said.get("refusal"), said.get("content")
    if not isinstance(refusal, str) or not refusal.strip() or not isinstance(text, str):
        return False
    if not text.endswith(refusal) or not _ERROR_LABEL_RE.fullmatch(text[: -len(refusal)]):
        return False
    _add_text(refusal, facts, depth)
    return True


# "Error: ", "**Error**: ", "**Error:** "
_ERROR_LABEL_RE: Final = re.compile(r"\s*(?:\*\*)?error(?:\*\*)?:(?:\*\*)?\s*", re.IGNORECASE)


def _proxy_tagged_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """GeminiForJanitors writes an upstream's error as the whole reply between tags of its
    own, each after a zero-width space no model writes: "\u200b<proxy>\n[a notice of
    its own\n]Error from OpenRouter (400): <its message>\n\u200b</proxy>". Read as an
    error's message, with the status it names."""
    choice = _first_choice(doc)
    text = _reply_text(choice) if choice is not None else None
    match = _PROXY_TAGGED_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return False
    facts.statuses.append(int(match.group(1)))
    _add_text(match.group(2), facts, depth)
    return True


_PROXY_TAGGED_RE: Final = re.compile(
    r"\u200b<proxy>\n(?:[^\n]{0,200}\n){0,3}?Error from [^\n()]{1,40} \(([45]\d\d)\): "
    r"(.{1,2000}?)\n\u200b</proxy>\s*",
    re.DOTALL,
)


def _cli_refusal_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """Claude Code's own refusal relayed as the whole reply: bridges that run the CLI
    (and serve its answer as a chat completion, a Messages answer or a Gemini candidate)
    write its "Prompt is too long" as the answer's text. Read where no model answered: a
    whole answer whose usage counts no prompt token (or that carries none), or a chunk
    that carries its finish reason beside the whole text. (A stream that sends the text
    and its finish reason apart is held: ``CLI_REFUSAL``.)"""
    choice = _first_choice(doc)
    if choice is not None and isinstance(choice.get("delta"), dict):
        text = _reply_text(choice) if _finished_chunk(choice) else None
    else:
        text, usage = _sole_answer(doc)
        if not _counts_no_prompt(usage):
            return False
    if not isinstance(text, str) or not cli_refusal(text):
        return False
    _add_text(text, facts, depth)
    return True


def cli_refusal(text: str) -> bool:
    """Whether a reply's whole text is Claude Code's "Prompt is too long", alone or with
    the details its later versions give after a middle dot ("Prompt is too long · the
    request is ~208473 tokens (limit 200000) but this conversation is only ~1532 tokens —
    ...", one paragraph)."""
    return len(text) <= _CLI_REFUSAL_ROOM and _CLI_REFUSAL_RE.fullmatch(text) is not None


_CLI_REFUSAL_RE: Final = re.compile(r"\s*Prompt is too long(?:\.|\s\u00b7\s[^\n]+)?\s*")
_CLI_REFUSAL_ROOM: Final = 1024


def _sole_answer(doc: dict[str, Any]) -> tuple[Any, Any]:
    """A whole answer's one reply text (``_sole_text``, or a Gemini answer's one candidate's
    one text part, finished) and its usage; (None, None) for any other answer."""
    text, finish = _sole_text(doc)
    if finish is not None:
        return text, doc.get("usage")
    candidates = doc.get("candidates")
    if not isinstance(candidates, list) or len(candidates) != 1:
        return None, None
    candidate = candidates[0]
    if not isinstance(candidate, dict) or not candidate.get("finishReason"):
        return None, None
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
        return None, None
    return parts[0].get("text"), doc.get("usageMetadata")


def _counts_no_prompt(usage: Any) -> bool:
    """Whether an answer's usage counts no prompt token, or it carries none: no model
    answered a prompt it never read."""
    if usage is None:
        return True
    if not isinstance(usage, dict):
        return False
    for key in ("prompt_tokens", "input_tokens", "promptTokenCount"):
        if key in usage:
            return _is_zero(usage[key])
    return False


def _bracketed_error(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A gateway's error written as the whole reply in brackets, "[Error: <the upstream's
    message>]" (codex-pool turns a Codex ``response.failed`` so into a chat completion or
    chunk), where no model wrote it: a completion that counts no output token (or none at
    all), a chunk that carries its finish reason beside the whole text. Read as an error's
    message. (An Anthropic text delta so is held, and its ``message_delta`` decides.)"""
    choice = _first_choice(doc)
    if choice is None:
        return False
    text = _reply_text(choice)
    inner = bracketed_error(text) if isinstance(text, str) else None
    if inner is None or not _sent_whole(doc, choice):
        return False
    _add_text(inner, facts, depth)
    return True


def _sent_whole(doc: dict[str, Any], choice: dict[str, Any]) -> bool:
    """A reply no model wrote token by token: a chunk that carries its finish reason beside
    the whole text, or a whole completion that counts no output token (or carries no
    usage)."""
    if isinstance(choice.get("delta"), dict):
        return _finished_chunk(choice)
    return _counts_no_completion(doc.get("usage"))


def _error_line_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A server's error written as the whole reply, one sentence "Error: <its message>"
    (Apple-Intelligence-API answers the on-device model's refusal so, "Error: Exceeded
    context window size.", with finish_reason "length"), or, finished "length", one
    sentence that states an overflow with both its counts (m4gshm's OpenVINO agent server,
    "prompt exceeds limit: 33000 >= 32768"), where no model wrote it: finished
    "length" or "error" (a model's complete sentence finishes "stop": one so is read only
    beside a usage that counts the prompt alone, ``_unwritten_error_line``), and, as for the
    bracketed form, a completion that counts no output token (or carries no usage), or a
    chunk that carries its finish reason beside the whole text. The text is read with
    HTML's escapes undone, its trailing blanks aside, and at most ``MAX_REPLY_READ``
    characters long; a quotation mark in it (but the apostrophe) makes it an answer. Read
    as an error's message."""
    choice = _first_choice(doc)
    if choice is None or choice.get("finish_reason") not in ("length", "error"):
        return False
    text = _reply_text(choice)
    if not isinstance(text, str) or not _sent_whole(doc, choice):
        return False
    text = text.rstrip()
    if len(text) > MAX_REPLY_READ:
        return False
    text = html.unescape(text)
    match = _ERROR_LINE_RE.fullmatch(text)
    if match is not None:
        _add_text(match.group(1), facts, depth)
        return True
    if choice.get("finish_reason") != "length" or _COUNTED_LINE_RE.fullmatch(text) is None:
        return False
    return _add_counted(text, facts, depth)


def _add_counted(text: str, facts: _Facts, depth: int) -> bool:
    """Keep a reply's ``text`` as an error's message when it reads as an overflow with
    both its counts stated; False when it does not."""
    read = reply_overflow(text)
    if read is None or read.real is None or read.maximum is None:
        return False
    _add_text(text, facts, depth)
    return True


# quotation marks but the apostrophe ("This model's maximum context length"): a reply that
# quotes an error is a model's answer about it
_QUOTES: Final = (
    '"`\u201c\u201d\u201e\u201f\u2018\u00ab\u00bb\u2039\u203a\u300c\u300d\u300e\u300f\uff02'
)
# line breaks a one-line reader refuses
_LINE_BREAKS: Final = "\n\r\x85\u2028\u2029"
# (one sentence, no JSON or list in it: a model's answer that starts so says more)
_ERROR_LINE_RE: Final = re.compile(
    r"Error: ([^.!?{}\[\]" + _QUOTES + _LINE_BREAKS + r"]{1,200}[.!?]?)\s*"
)
# ... or, finished "length", one sentence that states an overflow with both its counts,
# whatever its first word (m4gshm's OpenVINO agent server: "prompt exceeds limit: 33000 >=
# 32768")
_COUNTED_LINE_RE: Final = re.compile(r"[^.!?{}\[\]" + _QUOTES + _LINE_BREAKS + r"]{1,200}[.!?]?\s*")


def _uncounted_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A gateway's rendering of an upstream's refusal as a whole answer that counted
    nothing: one completion finished "length" (no tool call beside it), or an Anthropic
    message stopped at "max_tokens", with one text and a usage whose every count is 0, the
    prompt's and the output's stated (EvalScope's agent bridge answers a provider's
    context-length 400 so, the provider's message as the reply). Some servers write such
    a usage on every answer, so the text must be the provider's message as it came: one
    line, nothing quoted, that states an overflow with both its counts (a model's answer
    about such an error quotes it, or says more). Read as an error's message."""
    text, finish = _sole_text(doc)
    if finish != "length" or not isinstance(text, str):
        return False
    if not _counted_nothing(doc.get("usage")):
        return False
    if len(text) > MAX_REPLY_READ or not _as_sent(text):
        return False
    return _add_counted(text, facts, depth)


def _unwritten_error_line(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A server's refusal as a whole answer finished as a model's would ("stop",
    "end_turn"): one text, "Error: <an overflow with both its counts>", and a usage that
    counts the prompt and no output token, so no model wrote it (LLMPlayer answers a
    prompt over its window so on its chat and Messages routes, "Error: prompt too long
    (2311 tokens, max 2047)"). Read as an error's message."""
    text, finish = _sole_text(doc)
    if finish != "stop" or not isinstance(text, str) or not _prompt_alone(doc.get("usage")):
        return False
    text = text.rstrip()
    match = _ERROR_LINE_RE.fullmatch(html.unescape(text)) if len(text) <= MAX_REPLY_READ else None
    return match is not None and _add_counted(match.group(1), facts, depth)


def _prompt_alone(usage: Any) -> bool:
    """A completion's or an Anthropic message's usage that counts the prompt alone
    (``prompt_only_usage``; a Messages usage with no cache read)."""
    if not isinstance(usage, dict) or "input_tokens" not in usage:
        return prompt_only_usage(usage)
    if usage.get("cache_read_input_tokens"):
        return False
    counts = {
        "prompt_tokens": usage["input_tokens"],
        "completion_tokens": usage.get("output_tokens"),
    }
    return prompt_only_usage(counts)


# an Anthropic message's stop reasons as a completion's finish reasons
_STOP_AS_FINISH: Final = {"max_tokens": "length", "end_turn": "stop"}


def _sole_text(doc: dict[str, Any]) -> tuple[Any, Any]:
    """A whole answer's one reply text and how it finished: a completion's only choice's
    message (nothing else in it: no tool call, reasoning or refusal), or an Anthropic
    message's one text block (its stop reason as a completion's finish reason); (None,
    None) for any other answer."""
    if doc.get("choices") is not None:
        choices = doc["choices"]
        if not isinstance(choices, list) or len(choices) != 1:
            return None, None
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            return None, None
        if any(value for key, value in message.items() if key not in ("role", "content")):
            return None, None  # a tool call, reasoning, a refusal beside the text
        return message.get("content"), choice.get("finish_reason")
    content = doc.get("content")
    if doc.get("type") != "message" or not isinstance(content, list) or len(content) != 1:
        return None, None
    block = content[0]
    if not isinstance(block, dict) or block.get("type") != "text":
        return None, None
    stop = doc.get("stop_reason")
    return block.get("text"), _STOP_AS_FINISH.get(stop, stop) if isinstance(stop, str) else None


def _as_sent(text: str) -> bool:
    """A provider's message as a gateway wrote it into a reply: one line, no quotation
    mark (HTML's escapes undone), no JSON or list."""
    return _AS_SENT_RE.fullmatch(html.unescape(text).rstrip()) is not None


_AS_SENT_RE: Final = re.compile(r"[^{}\[\]" + _QUOTES + _LINE_BREAKS + r"]{1,600}")


def _counted_nothing(usage: Any) -> bool:
    """A usage that states a prompt's count and an output's, both 0, and no other count
    but 0 (a cache read, a total, a count in its details)."""
    if not isinstance(usage, dict):
        return False
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    output = usage.get("completion_tokens", usage.get("output_tokens"))
    values = list(islice(usage.values(), _MAX_ITEMS))
    for detail in [value for value in values if isinstance(value, dict)]:
        values.extend(islice(detail.values(), _MAX_ITEMS))  # ("prompt_tokens_details")
    counts = [count for count in values if type(count) in (int, float)]
    return _is_zero(prompt) and _is_zero(output) and not any(counts)


def error_tagged(text: str) -> bool:
    """Whether a reply starts with a relay's tag for its error, "[Proxy Error] " or
    "[LLMCycle Proxy Error]: " (``_ERROR_TAG_RE``)."""
    return _ERROR_TAG_RE.match(text) is not None


def bracketed_error(text: str) -> str | None:
    """The message of a reply that is wholly "[Error: <message>]" (a line break before it
    aside: local-ai-runtime's "\\n[Error: API stream 400: {...}]"), else None."""
    text = text.lstrip()
    if not text.startswith("[Error: "):
        return None
    match = _BRACKETED_ERROR_RE.fullmatch(text)
    return None if match is None else match.group(1)


_BRACKETED_ERROR_RE: Final = re.compile(r"\[Error: ([^\[\]]+)\]\s*", re.DOTALL)


def _counts_no_completion(usage: Any) -> bool:
    """A whole completion's usage that counts no output token (``completion_tokens`` or
    ``output_tokens`` 0), or no usage at all (none, an empty object, or an empty list as
    Kuwa GenAI OS writes); a usage that counts output some other way, or not at all, is no
    sign either way: False."""
    if usage is None or usage == {} or usage == []:
        return True
    if not isinstance(usage, dict):
        return False
    counts = [usage.get(key) for key in ("completion_tokens", "output_tokens")]
    stated = [count for count in counts if count is not None]
    return bool(stated) and all(_is_zero(count) for count in stated)


def _error_finish_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """A reply that finishes with ``"error"`` and holds no error object. A stream's chunk
    so, read before any output: its text is the whole reply, the server's error (LLM-
    Inference-Service streams its refusal so, as the one chunk after the role's). A whole
    completion so only where no model wrote it: its usage counts 0 output tokens
    (gomcptest's "I encountered an error ... Error details: cannot generate content: Error
    400, Message: The input token count (P) exceeds ..."), or it carries no usage and its
    text ends in an upstream's error body in JSON (RelayFreeLLM: "All retries failed. Last
    error: [DeepSeek] API Error 400: {"error": ...}"); other text may be the model's, cut
    short by a failure. Read as an error's message."""
    choice = _first_choice(doc)
    if choice is None or choice.get("finish_reason") != "error":
        return False
    delta = choice.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content")
    else:
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
        usage = doc.get("usage")
        if not isinstance(text, str) or not _counts_no_completion(usage):
            return False
        # (past that check, a usage at all states 0 output tokens)
        if not usage and not _ends_in_error_body(text):
            return False
    if not isinstance(text, str) or not text:
        return False
    _add_text(text, facts, depth)
    return True


def _is_zero(count: Any) -> bool:
    return type(count) is int and count == 0


def _ends_in_error_body(text: str) -> bool:
    """Whether ``text`` ends in an error body in JSON (``_error_body_end``) that starts at
    its first brace (or the bracket of a list around it alone); one with no "error" key
    only as the whole text."""
    start = text.find("{")
    listed = text.rfind("[", 0, start) if start > 0 else -1
    if listed >= 0 and not text[listed + 1 : start].strip():
        start = listed  # Google's OpenAI-compatible errors: [{"error": {...}}]
    end = _error_body_end(text, start, keyless=start >= 0 and not text[:start].strip())
    return end >= 0 and not text[end:].strip()


def _error_body_end(text: str, start: int, *, keyless: bool = True) -> int:
    """Where a JSON object (or a list of one) that starts at ``start`` ends when it is an
    error body: one with an "error", or (``keyless``) a message beside an HTTP error status
    as its code (NVIDIA NIM's ``{"message": ..., "type": "Bad Request", "code": 400}``);
    -1 for none."""
    if start < 0:
        return -1
    try:
        inner, end = _decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        return -1
    if isinstance(inner, list) and len(inner) == 1:
        inner = inner[0]  # (a list that holds one error body)
    if not isinstance(inner, dict):
        return -1
    if "error" in inner:
        return end
    code = inner.get("code")
    stated = isinstance(inner.get("message"), str) and type(code) is int and 400 <= code < 600
    return end if keyless and stated else -1


def _first_choice(doc: dict[str, Any]) -> dict[str, Any] | None:
    choices = doc.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return None


def _reply_text(choice: dict[str, Any]) -> Any:
    """The text of a choice's reply, whole (``message``) or a chunk's (``delta``), or a
    legacy completion's ``text``."""
    reply = choice.get("message") or choice.get("delta")
    return reply.get("content") if isinstance(reply, dict) else choice.get("text")


def reply_text(doc: dict[str, Any]) -> str | None:
    """A stream event's reply text: a chat or legacy completion chunk's, or an Anthropic
    text delta's; None when it holds none."""
    choice = _first_choice(doc)
    text = _reply_text(choice) if choice is not None else _text_delta(doc)
    return text if isinstance(text, str) and text else None


def reply_overflow(text: str) -> Overflow | None:
    """The overflow a stream's first reply text (``reply_text``, at most
    ``MAX_REPLY_READ`` characters) reads as, as an error's message would; None when it does
    not. LocalAI writes llama.cpp's refusal as the reply's first text, then the error as an
    error chunk or event; LMDeploy's Anthropic stream writes its engine's status as the
    text, then a ``message_delta`` that counts no output token. Such a text is not taken
    for output, and is no error either: the events after it decide (held as any before
    the first output)."""
    if len(text) > MAX_REPLY_READ or not _has_hint(text.lower().encode()):
        return None
    facts = _Facts()
    facts.say(text)
    return _decide(200, facts)


# characters of a reply chunk read for an overflow's wording; past WORDED_REPLY_LIMIT only a
# stop reason of "error" makes it the server's (tududes' claude-proxy writes the upstream's
# refusal with advice around it, 556 characters)
MAX_REPLY_READ: Final = 1024
WORDED_REPLY_LIMIT: Final = 512


def _text_delta(doc: dict[str, Any]) -> Any:
    """The text of an Anthropic stream's ``content_block_delta``, or None."""
    delta = doc.get("delta") if doc.get("type") == "content_block_delta" else None
    return delta.get("text") if isinstance(delta, dict) else None


def _spoofed_error(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """oai-reverse-proxy (and its forks) answers its own errors as a 200 completion, so
    that a chat UI shows them: the reply's text is the error, its ``finish_reason`` (a
    chat completion or chunk), ``stop_reason`` (an Anthropic message) or ``finishReason``
    (a Gemini candidate) is "Proxy error (HTTP 400 Bad Request)", the text starts with
    that title as a heading and ends in ``<!-- oai-proxy-error -->``. The mark with the
    reason or the heading makes a reply an error (a model writes none of them; a stream's
    text delta carries no reason), read with the status it names."""
    reason: Any = doc.get("stop_reason")
    text: Any = None
    content = doc.get("content")
    candidate = _first_item(doc.get("candidates"))
    if isinstance(reason, str) or isinstance(content, list):
        block = _first_item(content)
        text = block.get("text") if isinstance(block, dict) else None
    elif doc.get("type") == "content_block_delta":
        text = _text_delta(doc)
    elif isinstance(candidate, dict):
        reason = candidate.get("finishReason")
        parts = _first_item(candidate.get("content"), "parts")
        text = parts.get("text") if isinstance(parts, dict) else None
    else:
        choice = _first_choice(doc)
        if choice is None:
            return False
        reason, text = choice.get("finish_reason"), _reply_text(choice)
    if not isinstance(text, str) or _SPOOF_MARK not in text:
        return False
    status = _SPOOF_REASON_RE.match(reason) if isinstance(reason, str) else None
    status = status or _SPOOF_HEADING_RE.match(text)
    if status is None:
        return False
    facts.statuses.append(int(status.group(1)))
    _add_text(text, facts, depth)
    return True


def _api_error_chunk(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """Argonne's FIRST gateway streams an upstream's error as a chunk of its own id
    ``chatcmpl-api-error`` whose text starts "[ERROR]" (a model chooses neither), the
    upstream's error body inside the text: read as an error's message."""
    choice = _first_choice(doc)
    if doc.get("id") != _API_ERROR_ID or choice is None:
        return False
    text = _reply_text(choice)
    if not isinstance(text, str) or not text.lstrip().startswith("[ERROR]"):
        return False
    _add_text(text, facts, depth)
    return True


_API_ERROR_ID: Final = "chatcmpl-api-error"


def _relayed_exception(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """RAG servers (RAGFlow, MaxKB) answer their model's refusal as a completion of their
    own whose reply is the openai SDK's exception, "Error code: 400 - {...}", after a
    short prefix ("**ERROR**: INVALID_REQUEST - ", "Exception:"); so do relays with
    Google's JS SDK's ("[GoogleGenerativeAI Error]: Error fetching from ... [400 Bad
    Request] ...", zuisong's gemini-openai-proxy), and LibreChat's agents API with the
    openai-node SDK's ("Error: 400 This model's ...", a stream's one chunk that carries
    its finish reason), Kuwa GenAI OS with ollama-python's, one line that ends "(status
    code: 400)", the whole reply where no model wrote it (a whole completion that counts
    no output, a chunk that carries its finish reason); Open WebUI's pipelines and
    antigravity2api and VCPToolBox with a provider's status and body ("Error: 400 - {...}",
    "错误: API请求失败 (400): {...}", "[UPSTREAM_ERROR] 上游API返回状态码 400，错误信息:
    {...}", the whole reply), the bridges over Claude Code with its "API Error: 400
    {...}", and gateways with the upstream's status and body, a stream's one chunk that
    carries its finish reason (llmcycle's failover, "[LLMCycle Proxy Error]: All 3
    providers failed. Last error: [x] Bad request (400): {...}", proxytool's "upstream
    error (HTTP 400): {...}": ``_relayed_reply``);
    LocalAI's legacy completions stream ends in a reply that is its backend's gRPC error
    ("Internal error: rpc error: code = Internal desc = ..."), and Open WebUI's Bedrock
    pipeline answers with botocore's ClientError, where no model wrote it ("Error: An
    error occurred (ValidationException) when calling the Converse operation: ...").
    A model's reply does not start so: read as an error's message, with the status it
    names (the SDK's exception only after nothing or a prefix that starts with an error,
    and where its body ends the reply: a reply that introduces it, or goes on after it,
    explains it)."""
    choice = _first_choice(doc)
    if choice is None:
        return _relayed_candidate(doc, facts, depth)
    text = _reply_text(choice)
    if not isinstance(text, str):
        return False
    match = (
        _sdk_exception(text)
        or _GOOGLE_SDK_ERROR_RE.match(text)
        or (_OLLAMA_SDK_ERROR_RE.match(text) if _sent_whole(doc, choice) else None)
        or (_JS_SDK_ERROR_RE.match(text) if _finished_chunk(choice) else None)
        or (_relayed_reply(text) if _finished_chunk(choice) else None)
    )
    status = match.group(1) if match is not None else None
    if status is None and _no_output_counted(doc, choice):
        status = _status_and_body(text)
    if status is not None:
        facts.statuses.append(int(status))
    elif _GRPC_ERROR_RE.match(text) is None and not (
        _BOTO_ERROR_RE.match(text) and _sent_whole(doc, choice)
    ):
        return False
    _add_text(text, facts, depth)
    return True


def _named_status(text: str) -> re.Match[str] | None:
    """A message that starts as the openai SDK's exception, "Error code: 400 - {...}", or
    as a gateway's "upstream returned 400: {...}": the status it names (group 1) is the
    upstream's, the type and code beside it the gateway's guess from the words (headroom
    answers an overflow with 429 "rate_limit_exceeded" where they hold "limit", 404
    "model_not_found" where they hold "model"; VaalaCat's ai-gateway types every error in
    a stream it opened "rate_limit_error")."""
    return (
        _SDK_EXCEPTION_RE.match(text)
        or _RELAYED_STATUS_RE.match(text)
        or _FAILED_OVER_RE.match(text)
        or _STATUS_FROM_URL_RE.match(text)
    )


def _sdk_exception(text: str) -> re.Match[str] | None:
    """The openai SDK's exception, "Error code: 400 - {...}", as a relay writes it for the
    whole reply: after nothing or a short prefix that starts by naming an error or
    exception ("**ERROR**: INVALID_REQUEST - ", "Exception:"), its body closing the
    reply."""
    match = _SDK_EXCEPTION_RE.match(text)
    if match is None:
        return None
    prefix = text[: match.start(1) - len("error code: ")]
    if prefix.strip() and _ERROR_PREFIX_RE.match(prefix) is None:
        return None
    end = _bracketed_end(text, match.end() - 1)
    return match if end >= 0 and not text[end:].strip() else None


def _relayed_reply(text: str) -> re.Match[str] | None:
    """A gateway's error with the upstream's status and body as the whole reply (a
    failover's, ``_FAILED_OVER_RE``, or ``_RELAYED_STATUS_RE``'s), after nothing or a
    bracketed tag that names an error ("[LLMCycle Proxy Error]: "), its body closing the
    reply."""
    tag = _ERROR_TAG_RE.match(text)
    start = tag.end() if tag is not None else len(text) - len(text.lstrip())
    match = _FAILED_OVER_RE.match(text, start) or _RELAYED_STATUS_RE.match(text, start)
    if match is None:
        return None
    end = _bracketed_end(text, match.end() - 1)
    return match if end >= 0 and not text[end:].strip() else None


def _bracketed_end(text: str, start: int) -> int:
    """Where the object or list that opens at ``start`` closes (JSON, or a Python dict's
    repr as the openai SDK prints it: quoted text skipped); -1 where it does not."""
    depth = 0
    quote = ""
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return -1


def _no_output_counted(doc: dict[str, Any], choice: dict[str, Any] | None) -> bool:
    """A stream's chunk (its usage, if any, is a placeholder), or a whole completion that
    counts no output token (or carries no usage)."""
    if choice is not None and isinstance(choice.get("delta"), dict):
        return True
    return _counts_no_completion(doc.get("usage"))


def _status_and_body(text: str) -> str | None:
    """The status of a reply that is wholly "Error: 400 - <the upstream's error body in
    JSON>", as Open WebUI's pipelines write a provider's refusal (``f"Error: {status} -
    {body}"``, or "Error: Error: 400 - ..." around an exception that says so),
    "错误: API请求失败 (400): <body>", as antigravity2api does, "[UPSTREAM_ERROR]
    上游API返回状态码 400，错误信息: <body>", as VCPToolBox does, or "API Error: 400
    <body>", as Claude Code prints it (claude-max-proxy-py relays it)."""
    match = _STATUS_AND_BODY_RE.match(text)
    if match is None:
        return None
    end = _error_body_end(text, match.end())
    if end < 0 or text[end:].strip() or match.lastindex is None:
        return None
    return match.group(match.lastindex)


def _relayed_candidate(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """... and a Gemini answer's one finished candidate whose one text is wholly an
    upstream's status and body (``_status_and_body``: Mcp-AI Proxy's Gemini route streams
    "上游返回错误 (400)：<body>" so). Read as an error's message, with that status."""
    if not isinstance(doc.get("candidates"), list):
        return False
    text, _ = _sole_answer(doc)
    status = _status_and_body(text) if isinstance(text, str) else None
    if status is None:
        return False
    facts.statuses.append(int(status))
    _add_text(text, facts, depth)
    return True


def _finished_chunk(choice: dict[str, Any] | None) -> bool:
    """A stream chunk's choice that carries its finish reason beside its text: the whole
    reply in one chunk, as a server writes its own (a model's streamed answer comes token
    by token, its finish reason in a chunk of its own)."""
    return (
        choice is not None
        and isinstance(choice.get("delta"), dict)
        and choice.get("finish_reason") not in (None, "")
    )


def _engine_status_reply(doc: dict[str, Any], facts: _Facts, depth: int) -> bool:
    """LMDeploy (0.10 to 0.15) answers its engine's refusal as a completion of its own whose
    whole reply is "internal error happened, status code ResponseType.<STATUS>", with
    ``finish_reason`` "error" (a chat completion or chunk), on its Anthropic route with no
    output token, on its Responses route as the text of a failed response (beside a generic
    error): a model chooses neither the reason nor the engine's status name. Its reasoning
    parser may have moved the words to the reasoning field (no closing think tag). gpt4all's
    backend (GPT4All's own API server, LocalAI's gpt4all backend, 2023-2024) writes its
    refusal as the whole reply whatever the finish reason, "ERROR: The prompt size exceeds
    the context window size and cannot be processed." Read as an error's message."""
    said: list[Any] = []
    choice = _first_choice(doc)
    status = _ENGINE_STATUS_RE
    if doc.get("object") == "response":
        if doc.get("status") != "failed":
            return False
        said.append(doc.get("output_text"))
        said.extend(_block_texts(_first_item(_first_item(doc.get("output")), "content")))
    elif choice is not None:
        if choice.get("finish_reason") != "error":
            status = _BACKEND_REFUSAL_RE
        reply = choice.get("message") or choice.get("delta")
        if isinstance(reply, dict):
            # (a backend's refusal is the reply itself, never its reasoning beside an answer)
            keys = _ENGINE_STATUS_FIELDS if status is _ENGINE_STATUS_RE else ("content",)
            said.extend(reply.get(key) for key in keys)
        said.append(choice.get("text"))  # legacy completions
    else:
        usage, content = doc.get("usage"), doc.get("content")
        if not isinstance(usage, dict) or usage.get("output_tokens") != 0:
            return False
        if not isinstance(content, list) or len(content) != 1:
            return False
        said.extend(_block_texts(content[0]))
    for text in said:
        if isinstance(text, str) and status.fullmatch(text) is not None:
            _add_text(text, facts, depth)
            return True
    return False


def _first_item(node: Any, key: str | None = None) -> Any:
    """The first item of a list (of ``node[key]`` when a key is given), or None."""
    if key is not None:
        node = node.get(key) if isinstance(node, dict) else None
    return node[0] if isinstance(node, list) and node else None


def _block_texts(block: Any) -> list[Any]:
    """A content block's text, as written or as thinking."""
    return [block.get("text"), block.get("thinking")] if isinstance(block, dict) else []


_ENGINE_STATUS_RE: Final = re.compile(r"internal error happened, status code ResponseType\.[A-Z_]+")
# where LMDeploy's status may stand (its reasoning parser may move it aside)
_ENGINE_STATUS_FIELDS: Final = ("content", "reasoning_content", "reasoning")
_BACKEND_REFUSAL_RE: Final = re.compile(
    r"ERROR: The prompt size exceeds the context window size and cannot be processed\."
    # afm-server: Apple's on-device model's refusal as "Error: <its description>"
    r"|Error: Exceeded model context window size\.?"
    # Kuwa GenAI OS's executors, when no turn of the history fits
    r"|\[Sorry, The input message is too long!\]"
    # RobAI's research proxy, its pre-flight count over 95% of the window, finished "length"
    r"|\u274c \*\*Request Rejected: Token Limit Exceeded\*\*\n\nYour request contains \*\*[\d,]+"
    r" tokens\*\*, which exceeds the configured limit\.\n\n\*\*Limits:\*\*\n(?:- [^\n]{1,80}\n){3}"
    r"\n\*\*Solution:\*\* Please reduce the context size by:(?:\n- [^\n]{1,80}){1,5}"
    # maclocal-api (afm) streams its own refusal so, then finishes "stop" (with Apple's
    # counts, or without them where the error is not the model's own)
    r"|\u26a0\ufe0f? \*\*Context window exceeded\*\*\n\n(?:Your conversation has \d+ tokens but"
    r" the maximum is \d+\.\n\nPlease start a new conversation or reduce the message length\."
    r"|The conversation is too long\. Apple Foundation Models has a \d+ token limit\.\n\n"
    r"Please start a new conversation\.)"
)


# openai-python's APIStatusError as str(), at the start of a reply, after at most a short
# one-line prefix that quotes nothing (a reply quoting such an error explains it)
_SDK_EXCEPTION_RE: Final = re.compile(
    r"\s*+[^\n{`'\"]{0,60}?\berror code: ([45]\d\d) - [{\[]", re.IGNORECASE | re.ASCII
)
# ... and a gateway's words for an upstream's status and body, the whole start of a message
# ("upstream returned 400: {...}", "backend 400: [...]", "provider error 400 - {...}",
# proxytool's "upstream error (HTTP 400): {...}")
_RELAYED_STATUS_RE: Final = re.compile(
    r"\s*+(?:upstream|backend|provider)(?: (?:returned|responded with|answered|error))?"
    r"(?: \(?(?:http|status|code))? \(?([45]\d\d)\)?(?::| -) ?[{\[]",
    re.IGNORECASE | re.ASCII,
)
# ... and after a failover's preface, naming the first (or last) upstream tried and its
# status: coderouter's "profile='claude-code': all providers failed: [cloud-sonnet
# status=400] 400 from upstream: b'{...}'" (typed "overloaded_error" in its stream, whatever
# the upstream said), neuralbrok's 503 "All providers failed. Tried: lmstudio. Last:
# [lmstudio] LM Studio HTTP 400: {...}", llmcycle's "All 3 providers failed. Last error:
# [standa] Bad request (400): {...}"
_FAILED_OVER_RE: Final = re.compile(
    r"[^\n{:]{0,80}?(?::\s*)?\b(?:all|every)\b[^.:;\n{]{0,60}?\bfailed[.:;]\s*"
    r"(?:tried: [^.\n]{0,80}\.\s*)?(?:last(?: error)?: )?\[[^\]\n]{1,80}\] [^\n{]{0,40}?\b"
    r"([45]\d\d)\)?(?: from (?:upstream|backend|provider))?: b?'?[{\[]",
    re.IGNORECASE | re.ASCII,
)
# ... and the upstream's address after it: openai-playground's "Error: http status 400.
# Error message from http://host/v1/chat/completions: {...}" (sent as its own 404)
_STATUS_FROM_URL_RE: Final = re.compile(
    r"\s*+(?:error: )?http status ([45]\d\d)\. error message from \S{1,300}?: [{\[]",
    re.IGNORECASE | re.ASCII,
)
# ... and the tag a relay puts before it where it is the whole reply ("[LLMCycle Proxy
# Error]: ")
_ERROR_TAG_RE: Final = re.compile(r"\s*\[[^\]\n]{0,40}\berror\]:?\s*", re.IGNORECASE | re.ASCII)
# ... and the prefix a relay writes before it, if any ("**ERROR**: ...", "Exception:")
_ERROR_PREFIX_RE: Final = re.compile(r"[\s*\[]*(?:error|exception)", re.IGNORECASE)


# ollama-python's ResponseError as str(), "<its message> (status code: 400)", the whole
# reply on one line (a lookahead: the status is the first group, as for the others)
_OLLAMA_SDK_ERROR_RE: Final = re.compile(r"(?=[^\n{}\[\]]{1,400} \(status code: (4\d\d)\)\s*+\Z)")


# @google/generative-ai's GoogleGenerativeAIError, at the start of a reply, with the status
_GOOGLE_SDK_ERROR_RE: Final = re.compile(
    r"\[GoogleGenerativeAI Error\]: Error fetching from [^\[\n]{0,300}?\[([45]\d\d)\b"
)
# the JavaScript SDKs' APIError as String(error) prints it (openai-node, Anthropic's),
# the whole start of a stream's one finished chunk: "\n\nError: 400 <the provider's
# message>" (LibreChat's agents API)
_JS_SDK_ERROR_RE: Final = re.compile(r"\s*Error: ([45]\d\d) (?=\S)")
# an HTTP status and the body it came with, the whole reply (``_status_and_body``): "Error:
# 400 - {", antigravity2api's "错误: API请求失败 (400): {" (error: API request failed), or
# VCPToolBox's "[UPSTREAM_ERROR] 上游API返回状态码 400，错误信息: {" (the upstream API returned
# status 400, error message:), or Claude Code's "API Error: 400 {", as the bridges that run
# it relay its result, or Mcp-AI Proxy's "上游返回错误 (400)：{" (the upstream returned an
# error), a full-width colon and no space before the body
_STATUS_AND_BODY_RE: Final = re.compile(
    r"\s*+(?:(?:(?:Error: )?Error: ([45]\d\d) -|错误: API请求失败 \(([45]\d\d)\):"
    r"|\[UPSTREAM_ERROR\] 上游API返回状态码 ([45]\d\d)，错误信息:|API Error: ([45]\d\d)) "
    r"|上游返回错误 \(([45]\d\d)\)[:：] ?)(?=\{)"
)
# botocore's ClientError as a string, the whole start of a reply ("Error: " before it, as
# Open WebUI's Bedrock pipeline writes it): "An error occurred (ValidationException) when
# calling the Converse operation: <the service's message>"
_BOTO_ERROR_RE: Final = re.compile(
    r"\s*(?:Error: )?An error occurred \(\w{1,60}\) when calling the \w{1,60} operation"
    r"(?: \(reached max retries: \d{1,3}\))?: "
)
# a Go gRPC status as a string, the whole start of a reply ("Internal error: " before it)
_GRPC_ERROR_RE: Final = re.compile(
    r"\s*(?:[A-Z][a-z]+ error: )?rpc error: code = [A-Z][A-Za-z]+ desc = "
)


# --------------------------------------------------------------------------- decision

_STARTUP_METRIC_RE: Final = re.compile(
    r"\[startup\] recording metric for phase: [\w-]{1,40} duration: \d{1,12}(?:\.\d{1,20})?"
)


def _never(text: str) -> bool:
    """A rate-limit, quota, billing, auth or safety wording, or a model's output cap (not
    in the Gemini CLI's startup log, whose whole metric lines are left out: bridges relay
    them with its stderr, "[STARTUP] Recording metric for phase: authenticate duration:
    71.9"; nor in a failover's preface, "All API keys failed. Last error: ..."; nor
    Vertex's advice after an overflow, "use the CountTokens API to calculate prompt token
    count and billing characters")."""
    low = text.lower()
    if "[startup] recording metric" in low:
        low = _STARTUP_METRIC_RE.sub(" ", low)
    if "failed" in low:
        low = _FAILOVER_PREFACE_RE.sub("", low, count=1)
    if "billing characters" in low:  # (Vertex's advice: "... count and billing characters")
        low = low.replace("billing characters", "characters")
    if any(word in low for word in _NEVER_WORDS):
        return True
    return any(hint in low for hint in _RATE_HINTS) and _RATE_RE.search(text) is not None


# a failover's preface to the error it shows, "All API keys failed. Last error: ..."
# (api-farm): its words name what was tried, the last error after it says what failed
_FAILOVER_PREFACE_RE: Final = re.compile(
    r"^\s*(?:all|every)\b[^.:;]{0,60}?\bfailed\b[^.:;]{0,20}[.:;]\s*"
    r"(?=(?:tried: [^.]{0,80}\.\s*)?last\b)"
)


def _never_stated(text: str) -> bool:
    """``_never`` in the sentences that state the error: the first, and any after it but
    advice (``_advice``), in a message that names the context window. Where an overflow is
    read (or one no trim can fix), advice may name what it is not ("Add more API keys or
    wait for rate limits to reset"); where none is, or the window goes unnamed ("45000
    tokens exceeds the limit of 30000 tokens. Consider upgrading your plan for higher rate
    limits."), advice is often all that tells a rate limit or a refusal, and a suspect's,
    or a 403's, ``_never`` reads it whole."""
    if not _never(text):
        return False
    if _WINDOW_NAME_RE.search(text) is None and _CONTEXT_WINDOW_RE.search(text) is None:
        return True  # advice is let pass only beside words that name the context window
    return _never(_without_advice(text))


# "context window", also "context/token window" (freellmapi)
_CONTEXT_WINDOW_RE: Final = re.compile(r"\bcontext\S{0,12}\s?window\b", re.IGNORECASE)


def _without_advice(text: str) -> str:
    """``text`` without its sentences of advice (``_ADVICE_SENTENCE_RE``) after the first,
    but those that name a quota, a rate per period, credits, billing or a tier
    (``_ADVICE_TELLS_RE``): "Contact support to increase your quota." tells a quota."""
    return _without(text, _advice)


def _without_remedies(text: str) -> str:
    """``text`` without its sentences of remedy (``_REMEDY_SENTENCE_RE``) after the first
    that state no excess of their own and, less the tool results or calls they name
    (``_REMEDY_NOUNS_RE``), hold no generic exclusion (an output, a time, a size)."""
    return _without(text, _remedy)


def _without(text: str, dropped: Callable[[str], bool]) -> str:
    kept: list[str] = []
    start = 0
    for end in [*_SENTENCE_END_RE.finditer(text), None]:
        sentence = text[start : end.end() if end is not None else len(text)]
        if not kept or not dropped(sentence):
            kept.append(sentence)
        if end is not None:
            start = end.end()
    return "".join(kept)


def _advice(sentence: str) -> bool:
    return (
        _ADVICE_SENTENCE_RE.match(sentence) is not None
        and _ADVICE_TELLS_RE.search(sentence) is None
    )


def _remedy(sentence: str) -> bool:
    return (
        _REMEDY_SENTENCE_RE.match(sentence) is not None
        and _GEN_EXCESS_RE.search(sentence) is None  # ("Remove the tool, which exceeds ...")
        and _GEN_TOO_LONG_RE.search(sentence) is None
        and _GEN_EXCLUDE_RE.search(_REMEDY_NOUNS_RE.sub(" ", sentence)) is None
    )


def _strong(text: str) -> bool:
    """A sentence that names the context window as exceeded (``_STRONG_RE``) by the prompt,
    not by an output setting alone ("Provided max_tokens (8192) exceeds context window
    size (4096)": an output setting before it in its sentence, and no prompt-side word).
    Other words of output ("Chat completion request exceeds the context window") do not
    count: they name the endpoint, not what exceeds."""
    for match in _STRONG_RE.finditer(text):
        if _CJK_RE.search(match.group(0)):
            sentence = _ZH_SENTENCE_RE.match(text, match.start())
            if sentence and _GEN_ZH_EXCLUDE_RE.search(sentence[0]):
                continue  # (its own sentence names images, files, output, a period's quota)
        ends = [m.end() for m in _SENTENCE_END_RE.finditer(text, 0, match.start())]
        lead = text[ends[-1] if ends else 0 : match.start()]
        if _OUTPUT_SETTING_RE.search(lead) is None or _PROMPT_WORD_RE.search(lead) is not None:
            return True
    return False


# Chinese text, and a Chinese sentence from where it starts
_CJK_RE: Final = re.compile(r"[\u3400-\u9fff]")
_ZH_SENTENCE_RE: Final = re.compile(r"[^。！？!?；;\n]*")


def _num(value: str | None) -> int | None:
    return int(value.replace(",", "")) if value else None


# Sentinel, compared by identity: the message states an overflow that no prompt can fix.
_NOT_FIXABLE: Final = Overflow(None, None)


def _read_message(text: str) -> Overflow | None:
    """The overflow a message states; ``_NOT_FIXABLE`` when the output alone fills it.
    A pattern that reads counts wins over one that only recognises the wording."""
    countless: Overflow | None = None
    for pattern in _PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        real = _num(groups.get("real"))
        limit = _num(groups.get("max"))
        comp = _num(groups.get("comp"))
        total = _num(groups.get("total"))
        over = _num(groups.get("over"))  # the excess over the limit ("exceeded by E tokens")
        if over is not None and limit is not None:
            real = limit + over
        # a total that counts the output reservation without itemising it: a history grows
        # a turn at a time, so one over twice the window is a max_tokens no prompt fits with
        withres = _num(groups.get("withres"))
        if withres is not None and limit is not None:
            if withres > 2 * limit:
                return _NOT_FIXABLE
            real = withres
        # the room the prompt leaves for output, stated with the prompt: the window (less any
        # reserve) is their sum
        room = _num(groups.get("room"))
        if room is not None and real is not None:
            limit = room + real
        parts = groups.get("parts")
        if parts:
            prompt_sum, comp_sum = _parts(parts, real if real is not None else total)
            real = real if prompt_sum is None else prompt_sum
            comp = comp if comp_sum is None else comp_sum
        if real is None and total is not None:
            real = total - comp if comp is not None else total
        if comp is not None and limit is not None:
            available = limit - comp
            if available <= 0 or (available < _PAD_BLOCK and groups.get("padded") is not None):
                return _NOT_FIXABLE
            limit = available
        if real is not None or limit is not None:
            whole = comp is None and groups.get("whole") is not None
            return Overflow(real, limit, whole=whole)
        if countless is None:  # keep looking for a pattern that also reads the counts
            countless = Overflow(None, None)
    return countless


def _parts(parts: str, stated: int | None) -> tuple[int | None, int | None]:
    """The prompt and output tokens an itemised breadcrumb ("8800 in the messages, 200 in
    the completion") sums, each None where it names none. Parts that add up to less than
    the count they itemise (``stated``) name some of it only ("resulted in 9000 tokens
    (including 200 in the functions)"): no prompt is read from them."""
    prompt = output = 0
    seen_prompt = seen_output = False
    for part in _PART_RE.finditer(parts):
        what = part.group("what").lower()
        n = int(part.group("n").replace(",", ""))
        if what in _PROMPT_PARTS or what in _PROMPT_PARTS_2:
            prompt += n
            seen_prompt = True
        else:
            output += n
            seen_output = True
    if stated is not None and prompt + output < stated:
        seen_prompt = False
    return (prompt if seen_prompt else None), (output if seen_output else None)


_PAD_BLOCK: Final = 64  # vllm-spyre pads a prompt to a multiple of this many tokens


def _effective_status(http_status: int, facts: _Facts) -> int:
    if http_status >= 400:
        return http_status
    for status in facts.statuses:
        if status >= 400:
            return status
    return http_status


def _custom(text: str, patterns: Patterns) -> Overflow | None:
    """An operator's pattern (``upstreams.<name>.overflow_patterns``) matching ``text``;
    its named groups ``real`` / ``max``, when present, give the counts."""
    for pattern in patterns:
        match = pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        return Overflow(_num(groups.get("real")), _num(groups.get("max")))
    return None


def _generic(text: str) -> bool:
    """A wording no table lists, judged on its vocabulary: an overflow names the
    prompt or the context (``context``, ``prompt``, ``input``, ``tokens``...) and an
    excess (``exceed``, ``too long``, ``longer than``...), and says nothing of an
    output limit, a byte or media size, or content safety (but for the tool results a
    later remedy names: ``_without_remedies``). Rate, quota, billing and
    auth wordings never get here. Chinese wordings are judged on their own vocabulary
    (``_GEN_ZH_*``)."""
    if _GEN_EXCLUDE_RE.search(_without_remedies(text)) is not None:
        return False
    if _GEN_ADVICE_RE.search(text) is not None and _GEN_CONTEXT_RE.search(text) is not None:
        return True  # "maximum context length is N tokens. Please reduce the length of the prompt"
    excess = _GEN_EXCESS_RE.search(text) is not None
    if not excess and _GEN_LIMIT_STATED_RE.search(text) is not None:
        # its only count: beside another one it is a setting compared with the window
        # ("The request maximum prompt tokens is 300000. However, the model's maximum
        # context length is 200000 tokens.")
        return len(_COUNT_RE.findall(text)) == 1
    if excess and (
        _GEN_CONTEXT_RE.search(text) is not None
        or _GEN_TOO_LONG_RE.search(_GEN_HEDGE_RE.sub(" ", text)) is not None
        or (_GEN_SUBJECT_RE.search(text) is not None and _GEN_LIMIT_RE.search(text) is not None)
    ):
        return True
    # (also where only an English "N > M" stood beside the Chinese words: "提示词长度超出
    # 限制：9100 > 8192")
    return (
        _GEN_ZH_EXCESS_RE.search(text) is not None
        and _GEN_ZH_SUBJECT_RE.search(text) is not None
        and _GEN_ZH_EXCLUDE_RE.search(text) is None
    )


def _output_fills(text: str) -> bool:
    """A sum of the prompt and an output setting, prompt first ("input length and
    `max_tokens` exceed context limit: 1200 + 200000 > 200000"), whose output alone fills
    the window."""
    counts = _SUM_COUNTS_RE.search(text)
    if counts is None or _SUM_OUTPUT_RE.search(text) is None:
        return False
    return int(counts["comp"].replace(",", "")) >= int(counts["max"].replace(",", ""))


def _summed(text: str) -> bool:
    """A wording no table lists that names the prompt and its output reservation together
    as what exceeds the window (``_SUM_SUBJECT_RE``), and no other excluded word once the
    output's own words are set aside. A shorter prompt leaves the reservation its room,
    unless the reservation alone fills the window, which such a wording does not say: the
    ladder then ends with its retries spent, nothing dropped for good."""
    if _SUM_SUBJECT_RE.search(text) is None:
        return False
    if _GEN_EXCLUDE_RE.search(_SUM_OUTPUT_RE.sub(" ", text)) is not None:
        return False
    return _GEN_EXCESS_RE.search(text) is not None and (
        _GEN_CONTEXT_RE.search(text) is not None or _GEN_LIMIT_RE.search(text) is not None
    )


def _item_counts(pattern: re.Pattern[str], text: str) -> set[int]:
    counts: set[int] = set()
    for match in pattern.finditer(text):
        if _SIZE_COUNT_RE.match(text, match.end()) is not None:
            continue  # "prompt has 70000 bytes": a size, not a count of tokens
        for group in match.groups():
            if group:
                counts.add(int(group.replace(",", "")))
                break
    return counts


def _itemised(text: str) -> Overflow | None:
    """A wording no table lists that itemises the prompt, one output reservation and the
    window, each told by the words beside it ("You passed P input tokens and requested C
    output tokens ... context length is only L", "`inputs` tokens + `max_new_tokens` must be
    <= L. Given: P `inputs` tokens and C `max_new_tokens`"). The prompt is the sum of its
    parts (text, tool, image input); the overflow aims at ``L - C``. ``_NOT_FIXABLE`` when
    the reservation alone fills the window, the prompt's count stated or not ("maximum
    context length is 32768 tokens, but the request allows 32768 completion tokens",
    runNburn's); None when the reading is not unambiguous (not exactly one reservation
    and one window, or no prompt count) or the sum fits."""
    if _ITEM_GATE_RE.search(text) is None:
        return None
    prompts = _item_counts(_ITEM_PROMPT_AFTER_RE, text) | _item_counts(_ITEM_PROMPT_BEFORE_RE, text)
    outputs = _item_counts(_ITEM_OUTPUT_AFTER_RE, text) | _item_counts(_ITEM_OUTPUT_BEFORE_RE, text)
    limits = _item_counts(_ITEM_LIMIT_RE, text)
    if len(limits) > 1:  # a prompt count read as a limit too ("exceeds ... (P)")
        limits -= prompts
    if len(outputs) != 1:
        return None
    reserved = outputs.pop()
    if len(limits) == 2 and reserved in limits:  # "<= L" read beside "max_tokens (C)"
        limits.discard(reserved)
    if len(limits) != 1:
        return None
    window = limits.pop()  # may equal the reservation: then nothing fits
    if reserved >= window:
        return _NOT_FIXABLE
    if not prompts:
        return None
    prompt = sum(prompts)
    if prompt + reserved <= window:
        return None
    return Overflow(prompt, window - reserved)


def _no_prompt_fits(text: str) -> bool:
    """A limit no prompt fits: an input limit stated below zero, or a server's own setting
    stated over the model's window (``_SETTING_OVER_WINDOW_RE``)."""
    if "-" not in text:
        return False
    return (
        _NEGATIVE_LIMIT_RE.search(text) is not None
        or _SETTING_OVER_WINDOW_RE.search(text) is not None
    )


def _from_count_fields(counts: dict[str, int]) -> Overflow | None:
    """The overflow an error's count fields state; None when the output asked for alone
    fills the window they state: no trim makes such a request fit."""
    window, output = counts.get("window"), counts.get("output")
    if window is not None and output is not None:
        if output >= window:
            return None
        window -= output
    return Overflow(counts.get("prompt"), window)


def fields_fill_window(status: int, facts: _Facts) -> bool:
    """Whether an error reads as an overflow but for its count fields, which state an
    output asked for that alone fills the window (llm_gateway's details: no trim fits)."""
    window, output = facts.counts.get("window"), facts.counts.get("output")
    if window is None or output is None or output < window:
        return False
    counts, facts.counts = facts.counts, {}
    try:
        return _decide(status, facts) is not None
    finally:
        facts.counts = counts


def _unfixable(text: str) -> bool:
    """A message stating an overflow whose output reservation alone fills the window, or
    a limit no prompt fits (``_no_prompt_fits``: MLC LLM's "larger than the model input
    length limit -80", the window less the reservation)."""
    if _no_prompt_fits(text):
        return True
    read = _read_message(text)
    return read is _NOT_FIXABLE or (read is None and _itemised(text) is _NOT_FIXABLE)


def _claimed(text: str) -> Overflow | None:
    """A wording no table lists that states a limit and a larger count in one sentence,
    either order ("maximum prompt length is 131072 but the request contains 136973
    tokens"): read in a message that says "tokens" (or names the input, prompt, sequence
    or context length) when the sentences that state it (and
    the one before) name no output and no byte, media, schema or time word
    (``_GEN_EXCLUDE_RE``); advice after them ("For image inputs, ...") does not count.
    The count is at most 64 times the limit, and the limit at least 100."""
    if _CLAIM_TOKENS_RE.search(text) is None:
        return None
    for claim in (
        _CLAIM_LIMIT_FIRST_RE,
        _CLAIM_COUNT_FIRST_RE,
        _CLAIM_FOR_WINDOW_RE,
        _CLAIM_ONLY_RE,
    ):
        match = claim.search(text)
        if match is None:
            continue
        said = _sentences(text, match.start(), match.end())
        if _OUTPUT_WORD_RE.search(said) is not None or _GEN_EXCLUDE_RE.search(said) is not None:
            continue
        found = _claim_counts(match)
        if found is not None:
            return found
    return None


def _claim_counts(match: re.Match[str]) -> Overflow | None:
    """A claim's count and limit, when the count is at most 64 times the limit and the
    limit at least 100."""
    real = int(match.group("real").replace(",", ""))
    limit = int(match.group("max").replace(",", ""))
    return Overflow(real, limit) if _MIN_COUNT <= limit < real <= limit * _MAX_SHARE else None


def _over_setting(text: str) -> Overflow | None:
    """The prompt's count over a server setting that names the window ("Prompt (9000)
    exceeds max_length (8192)"), in sentences that, less the setting's name, name no
    output, no budget and no byte, media, schema or time word. The limits on the counts
    are ``_claimed``'s."""
    match = _CLAIM_SETTING_RE.search(text)
    if match is None:
        return None
    # (the setting's name set aside: the output exclusions name max_length and the like)
    said = _sentences(text, match.start(), match.end()).replace(match.group(0), " ")
    if (
        _OUTPUT_WORD_RE.search(said) is not None
        or _GEN_EXCLUDE_RE.search(said) is not None
        or "budget" in said.lower()
    ):
        return None
    return _claim_counts(match)


def _sentences(text: str, start: int, end: int) -> str:
    """The sentences of ``text`` that the span ``start:end`` touches, and the one before
    ("Too many tokens in batch. Max is 16384 got 17555")."""
    ends = [boundary.end() for boundary in _SENTENCE_END_RE.finditer(text, 0, start)]
    begin = ends[-2] if len(ends) >= 2 else 0
    after = _SENTENCE_END_RE.search(text, end)
    return text[begin : after.start() if after is not None else len(text)]


def _decide(http_status: int, facts: _Facts, patterns: Patterns = ()) -> Overflow | None:
    """The overflow an error's facts state (``_decide_whole``), or, where they state none,
    one attempt of a failover's summary states on its own (``_failed_attempt``)."""
    found = _decide_whole(http_status, facts, patterns)
    if found is None:
        found = _failed_attempt(http_status, facts, patterns)
    return found


def _failed_attempt(status: int, facts: _Facts, patterns: Patterns) -> Overflow | None:
    """The overflow one attempt of a failover's summary states, each attempt read alone
    (``failover_attempts``): a quota or a bad key on the backup vetoes nothing the primary
    said. A shorter prompt passes the upstream that refused it for its length."""
    if facts.named is not None:
        status = facts.named  # (the status an SDK's exception names stands for the answer's)
    for alone in _attempts(facts):
        found = _decide_whole(status, alone, patterns)
        if found is not None:
            return found
    return None


def _attempts(facts: _Facts) -> Iterator[_Facts]:
    """The facts of each attempt a failover's summary holds: each error object of a list
    of several (``_Facts.attempts``), then each attempt a message lists in words."""
    for start, end in facts.attempts:
        alone = _Facts()
        alone.texts = facts.texts[start:end]
        yield alone
    for text in facts.texts[:_MAX_ITEMS]:
        for attempt in failover_attempts(text):
            alone = _Facts()
            _add_text(attempt, alone, 0)
            yield alone


def failover_attempts(text: str) -> list[str]:
    """The attempts a failover's summary lists after its preface ("All providers
    failed:", "All providers exhausted in chain ..."), at least two: one per bulleted line
    (llm-api-router's "\n- primary: <error>\n- backup: <error>") or, after "Tried:",
    one per item of a list whose items hold their error in brackets (429chain's "Tried:
    a (400: <error>), b (401: <error>)"). Empty for any other text."""
    preface = _FAILOVER_RE.search(text, 0, _FAILOVER_PREFACE_ROOM)
    if preface is None:
        return []
    rest = text[preface.end() :]
    if _BULLET_RE.search(rest) is not None:
        attempts = _BULLET_RE.split(rest)[1:]
    else:
        tried = _TRIED_RE.search(rest)
        attempts = _top_level_items(rest[tried.end() :]) if tried is not None else []
    return attempts[:_MAX_ITEMS] if len(attempts) > 1 else []


def _top_level_items(text: str) -> list[str]:
    """``text`` split at each comma or semicolon outside brackets of any kind."""
    items: list[str] = []
    depth = start = 0
    for at, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char in ",;" and depth == 0:
            items.append(text[start:at].strip())
            start = at + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


_FAILOVER_RE: Final = re.compile(
    r"\b(?:all|every)\b[^.:;\n{]{0,60}?\b(?:failed|exhausted)\b", re.IGNORECASE
)
_FAILOVER_PREFACE_ROOM: Final = 200  # (characters from a message's start)
_BULLET_RE: Final = re.compile(r"\n[ \t]*[-*\u2022][ \t]+")
_TRIED_RE: Final = re.compile(r"\btried: ", re.IGNORECASE)


def _decide_whole(http_status: int, facts: _Facts, patterns: Patterns = ()) -> Overflow | None:
    if facts.named is not None:
        http_status = facts.named
    never = http_status in _NEVER_STATUSES or any(s in _NEVER_STATUSES for s in facts.statuses)
    if never and (facts.statuses or not _refused_overflow(http_status, facts)):
        return None
    if facts.codes & _NEVER_CODES:
        return None
    if any(map(_never_stated, facts.texts)):
        return None
    if any(map(_no_prompt_fits, facts.texts)):
        return None  # no prompt fits a limit below zero, or a server's setting over the window
    found: Overflow | None = None
    for text in facts.texts:
        result = _read_message(text)
        if result is _NOT_FIXABLE:
            return None
        if result is not None and (found is None or (found.real is None and found.maximum is None)):
            found = result
    if found is None:
        for text in facts.texts:
            found = _itemised(text)
            if found is _NOT_FIXABLE:
                return None
            if found is not None:
                break
    if found is None and patterns:
        for text in facts.texts:
            found = _custom(text, patterns)
            if found is not None:
                break
    if found is None:
        found = _unlisted(_effective_status(http_status, facts), facts)
    if found is None or found.maximum == 0:  # a limit of 0: no prompt fits
        return None
    if found.maximum is None and any(_ZERO_LIMIT_RE.search(text) for text in facts.texts):
        return None  # ... also where no reader took the limit's count
    if found.real is None and found.maximum is None:
        if facts.counts:
            return _from_count_fields(facts.counts)
        return _pair(facts.texts) or found
    if found.real is None:  # a wording that read the window alone
        paired = _pair(facts.texts)
        if paired is not None and paired.maximum == found.maximum:
            # "5012 tokens exceeds the 4096-token context window"
            return Overflow(paired.real, paired.maximum, whole=found.whole)
    return found


def _unlisted(status: int, facts: _Facts) -> Overflow | None:
    """The overflow that wordings no table lists state, by the readers that judge them
    (codes, counts, vocabulary, the window named), under the (effective) ``status``."""
    if _overflow_code(facts.codes | _exception_names(facts.texts), facts.texts):
        return Overflow(None, None)
    if any(map(_BYTE_CODE_RE.search, facts.codes)) and not any(
        map(_TOKEN_WORD_RE.search, facts.texts)
    ):
        return None  # a byte limit its message words as a length (a suspect, probed)
    if status in UNAVAILABLE_STATUSES:
        if _waits(facts):
            return None  # an overloaded or unready upstream, whatever it names
        status = 500  # a server that answers its refusals so ("Exceeded model context window size")
    if any(map(_output_fills, facts.texts)):
        return None  # the output reservation alone fills the window: no prompt fits
    kv_size = any(_KV_SIZE_RE.search(text) for text in facts.texts)
    if kv_size and status >= 500:
        return None  # llama.cpp's shared KV pool, which any request may have filled
    # counts, and the window named as exceeded, are read under any 4xx left too
    stated = status in _GENERIC_STATUSES or 400 <= status < 500
    if stated:
        for text in facts.texts:
            found = _claimed(text) or _over_setting(text)
            if found is not None:
                return found
    if status in _GENERIC_STATUSES and (
        any(map(_generic, facts.texts)) or any(map(_summed, facts.texts))
    ):
        return Overflow(None, None)
    if (
        (400 <= status < 500 and kv_size)
        or (stated and any(_CTX_SIZE_RE.search(text) for text in facts.texts))
        or (stated and any(_NO_ROOM_RE.search(text) for text in facts.texts))
        or (stated and any(map(_strong, facts.texts)))
    ):
        return Overflow(None, None)
    return None


# an error code that names the HTTP body's size ("payload_too_large", "request_too_large",
# "request_entity_too_large") beside a message that names no token, context or window:
# maclocal-api's 413 over 100 MB says "Your conversation is too long"
_BYTE_CODE_RE: Final = re.compile(
    r"(?:payload|body|request|entity)[ _-]?(?:is[ _-])?too[ _-]?large", re.IGNORECASE
)
_TOKEN_WORD_RE: Final = re.compile(r"\btokens?\b|context|window", re.IGNORECASE)


def _exception_names(texts: list[str]) -> set[str]:
    """The exception class names a message prints ("{'type': 'TokenOverflowError'}",
    "MaxSequenceLengthOverflowError: ..."), read as codes ("token_overflow_error"), and
    codes it prints in square brackets ("[input_too_large]"), unless a message names what
    a trim cannot fix ("... exceeded for today")."""
    if any(map(_untrimmable, texts)):
        return set()
    return {
        _CAMEL_RE.sub("_", match.group(0)).lower()
        for text in texts
        for match in _EXCEPTION_NAME_RE.finditer(text, 0, 4096)
    }


def _overflow_code(codes: set[str], texts: list[str]) -> bool:
    """A listed overflow code, or one no table lists that reads as one: a prompt-side
    subject and an excess, no output, rate, quota, byte or media word, and no message
    beside it that names an output (KoboldAI's ``token_overflow`` says "Your Max Tokens
    setting is too low") or a size in bytes."""
    if codes & _OVERFLOW_CODES:
        # ... unless its message is about an output setting alone (vllm-lite sends the code
        # with "max_tokens (1000000) exceeds the server's default generation ceiling")
        return not any(map(_output_alone, texts))
    if any(_OUTPUT_WORD_RE.search(text) is not None for text in texts):
        return False
    if any(_SIZE_UNIT_RE.search(text) is not None for text in texts):
        return False  # a limit in bytes (SMG's "asr_prompt_too_long": "... 4096 bytes")
    for code in codes:
        if len(code) > _MAX_CODE_LENGTH:
            continue
        word = code.replace("-", "_").replace(".", "_").replace(" ", "_")
        if (
            any(s in word for s in _CODE_SUBJECTS)
            and any(e in word for e in _CODE_EXCESSES)
            and not any(x in word for x in _CODE_EXCLUDES)
        ):
            return True
    return False


# a count of bytes (not a memory size beside a count of tokens: vmlx's "Prompt too long (~34,354
# tokens estimated). This would need ~13.4GB of KV cache memory")
# (a number's start only, taken whole: a run of 4,000 digits is no quadratic scan)
_SIZE_UNIT_RE: Final = re.compile(r"(?<![\d,])\d[\d,]*+ ?bytes?\b", re.IGNORECASE)


def _output_alone(text: str) -> bool:
    """A message that names an output setting and nothing of the prompt's side."""
    return _OUTPUT_SETTING_RE.search(text) is not None and _PROMPT_SIDE_RE.search(text) is None


def _refused_overflow(status: int, facts: _Facts) -> bool:
    """An overflow sent with a status that otherwise rules one out: a 403 as
    ``_forbidden_overflow`` tells, or a 404 or 429 whose listed wording states the prompt
    alone at or over the window (``_prompt_alone_over``), with no rate, quota, billing,
    auth, waiting or load word in any of its messages and no code of a rate limit or a
    quota (CodeGate answers llama-cpp-python's "Requested tokens (P) exceed context window
    of L" with 429; Kilo's gateway writes "The maximum context length is L tokens. However,
    about P tokens were requested." over the upstream's status, OpenRouter's 404 "No
    allowed providers" among them)."""
    if status == 403:
        return _forbidden_overflow(facts)
    if status not in (404, 429) or any(_RATE_CODE_RE.search(code) for code in facts.codes):
        return False
    if any(_never(text) or _WAIT_RE.search(text) is not None for text in facts.texts):
        return False
    return any(map(_prompt_alone_over, facts.texts))


def _prompt_alone_over(text: str) -> bool:
    """A listed wording that states the prompt's count (or the request's, unitemised) at
    or over the window's, no output reservation beside them (a limiter's "used +
    requested > limit" is no such sum), in a message that says nothing of waiting or load
    (its caller's check)."""
    for pattern in _PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        # (a total, unitemised: one with parts may hold the output reservation)
        counted = groups.get("real") or (None if groups.get("parts") else groups.get("total"))
        real, limit = _num(counted), _num(groups.get("max"))
        if real is not None and limit is not None and groups.get("comp") is None:
            return real >= limit
    return False


_RATE_CODE_RE: Final = re.compile(
    r"rate|quota|throttl|exhaust|too_many_requests|busy|tpm|rpm|overload|capacity|concurren"
)
_WAIT_RE: Final = re.compile(
    r"retry|try again|later|wait|busy|slow down|in[ -]flight|concurren|capacity|overload",
    re.IGNORECASE,
)

# 503 and 507: statuses of an overloaded or unready upstream, and how a few servers answer
# every failed generation (afmbridge's "Generation failed: Exceeded model context window
# size"; llmmllab's 507 "Context window exceeded"). ``_unlisted`` reads one as a 500 only
# when nothing in it (any field, key or value, its messages, codes and statuses) speaks of
# waiting, retrying, load, queues, memory, slots or readiness, in any language seen; the
# relay reads one that carries Retry-After as a 504 (never).
UNAVAILABLE_STATUSES: Final = frozenset({503, 507})
# (words, found in the lower-cased text by substring search: one pattern of them all, tried
# at every character of a 64 KiB body, cost 60 ms)
_BUSY_WORDS: Final = (
    *("retry", "try again", "later", "wait", "busy", "slow down", "concurren", "capacity"),
    *("overload", "unavailable", "queue", "memory", "vram", "right now", "currently"),
    *("temporar", "demand", "health", "shutting", "throttl", "transient", "exhaust"),
    *("稍后", "稍後", "繁忙", "忙碌", "服务器忙", "服務器忙", "过载", "過載", "不可用", "负载"),
    *("負載", "排队", "排隊", "重试", "重試", "资源不足", "資源不足", "算力不足", "请求过多"),
    *("請求過多", "混雑", "しばらく", "ausgelastet", "später", "surcharg", "plus tard"),
    "réessay",
)
# ... and the ones with word boundaries or separators, searched only where a hint of them is
_BUSY_HINTS: Final = (
    *("flight", "load", "out", "kv", "slot", "gpu"),
    *("ready", "down", "dead", "many", "limit"),
)
_BUSY_RE: Final = re.compile(
    r"in[ -]flight|\bload(?:ing|ed)?\b|timed?[ _-]?out|\bkv|\bslots?\b|\bgpu|not[ _-]?ready"
    r"|shut[ _-]?down|\bdead\b|too[ _-]?many[ _-]?requests|rate[ _-]?limit"
)


def _busy(text: str) -> bool:
    low = text.lower()
    if any(word in low for word in _BUSY_WORDS):
        return True
    hinted = any(hint in low for hint in _BUSY_HINTS)
    return hinted and _BUSY_RE.search(low) is not None


# ("retryable": false says the opposite: SI-LLM-Gateway's 503 over an upstream's overflow)
_NOT_RETRYABLE_RE: Final = re.compile(r'"(?:is_?)?retryable"\s*:\s*false', re.IGNORECASE)


def _waits(facts: _Facts) -> bool:
    """Whether anything in an answer of status 503 or 507 speaks of waiting, load or
    readiness (``_busy``), or a status inside it is another 5xx past 502."""
    if any(s > 502 and s not in UNAVAILABLE_STATUSES for s in facts.statuses):
        return True
    raw = _NOT_RETRYABLE_RE.sub("", facts.raw.decode("utf-8", "replace"))
    return any(map(_busy, (raw, *facts.texts, *facts.codes)))


def _forbidden_overflow(facts: _Facts) -> bool:
    """A 403 that is an overflow all the same (Zed's cloud sends its overflow so; a 403
    otherwise means a refused credential): an overflow code, a sentence that names the
    context window as exceeded, or a listed wording that states both counts, an excess."""
    if any(map(_never, facts.texts)):
        return False
    if _overflow_code(facts.codes, facts.texts) or any(map(_strong, facts.texts)):
        return True
    return _counted(facts.texts)


def _counted(texts: list[str]) -> bool:
    """A listed wording that states both counts, an excess."""
    for text in texts:
        if _never(text):
            return False
        found = _read_message(text)
        if (
            found is not None
            and found is not _NOT_FIXABLE
            and found.real is not None
            and found.maximum is not None
            and found.real > found.maximum
        ):
            return True
    return False


def _pair(texts: list[str]) -> Overflow | None:
    """The counts of a recognised wording that states them only as one "N > M" (or
    "N >= M", parenthesised or bare), or, with no such pair, as exactly two counts
    (``_two_counts``)."""
    if any(_SUM_RE.search(text[:4096]) for text in texts):
        return None  # "1024 + 9000 > 8192", "32 * 256": a sum or product, not a prompt
    pairs = {
        (_num(m.group("real")), _num(m.group("max")))
        for text in texts
        for m in _PAIR_RE.finditer(text)
        if _CODE_COUNT_RE.search(text[max(0, m.start() - 12) : m.start()]) is None
    }  # the same pair stated twice (message and details) counts once; "status 500 > 400" never
    if not pairs:
        return _two_counts(texts)
    if len(pairs) != 1:
        return None
    ((real, limit),) = pairs
    if real is None or limit is None or not _MIN_COUNT <= limit < real:
        return None
    return Overflow(real, limit)


_MIN_COUNT: Final = 100  # smaller numbers are indices, codes and percentages
_MAX_SHARE: Final = 64  # a prompt at most 64 times its window (4097 against 192871 is 47)


def _two_counts(texts: list[str]) -> Overflow | None:
    """The counts of a recognised wording that states exactly two (of at least 100): the
    larger is the prompt, the smaller the window it exceeds ("The engine prompt length
    140000 exceeds the max_model_len 131072", "maximum context length is 8192 tokens, your
    prompt has 9000"); or only one, the window, when the words before it name a limit
    ("exceed model limit (10000000 tokens)"). Three or more counts, or a message that names
    an output (a total may hold its reservation), are never guessed at; a message repeated
    (as ``message`` and ``details``) counts once, an error's own code or status not at
    all, nor the prompt's length in characters that vLLM echoes as a parameter's value
    ("(parameter=input_text, value=C)")."""
    counts: set[int] = set()
    for text in texts:
        scanned = text[:4096]
        if _OUTPUT_WORD_RE.search(scanned) is not None or _SUM_RE.search(scanned) is not None:
            return None  # a total that may hold an output reservation, or a sum
        for match in _COUNT_RE.finditer(scanned):
            value = int(match.group(1).replace(",", ""))
            before = scanned[max(0, match.start() - 12) : match.start()]
            after = scanned[match.end() : match.end() + 32]
            if (
                value >= _MIN_COUNT
                and _CODE_COUNT_RE.search(before) is None
                and _STATUS_COUNT_RE.match(after) is None
                and _SIZE_COUNT_RE.match(after) is None
                and not scanned.endswith(_INPUT_TEXT_ECHO, 0, match.start())
            ):
                counts.add(value)
                if len(counts) > 2:
                    return None
    if len(counts) == 1:  # only the window, when the words beside it say so
        (only,) = counts
        for text in texts:
            for regex in (_LIMIT_ONLY_RE, _LIMIT_PAREN_RE, _GEN_LIMIT_STATED_RE):
                for match in regex.finditer(text[:4096]):
                    if int(match.group(1).replace(",", "")) == only:
                        return Overflow(None, only)
        return None
    if len(counts) != 2:
        return None
    real, limit = max(counts), min(counts)
    return Overflow(real, limit) if real > limit and real <= limit * _MAX_SHARE else None


_INPUT_TEXT_ECHO: Final = "parameter=input_text, value="


def _has_hint(lowered: bytes) -> bool:
    return any(hint in lowered for hint in _HINTS)


# --------------------------------------------------------------------------- suspects


def _untrimmable(text: str) -> bool:
    """A message that names what a trim cannot fix: an output, a byte or media size, a
    schema, field, batch or time limit, a period's quota."""
    return (
        _GEN_EXCLUDE_RE.search(text) is not None
        or _GEN_ZH_EXCLUDE_RE.search(text) is not None
        or _OUTPUT_WORD_RE.search(text) is not None
    )


def _suspect_text(text: str) -> bool:
    """A message naming a size subject (the prompt, input, context, text, messages...)
    and an excess, and nothing a trim cannot fix (``_untrimmable``)."""
    if _untrimmable(text):
        return False
    if _GEN_EXCESS_RE.search(text) is None and _GEN_ZH_EXCESS_RE.search(text) is None:
        return False
    return _SUSPECT_SUBJECT_RE.search(text) is not None


def _plainly_trimmable(texts: list[str]) -> bool:
    """Messages of a plain client error that a trim may fix: naming nothing a trim cannot
    fix, or the window beside an output setting and no other limit (a probe that passes
    says it was the prompt; one that fails, the setting). A Chinese wording keeps all its
    exclusions, output (输出, 生成) among them."""
    if not any(map(_untrimmable, texts)):
        return True
    return any(_WINDOW_NAME_RE.search(text) for text in texts) and not any(
        _GEN_SHAPE_EXCLUDE_RE.search(text) or _GEN_ZH_EXCLUDE_RE.search(text) for text in texts
    )


def _suspect(status: int, facts: _Facts, *, plain: bool = False) -> Suspect | None:
    """The suspect an unrecognised error's facts make, or None (rate, quota, billing,
    auth and safety wordings never are). ``plain``: a 400, 413 or 422 with a message that
    names nothing a trim cannot fix is one too, not ``worded``."""
    if any(s in _NEVER_STATUSES for s in facts.statuses) or facts.codes & _NEVER_CODES:
        return None
    if any(map(_never, facts.texts)):
        return None
    if status >= 500 and any(_KV_SIZE_RE.search(text) for text in facts.texts):
        return None  # llama.cpp's shared KV pool: a trim that passes teaches nothing true
    worded = any(map(_suspect_text, facts.texts)) or (
        status == 413 and any(_SUSPECT_413_RE.search(text) for text in facts.texts)
    )
    plain = plain and status in _PLAIN_STATUSES and bool(facts.texts)
    if not worded and not (plain and _plainly_trimmable(facts.texts)):
        return None
    text = _SUSPECT_ID_RE.sub("#", " | ".join(facts.texts)[:_SUSPECT_KEY_CHARS])
    numbers = tuple(int(n.replace(",", "")) for n in _SUSPECT_NUMBER_RE.findall(text))
    return Suspect(f"{status} {_SUSPECT_NUMBER_RE.sub('N', text)}", numbers, worded=worded)


_SHRINK_SLACK: Final = 0.2  # a count moved with the trim: its ratio within this of the trim's


def _confirmed(first: Suspect, again: Suspect, shrink: float) -> Overflow | None:
    """The overflow a probe's answer ``again`` confirms: the wording of ``first`` with one
    count (of at least 100) moved down about as much as the trim shrank the prompt
    (``shrink``: the probe's estimate over the first's); None when nothing did. That
    count is the prompt; the window is the one other count of at least 100, unchanged and
    smaller, when there is exactly one."""
    if first.wording != again.wording or len(first.numbers) != len(again.numbers):
        return None
    moved = [
        i
        for i, (was, now) in enumerate(zip(first.numbers, again.numbers, strict=True))
        if was >= _MIN_COUNT and now < was and abs(now / was - shrink) <= _SHRINK_SLACK
    ]
    if not moved:
        return None
    if len(moved) > 1:
        return Overflow(None, None)
    was, real = first.numbers[moved[0]], again.numbers[moved[0]]
    windows = {
        n
        for n, m in zip(first.numbers, again.numbers, strict=True)
        if n == m and _MIN_COUNT <= n < was
    }
    if len(windows) == 1 and (limit := windows.pop()) < real:
        return Overflow(real, limit)
    return Overflow(real, None)
