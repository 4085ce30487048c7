"""Recognise a provider's "context window exceeded" answer, precisely.

Reactive trimming (docs/trimming.md, "Reactive retries") drops turns and retries when the provider
says the prompt does not fit. A false positive destroys conversation context for
nothing, so recognition is deliberately narrow:

* Rate limits are never overflows, tokens-per-minute ones included (OpenAI 429
  "Request too large ... tokens per min (TPM)", Groq's 413 TPM answer, Anthropic's
  "would exceed the rate limit ... input tokens per minute ... reduce the prompt
  length"), nor are quota, key, permission, not-found and overload answers.
* Byte-size limits (Anthropic's 413 ``request_too_large``, HTML 413 pages, Bedrock's
  body length) and output limits (``max_tokens is too large``) are not overflows.
* When the message itemises an output reservation that alone fills the window
  ("... 10000 in the completion" with a 4097 window), no prompt can fit: not an
  overflow, the error goes back untouched.

The body is read wherever a provider or gateway puts the error: nested ``error``
objects, ``error.message`` or OpenRouter's ``metadata.raw`` holding JSON, Gemini's
list bodies with ``status``/``details``/``errors``, FastAPI ``detail``, Bedrock's bare
``message``, TGI's string ``error``, an error JSON sent with status 200, and the
first events of a 200 SSE stream.

``Overflow.real`` / ``Overflow.maximum`` are what the retry aims at
(``estimate * maximum / real``): ``real`` is the prompt the provider counted (the
messages/input part when itemised, else the total), ``maximum`` the window it states
minus the output reservation when it itemises one, so ``real - maximum`` is exactly
the stated deficit. Both are None when the body does not state them.

Pure: stdlib + orjson. Every regex is compiled at import and runs only after cheap
substring checks; only the first 64 KiB of a stream head (and only its first few
events) are read, and a body over 64 KiB is never an overflow.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

from trimgate.sse import event_fields

__all__ = [
    "MAX_BYTES",
    "MAX_PATTERNS",
    "MAX_PATTERN_LENGTH",
    "Overflow",
    "Patterns",
    "compile_patterns",
    "detect_overflow",
    "detect_stream_event_overflow",
    "detect_stream_overflow",
    "detect_unfixable",
    "stream_event_has_output",
    "stream_head_decided",
]

MAX_BYTES: Final = 64 * 1024
MAX_PATTERNS: Final = 32  # upstreams.<name>.overflow_patterns: at most this many
MAX_PATTERN_LENGTH: Final = 512  # characters each

Patterns = tuple[re.Pattern[str], ...]  # compiled operator patterns (compile_patterns)


@dataclass(frozen=True, slots=True)
class Overflow:
    real: int | None  # prompt tokens the provider says the request had (None if not stated)
    maximum: int | None  # the limit it states (None if not stated)


# --------------------------------------------------------------------------- cheap gates

# An overflow body contains at least one of these (lower-cased) fragments.
_HINTS: Final = (
    b"context",
    b"token",
    b"too long",
    b"too large",
    b"exceed",
    b"maximum",
    b"length",
    b"does not fit",
    b"max_tokens",
)

# Statuses that are never an overflow, as HTTP status or as a code inside the body.
_NEVER_STATUSES: Final = frozenset({401, 402, 403, 404, 407, 429, 529})

# ``type`` / ``code`` / ``status`` / ``reason`` values (lower-cased) that rule an overflow out.
_NEVER_CODES: Final = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "ratelimiterror",
        "insufficient_quota",
        "quota_exceeded",
        "resource_exhausted",
        "tokens",  # OpenAI / Groq: the ``type`` of a tokens-per-minute limit
        "requests",  # OpenAI: the ``type`` of a requests-per-minute limit
        "throttlingexception",
        "throttling_exception",
        "too_many_requests",
        "overloaded_error",
        "authentication_error",
        "permission_error",
        "permission_denied",
        "unauthenticated",
        "invalid_api_key",
        "api_key_invalid",
        "billing_error",
        "content_filter",
    }
)

# ``type`` / ``code`` values that say "context window exceeded" on their own.
_OVERFLOW_CODES: Final = frozenset(
    {
        "context_length_exceeded",
        "exceed_context_size_error",
        "context_window_exceeded",
        "model_context_window_exceeded",
        "context_exceeded",
    }
)

_RATE_RE: Final = re.compile(
    r"rate[ _-]?limit|tokens? per (?:min|minute|hour|day)\b|requests? per (?:min|minute|day)\b"
    r"|\b(?:tpm|rpm|tpd|rpd|itpm|otpm)\b|quota|too many requests|throttl"
    r"|resource[ _]exhausted|insufficient[ _](?:quota|balance|credits?)",
    re.IGNORECASE,
)

# --------------------------------------------------------------------------- messages

_N: Final = r"\d+(?:,\d{3})*"  # 4097, 200000, 5,958,968 (never swallows a trailing comma)


def _p(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("{N}", _N), re.IGNORECASE)


# Itemised parts of a "you requested T tokens (...)" message.
_PART_RE: Final = _p(
    r"(?P<n>{N}) (?:in|of|for) (?:the |your )?"
    r"(?P<what>messages|prompt|functions|tools?|text input|tool input|completion|output)\b"
)
_PROMPT_PARTS: Final = frozenset({"messages", "prompt", "functions", "tool", "tools"})
_PROMPT_PARTS_2: Final = frozenset({"text input", "tool input"})

# A pattern's named groups: real (prompt tokens), max (window), comp (output reservation),
# total (everything requested), parts (an itemised breadcrumb). Order: specific first.
_PATTERNS: Final[tuple[re.Pattern[str], ...]] = (
    # vLLM >= 0.8: "... maximum context length is L tokens. However, you requested C output
    # tokens and your prompt contains at least P input tokens ..."
    _p(
        r"maximum context length is (?P<max>{N}) tokens?\.? however,? you requested (?P<comp>{N})"
        r" output tokens(?: and your prompt contains (?:at least )?(?P<real>{N}) input tokens)?"
    ),
    # vLLM: "'max_tokens' ... is too large: C. This model's maximum context length is L tokens
    # and your request has P input tokens (C > L - P)"
    _p(
        r"maximum context length is (?P<max>{N}) tokens? and your request has (?P<real>{N})"
        r" input tokens \((?P<comp>{N}) >"
    ),
    # OpenAI / Azure / vLLM / FastChat / DeepSeek
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? your messages resulted"
        r" in (?:over )?(?P<real>{N}) tokens"
    ),
    # OpenAI / Azure / vLLM / DeepSeek / OpenRouter (itemised or not)
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? you requested"
        r" (?:about )?(?P<total>{N}) tokens(?: \((?P<parts>[^)]*)\))?"
    ),
    # OpenAI (newer)
    _p(
        r"input tokens exceed the configured limit of (?P<max>{N}) tokens\.? your messages"
        r" resulted in (?P<real>{N}) tokens"
    ),
    # SGLang
    _p(
        r"maximum context length of (?P<max>{N}) tokens\.? you requested a total of"
        r" (?P<total>{N}) tokens: (?P<real>{N}) tokens from the input messages and"
        r" (?P<comp>{N}) tokens for the completion"
    ),
    # LiteLLM / OpenAI-compatible proxies
    _p(r"requested token count exceeds the model'?s maximum context length of (?P<max>{N}) tokens"),
    _p(r"maximum context length (?:has been|was) exceeded"),
    # Anthropic (also through Bedrock, Vertex, OpenRouter, LiteLLM)
    _p(r"prompt is too long: (?P<real>{N}) tokens > (?P<max>{N}) maximum"),
    # Ollama (newer)
    _p(r"prompt is too long: (?P<real>{N}), model maximum context length: (?P<max>{N})"),
    _p(
        r"input length and `?max_tokens`? exceed context limit: (?P<real>{N}) \+ (?P<comp>{N})"
        r" > (?P<max>{N})"
    ),
    _p(r"\bprompt is too long\b"),
    # Gemini / Vertex
    _p(
        r"input token count(?: \((?P<real>{N})\))? exceeds the maximum number of tokens"
        r" allowed(?: \(?(?P<max>{N})\)?)?"
    ),
    # xAI
    _p(r"maximum prompt length is (?P<max>{N}) but the request contains (?P<real>{N}) tokens"),
    # llama.cpp server
    _p(
        r"request \((?P<real>{N}) tokens\) exceeds the available context size"
        r" \((?P<max>{N}) tokens\)"
    ),
    _p(r"exceeds the available context size"),
    # TGI / Hugging Face / Together
    _p(
        r"inputs`? tokens \+ `?max_new_tokens`? must be <= (?P<max>{N})\.? given: (?P<real>{N})"
        r" `?inputs`? tokens and (?P<comp>{N}) `?max_new_tokens"
    ),
    _p(r"inputs`? must have less than (?P<max>{N}) tokens\.? given: (?P<real>{N})"),
    # LM Studio
    _p(
        r"trying to keep the first (?P<real>{N}) tokens when context the overflows\.? however,"
        r" the model is loaded with context length of only (?P<max>{N}) tokens"
    ),
    _p(
        r"tokens to keep from the initial prompt is greater than the context length"
        r"(?: \(n_keep: (?P<real>{N}) ?>= ?n_ctx: (?P<max>{N})\))?"
    ),
    _p(
        r"input does not fit in context length\.? the input has (?P<real>{N}) tokens, but the"
        r" context length only supports (?P<max>{N}) tokens"
    ),
    # Mistral
    _p(
        r"prompt contains (?P<real>{N}) tokens\b[^.]{0,80}?too large for model with (?P<max>{N})"
        r" maximum context length"
    ),
    # Ollama
    _p(r"prompt too long; exceeded (?:max )?context length"),
    _p(r"input length exceeds the context length"),
    # SGLang / Together
    _p(
        r"input \((?P<real>{N}) tokens\) is longer than the model'?s context length"
        r" \((?P<max>{N}) tokens\)"
    ),
    # SGLang / OpenRouter (Poolside) / OpenAI-compatible
    _p(
        r"input length \(?(?P<real>{N})(?: tokens)?\)? exceeds (?:the )?(?:model'?s )?maximum"
        r" (?:allowed (?:input )?length|context length)(?: of)? \(?(?P<max>{N})(?: tokens)?\)?"
    ),
    # GitHub Copilot
    _p(r"prompt token count of (?P<real>{N}) exceeds the limit of (?P<max>{N})"),
    # Cerebras
    _p(
        r"reduce the length of the messages or completion\.? current length is (?P<real>{N})"
        r" while limit is (?P<max>{N})"
    ),
    # Groq (and the tail of OpenAI's messages)
    _p(r"please reduce the length of the messages"),
    # OpenAI Responses / Azure
    _p(r"input exceeds the context window"),
    # Bedrock
    _p(r"input is too long for requested model"),
    # vLLM (older)
    _p(
        r"prompt \(total length (?P<real>{N})\) is too long to fit into the model"
        r" \(context length (?P<max>{N})\)"
    ),
    _p(r"prompt \(length (?P<real>{N})\) is longer than the maximum model length of (?P<max>{N})"),
    # Kimi / Moonshot
    _p(r"exceeded model token limit: (?P<max>{N}) \(requested: (?P<real>{N})\)"),
    # ds4
    _p(
        r"prompt has (?P<real>{N}) tokens?, but the configured context size is (?P<max>{N}) tokens?"
    ),
    _p(r"prompt tokens \((?P<real>{N})\) exceeds context size \((?P<max>{N})\)"),
    # oMLX
    _p(r"prompt too long: (?P<real>{N}) tokens exceeds max context window of (?P<max>{N}) tokens"),
    # kronk
    _p(r"the context window is full"),
    # SambaNova
    _p(
        r"maximum context length of [^.]{0,80}? is (?P<max>{N})\.? however,? answering your"
        r" request will take (?P<total>{N}) tokens"
    ),
    # SiliconFlow
    _p(r"length of prompt_tokens \((?P<real>{N})\) must be less than max_seq_len \((?P<max>{N})\)"),
    # Volcengine Ark / OpenAI-compatible
    _p(r"input length (?P<real>{N}) exceeds the maximum length (?P<max>{N})"),
    # Alibaba DashScope / Qwen (the range's upper bound is the input limit)
    _p(r"range of input length should be \[1, ?(?P<max>{N})\]"),
    # Ollama (llama-server runner)
    _p(r"the prompt is longer than the context length"),
    # Zhipu GLM (code 1261) / MLX servers
    _p(r"\bprompt exceeds (?:the )?(?:model'?s )?max(?:imum)? (?:context )?length\b"),
    # MiniMax: the number in parentheses is an error code, not a count
    _p(r"context window exceeds limit"),
    # Baidu Qianfan / ERNIE
    _p(r"\bprompt tokens too long\b"),
    # GitHub Models / Azure AI model inference (code tokens_limit_reached, HTTP 413): the
    # tier's per-request input limit, which a shorter prompt meets
    _p(r"request body too large for .{0,120}? model\. max size: (?P<max>{N}) tokens"),
    # Cohere (the total counts the prompt and the prediction)
    _p(
        r"too many tokens: total number of tokens(?: \(prompt and prediction\))? cannot exceed"
        r" (?P<max>{N}) - received (?P<total>{N})"
    ),
    # Volcengine Ark (Doubao and hosted models): images and text together
    _p(r"total tokens of image and text exceed max message tokens"),
    # vLLM: "... maximum context length is L tokens. However, your request has P input tokens."
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? your request has"
        r" (?P<real>{N}) input tokens"
    ),
    # vLLM (older): max_tokens defaulted to max_model_len - prompt_tokens went negative
    _p(r"max_tokens must be at least 1, got -\d+"),
)

# The generic rule (``_generic``): vocabulary for wordings no pattern lists.
_GEN_CONTEXT_RE: Final = _p(
    r"\bcontext(?:[ _-]?(?:window|length|size|limit))?\b|\bmax_?seq_?len\b|\bsequence length\b"
)
_GEN_SUBJECT_RE: Final = _p(r"\b(?:prompt|input|tokens?)\b")
_GEN_LIMIT_RE: Final = _p(r"\b(?:max|maximum|limit|length|window|size|allowed)\b")
_GEN_EXCESS_RE: Final = _p(
    r"exceed|too (?:long|large|big|many tokens)|longer than|greater than|more than|larger than"
    r"|must be (?:less|smaller|at most|<)|over the (?:limit|maximum)|is full\b|overflow"
)
# Output limits, byte or media sizes, request shapes: never a prompt that fits after a trim.
_GEN_EXCLUDE_RE: Final = _p(
    r"max_(?:new_|completion_|output_)?tokens|max_length|output tokens?|completion tokens?"
    r"|maximum tokens you requested|generat"
    r"|\bbytes?\b|\b[kmg]i?b\b|megabytes|image|audio|video|file|attachment|document|pdf"
    r"|payload|request body|body size|string too long|expected a string|array too long"
    r"|\bitems?\b|\btools?\b|function|schema|stop sequences?|\bn\b must|embedding|\bbatch\b"
)
# Words of errors that are never overflows, whatever else they say: billing, auth and
# content safety (rate limits and quotas are ``_RATE_RE``). Plain substrings of the
# lower-cased message: a case-insensitive alternation this long costs ~70 us a message.
_NEVER_WORDS: Final = (
    "billing",
    "credit balance",
    "insufficient balance",
    "insufficient funds",
    "insufficient credit",
    "payment",
    "arrears",
    "afford",
    "more credits",
    "monthly limit",
    "settings/keys",
    "settings/credits",
    "upgrade to",
    "api key",
    "api_key",
    "api-key",
    "apikey",
    "unauthorized",
    "unauthorised",
    "authenticat",
    "forbidden",
    "access denied",
    "permission",
    "content filter",
    "content management",
    "content policy",
    "safety",
    "moderation",
    "flagged",
    "inappropriate",
    "sensitive",
    "responsible ai",
    "jailbreak",
    "data_inspection",
    "violat",
    "please wait",
    "wait before",
)
# ``_RATE_RE`` runs only on a message holding one of these (it is a long alternation too).
_RATE_HINTS: Final = (
    "rate",
    " per ",
    "tpm",
    "rpm",
    "tpd",
    "rpd",
    "quota",
    "too many requests",
    "throttl",
    "exhausted",
    "insufficient",
)


def _never(text: str) -> bool:
    """A rate-limit, quota, billing, auth or safety wording."""
    low = text.lower()
    if any(word in low for word in _NEVER_WORDS):
        return True
    return any(hint in low for hint in _RATE_HINTS) and _RATE_RE.search(text) is not None


# Statuses (effective: HTTP or the code in the body) under which the generic rule may fire.
_GENERIC_STATUSES: Final = frozenset({200, 400, 413, 422})

# llama.cpp and LM Studio also say this when the shared KV pool runs out or generation
# fills the window (a 500 server_error, also mid-stream); only a 4xx means the prompt.
_CTX_SIZE_RE: Final = _p(r"context size has been exceeded")

# --------------------------------------------------------------------------- JSON walking

_TEXT_KEYS: Final = ("message", "msg", "detail", "error", "error_message", "errorMessage", "raw")
_CODE_KEYS: Final = ("type", "code", "status", "reason", "error_type", "errorType", "__type")
_STATUS_KEYS: Final = ("http_status_code", "status_code", "statusCode")
_NEST_KEYS: Final = ("error", "metadata", "details", "errors", "innererror", "detail")
_MAX_DEPTH: Final = 6
_MAX_ITEMS: Final = 16

_decoder: Final = json.JSONDecoder()


class _Facts:
    __slots__ = ("codes", "counts", "statuses", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.codes: set[str] = set()
        self.statuses: list[int] = []
        self.counts: dict[str, int] = {}


def _walk_error(node: Any, facts: _Facts, depth: int) -> None:
    """Collect messages, codes and counts from an error object and the errors inside it."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, str):
        _add_text(node, facts, depth)
        return
    if isinstance(node, list):
        for item in node[:_MAX_ITEMS]:
            _walk_error(item, facts, depth + 1)
        return
    if not isinstance(node, dict):
        return
    for key in _TEXT_KEYS:
        value = node.get(key)
        if isinstance(value, str):
            _add_text(value, facts, depth)
    for key in _CODE_KEYS:
        value = node.get(key)
        if isinstance(value, str):
            if value:
                facts.codes.add(value.lower())
        elif isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            facts.statuses.append(value)
    for key in _STATUS_KEYS:
        value = node.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            facts.statuses.append(value)
    for key in ("n_prompt_tokens", "n_ctx"):
        value = node.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            facts.counts[key] = value
    for key in _NEST_KEYS:
        value = node.get(key)
        if isinstance(value, (dict, list)):
            _walk_error(value, facts, depth + 1)
    response = node.get("response")  # Responses API: response.failed carries response.error
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        _walk_error(response["error"], facts, depth + 1)


