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
  ("... 10000 in the completion" with a 4097 window), or states an input limit below
  zero (the window less such a reservation: "input length limit -80"), no prompt can
  fit: not an overflow, the error goes back untouched.

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

The tables are in overflow_wordings.py, the walk of an error body and the decision
in overflow_read.py; this module reads bodies and streams, and every name of its
``__all__`` is importable from here.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from trimgate.providers.overflow_read import (
    _MAX_ITEMS,
    _NOT_FIXABLE,
    _TEXT_ROOM,
    UNAVAILABLE_STATUSES,
    WINDOW_STOP,
    WORDED_REPLY_LIMIT,
    Overflow,
    Patterns,
    Suspect,
    _confirmed,
    _custom,
    _decide,
    _ends_in_error_body,
    _Facts,
    _finished_chunk,
    _first_choice,
    _has_hint,
    _is_zero,
    _never_stated,
    _read_message,
    _stray_texts,
    _suspect,
    _unfixable,
    _walk_document,
    bracketed_error,
    cli_refusal,
    counts_unspent,
    empty_message_item,
    empty_text_part,
    error_tagged,
    fields_fill_window,
    incomplete_unspent,
    prompt_only_usage,
    reply_overflow,
    reply_text,
    window_filled,
)
from trimgate.providers.overflow_wordings import (
    _DELTA_OUTPUT_KEYS,
    _LIFECYCLE_TYPES,
    _NEVER_CODES,
    _NEVER_STATUSES,
    _SUSPECT_STATUSES,
)
from trimgate.sse import event_fields

__all__ = [
    "FRAMED",
    "HELD_REPLIES",
    "HOLDS",
    "MAX_BYTES",
    "MAX_PATTERNS",
    "MAX_PATTERN_LENGTH",
    "NO_OUTPUT",
    "OUTPUT",
    "UNAVAILABLE_STATUSES",
    "UNSPENT",
    "WORDED",
    "WORDED_LONG",
    "Overflow",
    "Patterns",
    "Suspect",
    "compile_patterns",
    "confirm_suspect",
    "detect_bare_stream_overflow",
    "detect_overflow",
    "detect_stream_event_overflow",
    "detect_stream_overflow",
    "detect_suspect",
    "detect_unfixable",
    "may_state_error",
    "states_envelope_error",
    "stream_event_has_output",
    "stream_event_output",
    "stream_head_decided",
]

MAX_BYTES: Final = 64 * 1024
MAX_PATTERNS: Final = 32  # upstreams.<name>.overflow_patterns: at most this many
MAX_PATTERN_LENGTH: Final = 512  # characters each


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


# the stop_reason (or finish_reason) an answer that may be an overflow carries, as it
# stands in the JSON
WINDOW_STOP_JSON: Final = f'"{WINDOW_STOP}"'.encode()


def may_state_error(body: bytes) -> bool:
    """Whether a body sent with a success status may state an error (JSON keys and types
    are lower-case): an "error" key or type, the window stop, FastAPI's HTTPException
    returned rather than raised (``{"status_code": 400, "detail": ...}``), a platform's
    ``{"success": false, ...}`` or ``{"code": 500, ...}``, a reply that is a known error
    (``_REPLY_ERROR_MARKS``), an output counted below zero, or a response left incomplete
    for ``max_output_tokens`` (``detect_unspent_stop``)."""
    return (
        b"error" in body
        or WINDOW_STOP_JSON in body
        or any(mark in body for mark in _REPLY_ERROR_MARKS)
        or states_envelope_error(body)
        or _NEGATIVE_OUTPUT_RE.search(body) is not None
        or _OUTPUT_LIMIT_REASON_RE.search(body) is not None
    )


# an empty reply counting its output below zero (LMDeploy 0.6)
_NEGATIVE_OUTPUT_RE: Final = re.compile(rb'"completion_tokens"\s*:\s*-')
_OUTPUT_LIMIT_REASON_RE: Final = re.compile(rb'"reason"\s*:\s*"max_output_tokens"')


def states_envelope_error(body: bytes) -> bool:
    """Whether a body sent with a success status holds a platform's error envelope that
    names no "error": FastAPI's ``{"status_code": 400, ...}``, ``{"success": false, ...}``,
    or a "code" that is an HTTP error status (``{"code": 500, "msg": ..., "data": null}``;
    the byte form of the readers' ``_http_code``)."""
    return (
        b'"status_code"' in body
        or b'"success":false' in body
        or b'"success": false' in body
        or _CODE_STATUS_RE.search(body) is not None
    )


_CODE_STATUS_RE: Final = re.compile(rb'"code"\s*:\s*"?[45]\d\d[",\s}]')


# Marks of errors written as a success's reply: Google's JS SDK's, gpt4all's refusal, a
# gateway's bracketed one
_REPLY_ERROR_MARKS: Final = (
    b"[GoogleGenerativeAI Error]",
    b"ERROR: The prompt size exceeds",
    b'"[Error: ',  # a gateway's error as the whole reply (codex-pool)
    b'"Error: ',  # ... or a server's, one line (Apple-Intelligence-API, afm-server)
    b'"API Error: ',  # ... or Claude Code's, "API Error: 400 {...}", relayed by its bridges
    b'"Prompt is too long',  # ... or its refusal as the whole reply (``cli_refusal``)
    b"**Context window exceeded**",  # ... or its notice (maclocal-api)
    b"[Sorry, The input message is too long!]",  # ... or Kuwa GenAI OS's refusal
    b"**Request Rejected: Token Limit Exceeded**",  # ... or RobAI's research proxy's
    b"(status code: 4",  # ... or ollama-python's error, relayed (Kuwa GenAI OS)
    b"\\u200b<proxy>",  # ... or GeminiForJanitors' between its tags, JSON-escaped
    "\u200b<proxy>".encode(),  # ... or not
    # ... or the openai SDK's exception, "Error code: 400 - {...}", relayed whole where the
    # upstream's body names no "error" (RAGFlow, MaxKB, over SiliconFlow's flat envelope)
    b"Error code: ",
    # ... or one line stating an overflow, finished "length" (m4gshm's OpenVINO server)
    b'"finish_reason":"length"',
    b'"finish_reason": "length"',
    # ... or an upstream's refusal as an Anthropic message that counted nothing (EvalScope)
    b'"stop_reason":"max_tokens"',
    b'"stop_reason": "max_tokens"',
)


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
    if _sse_head(head):
        return detect_stream_overflow(body, wire_format=wire_format, patterns=patterns)
    if status < 400 and not may_state_error(body):
        return None
    if not patterns and not _has_hint(body.lower()):
        return None
    facts = _body_facts(status, body, head)
    return None if facts is None else _decide(status, facts, patterns)


def _body_facts(status: int, body: bytes, head: bytes) -> _Facts | None:
    """The error facts of a whole body; None when it states no error."""
    facts = _Facts(body)
    # (brpc, xllm's RPC server, starts a failed call's plain text with "[ip:port]")
    if head[:1] == b"{" or (head[:1] == b"[" and not _BRPC_SERVER_RE.match(head)):
        try:
            doc = orjson.loads(body)
        except (orjson.JSONDecodeError, RecursionError):
            return None  # malformed or cut JSON: never guess from fragments
        if not _walk_document(doc, facts, 0, error_status=status >= 400):
            return None
        if status >= 400 and not facts.texts:
            _stray_texts(doc, facts)
    elif status >= 400 and head[:1] != b"<":  # plain-text error; HTML pages are never read
        facts.say(body.decode("utf-8", "replace"))
    else:
        return None
    return facts


# (an IPv4 address, or an IPv6 one in brackets of its own: "[[::1]:8010]")
_BRPC_SERVER_RE: Final = re.compile(
    rb"\[(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]{2,45}\]):\d{1,5}\]"
)


def _sse_head(head: bytes) -> bool:
    """Whether a body starts as SSE text: a data, event or comment line, or a field no
    standard names that a server writes all the same (an ``error:`` line; Flowise's
    ``message:`` line right before its data, not a plain-text "message: ..." error)."""
    return (
        head[:5] == b"data:"
        or head[:6] in (b"event:", b"error:")
        or head[:1] == b":"
        or (head[:8] == b"message:" and head[8:].lstrip(b" \r\n")[:5] == b"data:")
    )


def detect_unfixable(status: int, body: bytes) -> bool:
    """Whether an error body (or an SSE stream head, or one SSE event) states a context
    overflow that no trim can fix: the output reservation it itemises alone fills the
    window ("... 10000 in the completion" with a 4097 window, or count fields beside an
    overflow's words that say so), or the input limit it states is below zero ("input
    length limit -80"). ``detect_overflow``
    says None for such an answer; this tells it from any other non-overflow, so the
    answer can say why nothing was resent. Rate-limit, quota and auth answers never are.
    """
    if not body or len(body) > MAX_BYTES:
        return False
    head = body[:64].lstrip()
    if _sse_head(head):
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
    if facts.codes & _NEVER_CODES or any(map(_never_stated, facts.texts)):
        return False
    return any(map(_unfixable, facts.texts)) or fields_fill_window(status, facts)


def detect_suspect(status: int, body: bytes, *, plain: bool = False) -> Suspect | None:
    """An error answer that ``detect_overflow`` and ``detect_unfixable`` both turned down
    but whose words point at the prompt's size: a size subject (the prompt, input,
    context, text, messages...) beside an excess, with no output, byte or media size,
    schema or time limit, under status 400, 413, 422, 424 or 500; or a 413 that says the
    request or its payload is too large (a byte limit a smaller history may pass).
    Rate-limit, quota, billing, auth and safety answers never are, nor are HTML pages and
    streams. ``plain``: any other 400, 413 or 422 with a message that names nothing a
    trim cannot fix is one too, not ``worded`` (the shell probes it only for a request
    larger than the largest that passed).

    Such an answer is worth a probe, a resend trimmed to 2/3 (4/9 at a second step): its
    ``wording`` keys what the probe taught, ``confirm_suspect`` reads the probe's answer."""
    if status not in _SUSPECT_STATUSES or not body or len(body) > MAX_BYTES:
        return None
    head = body[:64].lstrip()
    if _sse_head(head):
        return None
    facts = _body_facts(status, body, head)
    return None if facts is None else _suspect(status, facts, plain=plain)


def confirm_suspect(first: Suspect, again: Suspect, shrink: float) -> Overflow | None:
    """The overflow a probe confirms: its answer ``again`` has the wording of ``first``
    with one count (of at least 100) moved down about as much as the trim shrank the
    prompt (``shrink``: the probe's estimated prompt over the first's, within 0.2). That
    count is the prompt the provider counted; the window is the one other count of at
    least 100 that stayed the same and is smaller, when there is exactly one. None: the
    probe confirms nothing (the same answer again, or another one)."""
    return _confirmed(first, again, shrink)