def _add_text(text: str, facts: _Facts, depth: int) -> None:
    facts.texts.append(text)
    # A message that itself holds JSON (gateways relaying the provider's body).
    start = text.find("{")
    if start < 0 or depth >= _MAX_DEPTH:
        return
    first_list = text.find("[")
    if 0 <= first_list < start and text[first_list + 1 : start].strip() == "":
        start = first_list
    try:
        inner, _ = _decoder.raw_decode(text, start)
    except ValueError:
        return
    if isinstance(inner, (dict, list)):
        _walk_document(inner, facts, depth + 1, error_status=True)


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
    kind = doc.get("type")
    if error not in (None, False, "", {}, []):
        _walk_error(doc, facts, depth)
        return True
    if kind == "error" or doc.get("object") == "error":
        _walk_error(doc, facts, depth)
        return True
    if kind == "response.failed":
        _walk_error(doc, facts, depth)
        return True
    choices = doc.get("choices")
    if isinstance(choices, list) and _walk_choices(choices, facts, depth):
        return True
    if isinstance(doc.get("error_message"), str) and doc["error_message"]:
        # DeepInfra's {"error_type": ..., "error_message": ...}, also as a stream chunk
        _walk_error(doc, facts, depth)
        return True
    if error_status:
        _walk_error(doc, facts, depth)
        return True
    return False


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