_MAX_EVENTS: Final = 64  # (llama-swap streams its loading status in about 20)


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
            if value[:5] == b"data:":  # its own "data: " again before the upstream's line
                value = value[5:].lstrip(b" ")  # (typingmind-proxy)
            if value[:1] == b":":
                continue  # ... and before a comment ("data: : keep-alive"): one still
            data.append(value)
        elif field == b"error":  # older llama.cpp servers (llama.cpp#16104): non-standard
            name = "error"
            data.append(value)
    raw = _raw_json(fields)
    if raw is not None:
        return name, raw
    if not name and not data:
        return None
    return name, b"\n".join(data) if data else None


# the fields an SSE stream names, and llama.cpp's non-standard "error" (see ``_named``)
_SSE_STANDARD: Final = (b"data", b"event", b"id", b"retry")
_SSE_FIELDS: Final = (*_SSE_STANDARD, b"error")


def _raw_json(fields: list[tuple[bytes, bytes]]) -> bytes | None:
    """An error body in JSON that a server wrote raw into its stream, across a block's
    lines: after "data: " with its pretty-printed lines following unprefixed (agent-cli's
    memory proxy relays OpenAI's error so), or as a line of its own before "data: [DONE]"
    (AutoRAG's proxy), or after a short preface on the data line that opens it
    (llm-to-anthropic: "data: OpenAI API returned status 400: {", the upstream's
    pretty-printed body below). Its lines read as fields no SSE names; joined again (less
    the "[DONE]"), they are JSON with an error key (``_json_error``), after the preface
    if any (kept: it may name the status). None for any other block."""
    if all(field in _SSE_FIELDS for field, _ in fields):
        return None
    lines: list[bytes] = []
    opened = -1  # where the JSON starts in the joined lines, once a line with text is seen
    for field, value in fields:
        if field not in _SSE_FIELDS:
            line = field + b":" + value if value else field
        elif field == b"data" and value.strip() != b"[DONE]":
            line = value
        else:
            continue
        if opened < 0 and line.strip():
            start = _json_start(line)
            if start < 0:
                return None  # (not JSON from its start or a preface: judged no further)
            opened = sum(len(kept) + 1 for kept in lines) + start
        lines.append(line)
    text = b"\n".join(lines)
    body = text[opened:].strip() if opened >= 0 else b""
    if not _json_error(body):
        return None
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return text.strip()


def _json_start(line: bytes) -> int:
    """Where JSON starts in the first line of a block written raw: at its start, or at
    the brace (or bracket) that ends a short preface (``_PREFACE_OPEN_RE``); -1 for
    neither."""
    stripped = line.lstrip()
    if stripped[:1] in (b"{", b"["):
        return len(line) - len(stripped)
    match = _PREFACE_OPEN_RE.fullmatch(line)
    return match.start("open") if match is not None else -1


# a preface of a few words that opens the JSON below it: "OpenAI API returned status 400: {"
_PREFACE_OPEN_RE: Final = re.compile(rb"\s*[^{}\[\]\r\n]{1,120}?[:\-]\s*(?P<open>[{\[])\s*")


def _json_error(text: bytes) -> bool:
    """Whether ``text`` is JSON with an error key ("error", "error_msg", "errorMessage",
    "err"..., wherever it stands) or a whole object typed as an error (vLLM's flat
    ``{"object": "error", ...}``, which Slurm-vLLM's proxy writes raw into the 200 stream
    it opened; a type nested in an answer, such as a tool call's arguments, does not
    count)."""
    if _BARE_ERROR_KEY_RE.search(text) is not None:
        return True
    if _TYPED_ERROR_RE.search(text) is None:
        return False
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return isinstance(doc, dict) and (doc.get("object") == "error" or doc.get("type") == "error")