# --------------------------------------------------------------------------- decision


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
        parts = groups.get("parts")
        if parts:
            prompt_sum = comp_sum = 0
            seen_prompt = seen_comp = False
            for part in _PART_RE.finditer(parts):
                what = part.group("what").lower()
                n = int(part.group("n").replace(",", ""))
                if what in _PROMPT_PARTS or what in _PROMPT_PARTS_2:
                    prompt_sum += n
                    seen_prompt = True
                else:
                    comp_sum += n
                    seen_comp = True
            if seen_prompt:
                real = prompt_sum
            if seen_comp:
                comp = comp_sum
        if real is None and total is not None:
            real = total - comp if comp is not None else total
        if comp is not None and limit is not None:
            available = limit - comp
            if available <= 0:
                return _NOT_FIXABLE
            limit = available
        if real is not None or limit is not None:
            return Overflow(real, limit)
        if countless is None:  # keep looking for a pattern that also reads the counts
            countless = Overflow(None, None)
    return countless


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
    output limit, a byte or media size, or content safety. Rate, quota, billing and
    auth wordings never get here."""
    if _GEN_EXCLUDE_RE.search(text) is not None or _GEN_EXCESS_RE.search(text) is None:
        return False
    if _GEN_CONTEXT_RE.search(text) is not None:
        return True
    return _GEN_SUBJECT_RE.search(text) is not None and _GEN_LIMIT_RE.search(text) is not None


def _decide(http_status: int, facts: _Facts, patterns: Patterns = ()) -> Overflow | None:
    if http_status in _NEVER_STATUSES or any(s in _NEVER_STATUSES for s in facts.statuses):
        return None
    if facts.codes & _NEVER_CODES:
        return None
    if any(map(_never, facts.texts)):
        return None
    found: Overflow | None = None
    for text in facts.texts:
        result = _read_message(text)
        if result is _NOT_FIXABLE:
            return None
        if result is not None and (found is None or (found.real is None and found.maximum is None)):
            found = result
    if found is None and patterns:
        for text in facts.texts:
            found = _custom(text, patterns)
            if found is not None:
                break
    if found is None and facts.codes & _OVERFLOW_CODES:
        found = Overflow(None, None)
    status = _effective_status(http_status, facts)
    if found is None and status in _GENERIC_STATUSES and any(map(_generic, facts.texts)):
        found = Overflow(None, None)
    if (
        found is None
        and 400 <= _effective_status(http_status, facts) < 500
        and any(_CTX_SIZE_RE.search(text) for text in facts.texts)
    ):
        found = Overflow(None, None)
    if found is None:
        return None
    if found.real is None and found.maximum is None and facts.counts:
        return Overflow(facts.counts.get("n_prompt_tokens"), facts.counts.get("n_ctx"))
    return found


def _has_hint(lowered: bytes) -> bool:
    return any(hint in lowered for hint in _HINTS)


# --------------------------------------------------------------------------- API


def compile_patterns(sources: list[str] | tuple[str, ...]) -> Patterns:
    """Compile ``upstreams.<name>.overflow_patterns`` once (case-insensitive).

    Raises ``ValueError`` naming the pattern when there are more than ``MAX_PATTERNS``,
    one is empty or longer than ``MAX_PATTERN_LENGTH``, or one does not compile.
    """
    if len(sources) > MAX_PATTERNS:
        raise ValueError(f"at most {MAX_PATTERNS} patterns")
    compiled: list[re.Pattern[str]] = []
    for index, source in enumerate(sources):
        if not source or len(source) > MAX_PATTERN_LENGTH:
            raise ValueError(f"pattern {index}: 1 to {MAX_PATTERN_LENGTH} characters")
        try:
            compiled.append(re.compile(source, re.IGNORECASE))
        except re.error as exc:
            raise ValueError(f"pattern {index}: {exc}") from None
    return tuple(compiled)


def detect_overflow(
    status: int, body: bytes, *, wire_format: str, patterns: Patterns = ()
) -> Overflow | None:
    """The overflow a whole (small) response body states, whatever its status.

    An error JSON sent with status 200 counts, and so does an error inside a 200
    answer's choice (``finish_reason: "error"`` with an ``error``); a success body
    never does. A body that is itself SSE text is read as a stream head.
    ``wire_format`` names the endpoint's format; recognition does not depend on it
    because OpenAI-compatible gateways relay every provider's envelope. ``patterns``
    (from ``compile_patterns``) are the upstream's own overflow wordings, matched on
    error messages only.
    """
    if not body or len(body) > MAX_BYTES:
        return None
    head = body[:64].lstrip()
    if head[:5] == b"data:" or head[:6] in (b"event:", b"error:") or head[:1] == b":":
        return detect_stream_overflow(body, wire_format=wire_format, patterns=patterns)
    if status < 400 and b"error" not in body:  # JSON keys and types are lower-case
        return None
    if not patterns and not _has_hint(body.lower()):
        return None
    facts = _body_facts(status, body, head)
    return None if facts is None else _decide(status, facts, patterns)


def _body_facts(status: int, body: bytes, head: bytes) -> _Facts | None:
    """The error facts of a whole body; None when it states no error."""
    facts = _Facts()
    if head[:1] in (b"{", b"["):
        try:
            doc = orjson.loads(body)
        except (orjson.JSONDecodeError, RecursionError):
            return None  # malformed or cut JSON: never guess from fragments
        if not _walk_document(doc, facts, 0, error_status=status >= 400):
            return None
    elif status >= 400 and head[:1] != b"<":  # plain-text error; HTML pages are never read
        facts.texts.append(body.decode("utf-8", "replace"))
    else:
        return None
    return facts


def detect_unfixable(status: int, body: bytes) -> bool:
    """Whether an error body (or an SSE stream head, or one SSE event) states a context
    overflow that no trim can fix: the output reservation it itemises alone fills the
    window ("... 10000 in the completion" with a 4097 window). ``detect_overflow``
    says None for such an answer; this tells it from any other non-overflow, so the
    answer can say why nothing was resent. Rate-limit, quota and auth answers never are.
    """
    if not body or len(body) > MAX_BYTES:
        return False
    head = body[:64].lstrip()
    if head[:5] == b"data:" or head[:6] in (b"event:", b"error:"):
        for name, payload in _events(body):
            data = payload.strip() if payload else b""
            if data[:1] in (b"{", b"[") and detect_unfixable(400 if name == "error" else 200, data):
                return True
        return False
    if status < 400 and b"error" not in body:
        return False
    if not _has_hint(body.lower()):
        return False
    facts = _body_facts(status, body, head)
    if facts is None:
        return False
    if status in _NEVER_STATUSES or any(s in _NEVER_STATUSES for s in facts.statuses):
        return False
    if facts.codes & _NEVER_CODES or any(map(_never, facts.texts)):
        return False
    return any(_read_message(text) is _NOT_FIXABLE for text in facts.texts)


# SSE events that precede the first output without carrying any (skipped, not decisive).
# A tuple, not a set: an event's "type" may be any JSON value, and a list is unhashable.
_LIFECYCLE_TYPES: Final = (
    "response.created",
    "response.in_progress",
    "response.queued",
    "ping",
    "message_start",
)
_MAX_EVENTS: Final = 16

# Chat-chunk delta keys that carry output when non-empty.
_DELTA_OUTPUT_KEYS: Final = (
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "function_call",
    "refusal",
    "audio",
)


def _events(head: bytes) -> list[tuple[str, bytes | None]]:
    """(event name, data) of the first events; data is None for a block without data.

    Only the first ``_MAX_EVENTS`` blocks are read (``sse.event_fields``), data-less
    blocks included: an ``event:`` line alone decides too. ``data`` lines are joined
    with LF.
    """
    events: list[tuple[str, bytes | None]] = []
    for fields in event_fields(head, _MAX_EVENTS):
        event = _named(fields)
        if event is not None:
            events.append(event)
    return events


def _parse_event(block: bytes) -> tuple[str, bytes | None] | None:
    blocks = event_fields(block, 1)
    return _named(blocks[0]) if blocks else None


def _named(fields: list[tuple[bytes, bytes]]) -> tuple[str, bytes | None] | None:
    """(event name, data) of one block's fields; None for a block with neither."""
    name = ""
    data: list[bytes] = []
    for field, value in fields:
        if field == b"event":
            name = value.decode("utf-8", "replace").strip()
        elif field == b"data":
            data.append(value)
        elif field == b"error":  # older llama.cpp servers (llama.cpp#16104): non-standard
            name = "error"
            data.append(value)
    if not name and not data:
        return None
    return name, b"\n".join(data) if data else None


def _choice_has_output(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return True
    if choice.get("finish_reason") not in (None, ""):
        return True
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return any(delta.get(key) not in (None, "", [], {}) for key in _DELTA_OUTPUT_KEYS)
    text = choice.get("text")  # legacy completions
    if isinstance(text, str):
        return text != ""
    return True


def _doc_has_output(doc: Any) -> bool:
    """Whether a parsed event (not an error) carries model output or otherwise settles
    the stream as a normal one. Only empty openers are not output: a chat chunk whose
    deltas hold nothing but a role (or empty text), an Anthropic ``message_start`` or
    empty ``content_block_start``, a Responses lifecycle or empty ``added`` event."""
    if not isinstance(doc, dict):
        return True
    kind = doc.get("type")
    if isinstance(kind, str):
        if kind in _LIFECYCLE_TYPES:
            return False
        if kind == "content_block_start":
            block = doc.get("content_block")
            return not (
                isinstance(block, dict)
                and block.get("type") in ("text", "thinking")
                and not block.get("text")
                and not block.get("thinking")
            )
        if kind in ("response.output_item.added", "response.content_part.added"):
            return False
        if kind.startswith(("response.", "message_")):
            return True
    choices = doc.get("choices")
    if isinstance(choices, list):
        if not choices:  # usage-only or empty opener chunk
            return doc.get("usage") not in (None, {})
        return any(_choice_has_output(choice) for choice in choices[:_MAX_ITEMS])
    return True


def _event_verdict(
    name: str, payload: bytes | None, patterns: Patterns
) -> tuple[bool, Overflow | None]:
    """(decides, overflow) for one event: an error event decides (overflow or not), an
    output event decides (no overflow), an empty opener or lifecycle event does not."""
    if payload is None:
        return name not in _LIFECYCLE_TYPES, None
    payload = payload.strip()
    if not payload:
        return False, None
    if payload == b"[DONE]":
        return True, None
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return True, None
    facts = _Facts()
    if _walk_document(doc, facts, 0, error_status=name == "error"):
        # An error event decides, whether or not it is an overflow.
        if not patterns and not _has_hint(payload.lower()):
            return True, None
        return True, _decide(200, facts, patterns)
    if name == "error":
        return True, None
    if name in _LIFECYCLE_TYPES:
        return False, None
    return _doc_has_output(doc), None


def stream_head_decided(head: bytes) -> bool:
    """Whether ``head`` holds a complete event that tells an overflow from a normal
    stream: an error event or one carrying output (not a comment, a lifecycle event or
    an empty opener such as a role-only chunk), or ``_MAX_EVENTS`` events."""
    if b"\r" in head:
        head = head.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    complete, sep, _ = head.rpartition(b"\n\n")
    if not sep:
        return False
    events = _events(complete + b"\n\n")
    for name, data in events:
        decides, _ = _event_verdict(name, data, ())
        if decides:
            return True
    return len(events) >= _MAX_EVENTS


def detect_stream_overflow(
    data: bytes, *, wire_format: str, patterns: Patterns = ()
) -> Overflow | None:
    """The overflow an error event at the start of a 200 SSE stream states.

    ``data`` is the raw beginning of the stream (only the first 64 KiB, and its first
    ``_MAX_EVENTS`` events, are read). Comments, keep-alives, lifecycle events and
    empty openers (a role-only chat chunk, ``message_start``) are skipped; the first
    other event decides: an error event (``event: error``, ``data: {"error": ...}``,
    ``type: error``, ``response.failed``, a choice with ``finish_reason: "error"``) is
    read like an error body, an event with output means no overflow. ``wire_format``
    is accepted for symmetry with ``detect_overflow``.
    """
    head = data[:MAX_BYTES]
    if not head:
        return None
    for name, payload in _events(head):
        decides, found = _event_verdict(name, payload, patterns)
        if decides:
            return found
    return None


def detect_stream_event_overflow(
    event: bytes, *, output_started: bool, wire_format: str, patterns: Patterns = ()
) -> Overflow | None:
    """The overflow one SSE event states, for a relay that reads events past the head.

    ``event`` is one event block (its ``event:`` / ``data:`` lines, with or without
    the blank line that ends it). Once output has started (``output_started``: an
    earlier event had ``stream_event_has_output``), nothing is an overflow any more:
    the client already has bytes, so the request cannot be resent.
    """
    if output_started or not event or len(event) > MAX_BYTES:
        return None
    if b"\r" in event:
        event = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    parsed = _parse_event(event.strip(b"\n"))
    if parsed is None:
        return None
    return _event_verdict(parsed[0], parsed[1], patterns)[1]


def stream_event_has_output(event: bytes) -> bool:
    """Whether one SSE event block carries output (or otherwise settles the stream as a
    normal one): after it, ``detect_stream_event_overflow`` is no longer asked.
    Comments, lifecycle events, empty openers and error events are not output."""
    if not event:
        return False
    if b"\r" in event:
        event = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    parsed = _parse_event(event.strip(b"\n"))
    if parsed is None:
        return False
    name, payload = parsed
    if payload is None:
        return name not in _LIFECYCLE_TYPES
    payload = payload.strip()
    if not payload:
        return False
    if payload == b"[DONE]":
        return True
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return True
    if name == "error" or _walk_document(doc, _Facts(), 0, error_status=False):
        return False
    if name in _LIFECYCLE_TYPES:
        return False
    return _doc_has_output(doc)