def _choice_has_output(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return True
    if choice.get("finish_reason") not in (None, ""):
        return True
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return _delta_has_output(delta)
    text = choice.get("text")  # legacy completions
    if isinstance(text, str):
        return text != ""
    return True


# What one event of a held stream is (``stream_event_output``)
OUTPUT: Final = "output"  # model output, or anything else that settles it as a normal one
NO_OUTPUT: Final = ""  # an opener, a lifecycle or error event, a comment: hold on
# A first reply in an overflow's words, held (once a stream) so that the next events decide:
# an error after it (LocalAI writes llama.cpp's refusal as the reply's first text, then the
# error), or, in an Anthropic stream, the message_delta that closes it (UNSPENT below). How
# such a reply may be closed as the server's error depends on what it looks like:
WORDED: Final = "worded"  # up to 512 characters: an error stop, or no output for a prompt
# ... after an Anthropic message_start that counted the prompt (COUNTED): any count of no
# output closes it, the input counted at the start (llamaR's close states only the output,
# claudish's 0 to both). A model's whole reply in one such chunk, from a server that counts
# the input at the start and never the output, would be taken for the server's error: the
# same trade as LMDeploy's shape above
WORDED_COUNTED: Final = "worded-counted"
WORDED_LONG: Final = "worded-long"  # 513 to 1,024 characters: an error stop only
# Claude Code's "Prompt is too long", the whole text of a chat stream's first reply (its
# bridges relay the CLI's refusal so): the chunk that finishes it with nothing more
# written closes it as the server's error
CLI_REFUSAL: Final = "cli-refusal"
# wholly "[Error: ...]", or ending in an upstream's error body in JSON ("Error from upstream:
# 400 - {...}"), a gateway's frame: any count of no output, or, in a chat stream, the chunk
# that finishes it with nothing more written (local-ai-runtime)
FRAMED: Final = "framed"
# ... and, held the same way though no reply, llama-swap's model-loading status
# (``_loading_status``): its chunks hold on until the model's server answers
LOADING: Final = "loading"
HELD_REPLIES: Final = frozenset({WORDED, WORDED_COUNTED, WORDED_LONG, CLI_REFUSAL, FRAMED, LOADING})
# an Anthropic message_start that counted the prompt (input_tokens above 0), no reply held
# yet: kept as held is, so that a reply in an overflow's words after it is WORDED_COUNTED
COUNTED: Final = "counted"
# what a caller keeps as its stream's ``held`` when an event says it
HOLDS: Final = HELD_REPLIES | {COUNTED}
# a message_delta that closes a held reply as the server's error: LMDeploy's counts no
# output token for a prompt it counted (its engine's status as the text); tududes'
# claude-proxy stops with "error"; codex-pool's counts no output after its "[Error: ...]"
UNSPENT: Final = "unspent"


def _doc_output(doc: Any, held: str) -> tuple[str, Overflow | None]:
    """What a parsed event (not an error) is: ``OUTPUT``, ``NO_OUTPUT``, or, for the first
    reply of a stream (nothing ``held``) that reads as an overflow, one of
    ``HELD_REPLIES`` with the overflow its words state; after it, the end of its Anthropic
    block is ``NO_OUTPUT`` and a ``message_delta`` that closes it as the server's error
    (``_closes_held``) ``UNSPENT``, as is, after Claude Code's refusal or a frame in a chat
    stream, the chunk that finishes it writing nothing more. With no reply held, an
    Anthropic reply closed before any output (``_closes_unspent``) is ``NO_OUTPUT``, and
    with nothing held a ``message_start`` that counts the prompt ``COUNTED``; after it, a
    stop at "max_tokens" that counts no output (``_stops_unspent``) is ``UNSPENT`` too."""
    if not held and _start_counts_prompt(doc):
        return COUNTED, None
    if held == COUNTED and isinstance(doc, dict) and _stops_unspent(doc):
        return UNSPENT, None
    if held not in ("", COUNTED) and isinstance(doc, dict):
        kind = doc.get("type")
        if kind == "content_block_stop":
            return NO_OUTPUT, None
        if kind == "message_delta" and _closes_held(held, doc):
            return UNSPENT, None
        if held in (CLI_REFUSAL, FRAMED) and _finishes_empty(doc):
            return UNSPENT, None
    elif isinstance(doc, dict) and _closes_unspent(doc):
        return NO_OUTPUT, None
    status = _loading_status(doc)
    if status is not None and held in ("", LOADING):
        if held == LOADING:
            return NO_OUTPUT, None
        if status.startswith(_LOADING_RULE):
            return LOADING, None
    if not _doc_has_output(doc):
        return NO_OUTPUT, None
    text = reply_text(doc) if held in ("", COUNTED) and isinstance(doc, dict) else None
    found = reply_overflow(text) if text is not None else None
    if text is None or found is None:
        return OUTPUT, None
    if bracketed_error(text) is not None or _ends_in_error_body(text):
        return FRAMED, found  # (a frame: "[Error: ...]", or an upstream's error body last)
    if error_tagged(text) and _first_choice_delta(doc):
        return FRAMED, found  # (... or a relay's tag first in a chat chunk, "[Proxy Error] ...")
    if cli_refusal(text) and _first_choice_delta(doc):
        return CLI_REFUSAL, found
    if len(text) > WORDED_REPLY_LIMIT:
        return WORDED_LONG, found
    return (WORDED_COUNTED if held == COUNTED else WORDED), found


def _delta_has_output(delta: dict[str, Any]) -> bool:
    return any(delta.get(key) not in (None, "", [], {}) for key in _DELTA_OUTPUT_KEYS)


def _first_choice_delta(doc: dict[str, Any]) -> bool:
    """Whether a parsed event is a chat chunk (its first choice a ``delta``)."""
    choice = _first_choice(doc)
    return choice is not None and isinstance(choice.get("delta"), dict)


def _finishes_empty(doc: dict[str, Any]) -> bool:
    """Whether a chat chunk finishes its reply writing nothing more: a finish reason, its
    delta empty (but a role)."""
    choice = _first_choice(doc)
    if choice is None or not _finished_chunk(choice):
        return False
    return not _delta_has_output(choice["delta"])


def _start_counts_prompt(doc: Any) -> bool:
    """Whether a parsed event is an Anthropic ``message_start`` whose usage counts the
    prompt (input_tokens above 0)."""
    if not isinstance(doc, dict) or doc.get("type") != "message_start":
        return False
    message = doc.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    prompt = usage.get("input_tokens") if isinstance(usage, dict) else None
    return type(prompt) is int and prompt > 0


def _stops_unspent(doc: dict[str, Any]) -> bool:
    """Whether a ``message_delta``, reached with nothing output after a ``message_start``
    that counted the prompt, stops at "max_tokens" counting no output token (and no cache
    read): the Messages stop whose usage counts the prompt alone, its prompt counted at
    the start (llmmllab's bridge; ``_unspent_max_tokens`` reads it where the delta states
    both counts)."""
    delta, usage = doc.get("delta"), doc.get("usage")
    if doc.get("type") != "message_delta" or not isinstance(delta, dict):
        return False
    if delta.get("stop_reason") != "max_tokens" or not isinstance(usage, dict):
        return False
    return _is_zero(usage.get("output_tokens")) and not usage.get("cache_read_input_tokens")


def _closes_unspent(doc: dict[str, Any]) -> bool:
    """Whether an event, reached with nothing output yet, ends an Anthropic reply that
    produced nothing: a ``message_delta`` with a stop reason that counts no output token,
    or a ``message_stop``. A gateway that serves a Messages stream from another API
    closes the reply so before it writes the upstream's error (agentgateway over a
    Responses upstream), and the event after it decides; a stream that ends there is
    relayed as it ended. A placeholder ``message_delta`` with no stop reason is output,
    as before."""
    kind = doc.get("type")
    if kind == "message_stop":
        return True
    if kind != "message_delta":
        return False
    delta, usage = doc.get("delta"), doc.get("usage")
    if not isinstance(delta, dict) or delta.get("stop_reason") in (None, ""):
        return False
    return isinstance(usage, dict) and _is_zero(usage.get("output_tokens"))


def _closes_held(held: str, doc: dict[str, Any]) -> bool:
    """Whether a ``message_delta`` makes the reply ``held`` the server's error: a stop
    reason of "error", which Anthropic never gives; for a reply of up to 512 characters,
    a usage that counts no output token for a prompt it counted (a server that counts
    nothing says 0 to both, or states only the output); for such a reply after a
    ``message_start`` that counted the prompt (``WORDED_COUNTED``), and for a framed one,
    any usage that counts no output token."""
    delta = doc.get("delta")
    if isinstance(delta, dict) and delta.get("stop_reason") == "error":
        return True
    usage = doc.get("usage")
    if held in (FRAMED, WORDED_COUNTED):
        return isinstance(usage, dict) and _is_zero(usage.get("output_tokens"))
    return held == WORDED and _counts_no_output(usage)


def _counts_no_output(usage: Any) -> bool:
    """Whether a usage counts no output token for a prompt it counted (above 0)."""
    if not isinstance(usage, dict):
        return False
    prompt = usage.get("input_tokens")
    return _is_zero(usage.get("output_tokens")) and type(prompt) is int and prompt > 0


def _doc_has_output(doc: Any) -> bool:
    """Whether a parsed event (not an error) carries model output or otherwise settles
    the stream as a normal one. Only empty openers are not output: a chat chunk whose
    deltas hold nothing but a role (or empty text), an Anthropic ``message_start``, an
    empty ``content_block_start`` or ``content_block_delta`` and the block's stop, a
    Responses lifecycle or empty ``added`` event."""
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
        if kind == "content_block_delta":  # (vandamme-proxy opens a reply so, then errs)
            return not _empty_block_delta(doc.get("delta"))
        if kind == "content_block_stop":  # reached before any output: an empty block's
            return False
        if kind == "response.output_item.added":  # (a reasoning item, a call: generating)
            return not empty_message_item(doc.get("item"))
        if kind == "response.content_part.added":
            return not empty_text_part(doc.get("part"))
        if _empty_done(kind, doc):
            return False
        if kind.startswith(("response.", "message_")):
            return True
    choices = doc.get("choices")
    if isinstance(choices, list):
        if not choices:  # usage-only or empty opener chunk
            return doc.get("usage") not in (None, {})
        return any(_choice_has_output(choice) for choice in choices[:_MAX_ITEMS])
    return True


def _empty_block_delta(delta: Any) -> bool:
    """Whether an Anthropic ``content_block_delta``'s delta adds nothing: empty text or
    thinking."""
    if not isinstance(delta, dict):
        return False
    kind = delta.get("type")
    return (kind == "text_delta" and delta.get("text") == "") or (
        kind == "thinking_delta" and delta.get("thinking") == ""
    )


def _empty_done(kind: str, doc: dict[str, Any]) -> bool:
    """Whether a Responses event closes a message, part or text that holds nothing (as
    LiteLLM closes the empty message of a response it then leaves incomplete)."""
    if kind == "response.output_text.done":
        return doc.get("text") == ""
    if kind == "response.content_part.done":
        return empty_text_part(doc.get("part"))
    return kind == "response.output_item.done" and empty_message_item(doc.get("item"))


def _loading_status(doc: Any) -> str | None:
    """The text of a chunk as llama-swap (and its forks llmsnap, llama-swappo) writes its
    model-loading status (``sendLoadingState``), reasoning and nothing else, ``{"choices":
    [{"delta": {"reasoning_content": "..."}}]}``; None for any other event. Its first
    chunk starts with a rule of box-drawing dashes ("━━━━━"): from there such chunks are
    held (``LOADING``), and what the model's server answers follows in the same stream
    (an error's JSON raw, with no "data:"). A server's own reasoning in that bare shape
    starts otherwise, and is output."""
    if not isinstance(doc, dict) or len(doc) != 1:
        return None
    choices = doc.get("choices")
    if not isinstance(choices, list) or len(choices) != 1:
        return None
    choice = choices[0]
    if not isinstance(choice, dict) or choice.keys() != {"delta"}:
        return None
    delta = choice["delta"]
    if not isinstance(delta, dict) or delta.keys() != {"reasoning_content"}:
        return None
    text = delta["reasoning_content"]
    return text if isinstance(text, str) else None


_LOADING_RULE: Final = "\u2501\u2501\u2501"


def _event_verdict(
    name: str, payload: bytes | None, patterns: Patterns, held: str | None = ""
) -> tuple[str, Overflow | None]:
    """(``OUTPUT``, overflow) for one event that decides: an error event (overflow or
    not) or an output event (no overflow); (``NO_OUTPUT``, None) for an empty opener or a
    lifecycle event; (one of ``HELD_REPLIES``, overflow) for a first reply in an
    overflow's words, (``COUNTED``, None) for a ``message_start`` that counts the prompt
    with nothing held, and (``UNSPENT``, None) for a ``message_delta`` that closes the reply
    ``held`` as the server's error. With ``held`` None, only an error's overflow is read
    (``NO_OUTPUT`` otherwise)."""
    if payload is None:
        return (OUTPUT if name not in _LIFECYCLE_TYPES else NO_OUTPUT), None
    payload = payload.strip()
    if not payload:
        return NO_OUTPUT, None
    if payload == b"[DONE]":
        return OUTPUT, None
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return OUTPUT, _text_event(name, payload, patterns)
    facts = _Facts(payload)
    if _walk_document(doc, facts, 0, error_status=name == "error"):
        # An error event decides, whether or not it is an overflow.
        if not patterns and not _has_hint(payload.lower()):
            return OUTPUT, None
        return OUTPUT, _decide(200, facts, patterns)
    if name == "error":
        return OUTPUT, None
    if held is None:
        return NO_OUTPUT, None
    if name in _LIFECYCLE_TYPES:
        return (COUNTED if not held and _start_counts_prompt(doc) else NO_OUTPUT), None
    return _doc_output(doc, held)


def _text_event(name: str, payload: bytes, patterns: Patterns) -> Overflow | None:
    """The overflow an event that is not JSON states: read when it is an error written as
    text ("event: error", or "data: error: Prompt length (P) exceeds server max_seq_len
    (L)" as Crane writes it, or an error object its server wrote without escaping the
    upstream's body inside it, as kiro-high-performance-proxy writes "data: {"error":
    "请求失败 [400]: {"message":"Input is too long.", ...}"}"), or when its words are a
    listed wording or the upstream's own (mistral.rs before 0.9.2 wrote "data: Prompt
    sequence length is greater than L, ..."): the formats trimgate fronts carry a model's
    output as JSON, never so."""
    if not patterns and not _has_hint(payload.lower()):
        return None
    # (the characters any message's readers scan: a cut 64 KiB chunk scanned whole by every
    # listed pattern held the event loop 50-90 ms)
    said = payload.decode("utf-8", "replace")[:_TEXT_ROOM]
    written = payload[:6].lower() == b"error:" or (
        _UNESCAPED_ERROR_RE.match(payload) is not None and payload.endswith(b"}")
    )  # (closed: a body cut short may have lost its counts' digits)
    if name != "error" and not written:
        listed = _read_message(said)
        if (listed is None or listed is _NOT_FIXABLE) and _custom(said, patterns) is None:
            return None
    facts = _Facts()
    facts.say(said)
    return _decide(200, facts, patterns)


# the start of an error object that does not parse (``_text_event``)
_UNESCAPED_ERROR_RE: Final = re.compile(rb'\{\s*"error"\s*:')


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
    held = ""
    for name, data in events:
        verdict, _ = _event_verdict(name, data, (), held)
        if verdict in (OUTPUT, UNSPENT):
            return True
        if verdict in HOLDS:
            held = verdict
    return len(events) >= _MAX_EVENTS


def detect_stream_overflow(
    data: bytes, *, wire_format: str, patterns: Patterns = ()
) -> Overflow | None:
    """The overflow an error event at the start of a 200 SSE stream states.

    ``data`` is the raw beginning of the stream (only the first 64 KiB, and its first
    ``_MAX_EVENTS`` events, are read). Comments, keep-alives, lifecycle events, empty
    openers (a role-only chat chunk, ``message_start``) and an Anthropic reply closed
    before any output (``_closes_unspent``) are skipped; the first
    other event decides: an error event (``event: error``, ``data: {"error": ...}``,
    ``type: error``, ``response.failed``, a choice with ``finish_reason: "error"``) is
    read like an error body, an event with output means no overflow. A first reply in
    an overflow's words is held: an error after it decides, and so does an Anthropic
    ``message_delta`` that counts no output token (the reply was the error), or, after
    Claude Code's refusal or a gateway's frame in a chat stream, the chunk that finishes it
    writing nothing more. A chat
    stream's stop at "length" before any output is one when its usage, in its own chunk
    or the next, counts the prompt alone (``stop_usage_counts_prompt_only``).
    ``wire_format`` is accepted for symmetry with ``detect_overflow``.
    """
    head = data[:MAX_BYTES]
    if not head:
        return None
    held, worded = "", None
    stopped = False  # a stop before any output whose usage is yet unsaid
    for name, payload in _events(head):
        if stopped:  # the first usage, error or output after the stop decides
            counted = stop_usage_counts_prompt_only(payload) if payload is not None else None
            if counted is not None:
                return Overflow(None, None) if counted else None
            verdict, found = _event_verdict(name, payload, patterns, "")
            if verdict != NO_OUTPUT:
                return found
            continue
        if not held and payload is not None and (doc := _chat_stop(payload)) is not None:
            counted = _stop_usage_read(doc)
            if counted is not None:
                return Overflow(None, None) if counted else None
            stopped = True
            continue
        verdict, found = _event_verdict(name, payload, patterns, held)
        if verdict == OUTPUT:
            return found
        if verdict == UNSPENT:  # (after a counted start alone, its stop: ``_stops_unspent``)
            return worded if held != COUNTED else Overflow(None, None)
        if verdict in HOLDS:
            held, worded = verdict, found
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
    return _event_verdict(parsed[0], parsed[1], patterns, None)[1]


BARE_STREAM_LIMIT: Final = 4096
# a field line of an SSE stream (data, event, id, retry), and a comment line
_SSE_LINE_RE: Final = re.compile(rb"(?m)^[ \t]*(?:" + b"|".join(_SSE_STANDARD) + rb")[ \t]*:")
_COMMENT_LINE_RE: Final = re.compile(rb"(?m)^[ \t]*:[^\r\n]*(?:\r\n|\r|\n|$)")
# the terminator after an error written raw, on its own line or glued to it (openguard)
_DONE_TAIL_RE: Final = re.compile(rb"data:[ \t]*\[DONE\][ \t\r\n]*\Z")
_BOM: Final = "\ufeff".encode()
# a key that makes a JSON line an error: "error", "error_msg", "errorMessage", "err"...
_BARE_ERROR_KEY_RE: Final = re.compile(rb'"err(?:or)?[\w-]*"\s*:', re.IGNORECASE)
# ... and a type that may (``_json_error`` checks it is the whole object's)
_TYPED_ERROR_RE: Final = re.compile(rb'"(?:object|type)"\s*:\s*"error"')


def detect_bare_stream_overflow(
    data: bytes, *, wire_format: str, patterns: Patterns = ()
) -> Overflow | None:
    """The overflow of a 200 event stream that ended holding no SSE line at all, only
    text: an error some servers write raw into the stream they opened (xllm's "Prompt is
    too long", FastDeploy's push-mode JSON lines), after comments only (CLIProxyAPI 1.0's
    keep-alive ": CLI-PROXY-API PROCESSING" lines, then its error JSON), before a last
    "data: [DONE]" (openguard glues it to its error). ``data`` is the
    whole stream; less its comments, at most ``BARE_STREAM_LIMIT`` bytes of it are read as
    an error body with no status of its own (``detect_overflow`` at 400), so only an
    overflow's wording counts. JSON in it counts only with an error key or typed as an
    error as a whole (``_json_error``): a JSON-lines answer (``{"message": ..., "done":
    true}``) is not an error. The same error object written twice back to back
    (hivemind-scheduler yields the upstream's error again after relaying it) is read
    once. A stream that carries output has SSE lines."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if b":" in data:
        data = _DONE_TAIL_RE.sub(b"", _COMMENT_LINE_RE.sub(b"", data))
    if not data.strip() or len(data) > BARE_STREAM_LIMIT or _SSE_LINE_RE.search(data):
        return None
    if data.lstrip()[:1] in (b"{", b"[") and not _json_error(data):
        return None
    data = _once(data.strip())
    return detect_overflow(400, data, wire_format=wire_format, patterns=patterns)


def _once(data: bytes) -> bytes:
    """``data``, or its first half where it is one JSON object written twice."""
    half = len(data) // 2
    if len(data) % 2 == 0 and data[:1] == b"{" and data[:half] == data[half:]:
        return data[:half]
    return data


def detect_unspent_stop(data: bytes) -> Overflow | None:
    """The overflow an answer states by stopping at "length" with nothing produced, read
    as one for a chat request that set no output limit (the caller's to know), or by a
    Responses object left "incomplete" for ``max_output_tokens`` with nothing produced
    (``incomplete_unspent``; whole, or in a ``response.*`` event), for a
    Responses request with no ``max_output_tokens`` (LiteLLM answers so when Claude stops
    at the window before any output): no limit
    stopped it, so the window did (for any other request, only a usage that counts the
    prompt alone makes it one: ``stop_usage_counts_prompt_only``). Local servers
    (mlx-omnia, InfiniLM, RKLLM, LlamaEdge, an old vLLM behind xinference) answer a
    prompt that fills the window so, as a whole completion or a stream's finishing chunk,
    most with no usage; for a request with a small ``max_tokens`` a model whose hidden
    reasoning spent it looks the same, so the body alone never tells it. ``data``: one SSE
    event block, or a whole completion. Its only choice finished "length" with nothing
    but a role in its message or delta (any other field that holds something, known or
    not, is output), and its usage, if any, counts no output token (or one) and nothing
    beyond the prompt and it (``unspent_usage``)."""
    if not data or len(data) > MAX_BYTES:
        return None
    if b'"length"' in data:
        doc = _event_doc(data)
        if _unspent_choice(doc) is not None and _usage_unspent(doc) is not False:
            return Overflow(None, None)
    if b'"max_output_tokens"' in data and _unspent_response(_event_doc(data)):
        return Overflow(None, None)
    return None


def _unspent_response(doc: Any) -> bool:
    """Whether a Responses object, or the one a ``response.*`` event holds
    (``response.incomplete``; ds4codex sends it as ``response.completed``), was left
    incomplete for ``max_output_tokens`` with nothing produced, or with no text and a
    usage that is nearly all prompt (``window_filled``: alcf-proxy's 8 tokens spent)."""
    kind = doc.get("type") if isinstance(doc, dict) else None
    if isinstance(kind, str) and kind.startswith("response."):
        doc = doc.get("response")
    return isinstance(doc, dict) and (
        incomplete_unspent(doc, "max_output_tokens") or window_filled(doc)
    )


def _unspent_choice(doc: Any) -> dict[str, Any] | None:
    """The only choice of an answer or chunk when it finished "length" with nothing but a
    role in its message or delta; None otherwise."""
    if not isinstance(doc, dict) or "error" in doc:
        return None
    choices = doc.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice: dict[str, Any] = choices[0]
    if choice.get("finish_reason") != "length" or choice.get("text"):
        return None
    said = choice.get("delta", choice.get("message", {}))
    if not isinstance(said, dict) or any(
        value not in (None, "", [], {}) for key, value in said.items() if key != "role"
    ):
        return None
    return choice


def unspent_usage(data: bytes) -> bool | None:
    """What the usage of one SSE event block or whole answer says of its output: True
    when it counts no output token (or one: a server's floor, the token a full window
    left, where the caller saw nothing written) and nothing beyond the prompt and it,
    False when it counts more (hidden reasoning counted, or LMDeploy's interactive
    session counting the history it keeps itself, which no trim of the request
    shortens), None when the event
    states no usage: OpenAI's, and its relays', comes in a chunk of its own after the one
    that finishes (Groq's under ``x_groq``)."""
    doc = _event_doc(data) if data and len(data) <= MAX_BYTES else None
    return _usage_unspent(doc) if isinstance(doc, dict) else None


def _chat_stop(payload: bytes) -> Any:
    """The JSON of an event's data when it is a chat chunk's stop before any output, its
    usage (if any) counting no output (``detect_unspent_stop``; a legacy completion's
    choice has no delta, and is not trimmed); None otherwise."""
    if b'"length"' not in payload:
        return None
    doc = _event_doc(payload)
    choice = _unspent_choice(doc)
    if choice is None or "delta" not in choice or _usage_unspent(doc) is False:
        return None
    return doc


def stop_usage_counts_prompt_only(data: bytes) -> bool | None:
    """What the usage of one SSE event block says of a stop before any output
    (``detect_unspent_stop``) whatever the request's output limit: True when it counts a
    prompt alone (``prompt_only_usage``), as a whole answer so finished is read
    (LlamaEdge and text-generation-webui stream that stop, then the usage in a chunk of
    its own), False when it counts anything else, None when the event states no usage."""
    doc = _event_doc(data) if data and len(data) <= MAX_BYTES else None
    return _stop_usage_read(doc)


def _stop_usage_read(doc: Any) -> bool | None:
    usage = _usage(doc) if isinstance(doc, dict) else None
    return None if usage is None else prompt_only_usage(usage)


def _usage(doc: dict[str, Any]) -> Any:
    """An answer's or chunk's usage (Groq's under ``x_groq``); None when it states none."""
    usage = doc.get("usage")
    if usage is None and isinstance(doc.get("x_groq"), dict):
        usage = doc["x_groq"].get("usage")
    return usage


def _usage_unspent(doc: dict[str, Any]) -> bool | None:
    usage = _usage(doc)
    if usage is None:
        return None
    return isinstance(usage, dict) and counts_unspent(usage, "prompt_tokens", "completion_tokens")


def _event_doc(data: bytes) -> Any:
    """The JSON an SSE event block's data holds, or a whole body's; None for neither."""
    if _sse_head(data[:64].lstrip()):
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        parsed = _parse_event(data.strip(b"\n"))
        if parsed is None or parsed[1] is None:
            return None
        data = parsed[1]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def stream_event_has_output(event: bytes) -> bool:
    """Whether one SSE event block, the first reply of its stream, carries output
    (``stream_event_output``)."""
    return stream_event_output(event) == OUTPUT


def stream_event_output(event: bytes, *, held: str = "") -> str:
    """What one SSE event block is to a relay holding its stream: ``OUTPUT`` (model
    output, or anything else that settles the stream as a normal one: after it,
    ``detect_stream_event_overflow`` is no longer asked), ``NO_OUTPUT`` (a comment, a
    lifecycle event, an empty opener, an error event) or one of ``HELD_REPLIES``: a reply
    whose text reads as an overflow, when no such reply is ``held`` (a second one is
    output), or llama-swap's first loading-status chunk (``LOADING``: its later ones are
    ``NO_OUTPUT``); ``COUNTED`` for a ``message_start`` that counts the prompt, with
    nothing held (kept as held is). After a reply, an Anthropic block's end is ``NO_OUTPUT`` and a
    ``message_delta`` that closes the reply as the server's error ``UNSPENT``
    (``detect_stream_overflow`` on what was held reads the reply's overflow)."""
    if not event:
        return NO_OUTPUT
    if len(event) > MAX_BYTES:
        return OUTPUT  # no error event is read past that size
    if b"\r" in event:
        event = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    parsed = _parse_event(event.strip(b"\n"))
    if parsed is None:
        return NO_OUTPUT
    name, payload = parsed
    if payload is None:
        return OUTPUT if name not in _LIFECYCLE_TYPES else NO_OUTPUT
    payload = payload.strip()
    if not payload:
        return NO_OUTPUT
    if payload == b"[DONE]":
        return OUTPUT
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return OUTPUT
    if name == "error" or _walk_document(doc, _Facts(), 0, error_status=False):
        return NO_OUTPUT
    if name in _LIFECYCLE_TYPES:
        return COUNTED if not held and _start_counts_prompt(doc) else NO_OUTPUT
    return _doc_output(doc, held)[0]
