"""Overflow recognition against a corpus of real provider error bodies.

``tests/data/error_corpus.yaml`` holds bodies taken from provider docs and public
issue threads (each entry names its source). Every entry runs through the detector
its transport uses; every JSON body also runs as the first ``event: error`` of a
200 stream, and every stream head also runs as a whole body.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Final

import orjson
import pytest

import trimgate
from bench.heldout import unspent_stop
from tests.data_files import CORPUS_PATH, HELDOUT_PATH, load_entries
from trimgate.providers import overflow, overflow_read, overflow_wordings
from trimgate.providers.overflow import (
    MAX_BYTES,
    Overflow,
    Suspect,
    confirm_suspect,
    detect_bare_stream_overflow,
    detect_overflow,
    detect_stream_overflow,
    detect_suspect,
    detect_unfixable,
    detect_unspent_stop,
    stream_event_has_output,
    stream_event_output,
    unspent_usage,
)
from trimgate.providers.registry import FORMATS

WIRE_FORMATS = FORMATS
REQUIRED_KEYS = {"id", "format", "server", "status", "stream", "body", "overflow", "source"}
OPTIONAL_KEYS = {"real", "maximum"}


CORPUS = load_entries(CORPUS_PATH)
PLAIN = [e for e in CORPUS if not e["stream"]]
STREAMS = [e for e in CORPUS if e["stream"]]
# (the others wrote an error raw into the stream, with no SSE field: read at its end)
# (a stream that opens with a raw JSON line, AutoRAG's, is read as a stream only: whole, it
# is not a JSON body, and a server sends it as its stream)
SSE_STREAMS = [
    e
    for e in STREAMS
    if re.search(r"(?m)^[ \t]*(?:data|event|error)[ \t]*:", e["body"])
    and e["body"].lstrip()[:1] not in ("{", "[")
]


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


JSON_BODIES = [e for e in PLAIN if _is_json(e["body"])]


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [str(e["id"]) for e in entries]


def _expected(entry: dict[str, Any]) -> Overflow | None:
    if not entry["overflow"]:
        return None
    return Overflow(entry.get("real"), entry.get("maximum"))


def _as_error_event(body: str) -> bytes:
    lines = "".join(f"data: {line}\n" for line in body.split("\n"))
    return f"event: error\n{lines}\n".encode()


def _error_body(message: str) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})


# --------------------------------------------------------------------------- the corpus


def test_corpus_has_enough_real_entries() -> None:
    positives = [e for e in CORPUS if e["overflow"]]
    negatives = [e for e in CORPUS if not e["overflow"]]
    assert len(positives) >= 120
    assert len(negatives) >= len(positives)
    # a server by its name, not the version or route its note adds ("vllm-spyre (...)")
    assert len({e["server"].split(" (")[0].lower() for e in positives}) >= 35
    assert any(e["stream"] and e["overflow"] for e in CORPUS)
    assert any(e["stream"] and not e["overflow"] for e in CORPUS)


def test_corpus_entries_are_well_formed() -> None:
    ids = [e["id"] for e in CORPUS]
    assert len(ids) == len(set(ids)), "ids must be unique"
    for entry in CORPUS:
        keys = set(entry)
        assert keys >= REQUIRED_KEYS, entry["id"]
        assert keys <= REQUIRED_KEYS | OPTIONAL_KEYS, entry["id"]
        assert isinstance(entry["source"], str) and entry["source"].strip(), entry["id"]
        assert entry["format"] in WIRE_FORMATS, entry["id"]
        assert isinstance(entry["server"], str) and entry["server"], entry["id"]
        assert isinstance(entry["status"], int), entry["id"]
        assert isinstance(entry["stream"], bool), entry["id"]
        assert isinstance(entry["overflow"], bool), entry["id"]
        assert isinstance(entry["body"], str) and entry["body"], entry["id"]
        if entry["stream"]:
            assert entry["status"] == 200, entry["id"]
        for key in OPTIONAL_KEYS & keys:
            assert entry["overflow"], f"{entry['id']}: {key} on a negative"
            assert isinstance(entry[key], int) and entry[key] > 0, entry["id"]


def test_stated_numbers_describe_a_deficit() -> None:
    # estimate * maximum / real must shrink the prompt: every stated pair is real > maximum.
    for entry in CORPUS:
        if "real" in entry and "maximum" in entry:
            assert entry["real"] > entry["maximum"], entry["id"]


@pytest.mark.parametrize("entry", PLAIN, ids=_ids(PLAIN))
def test_corpus_body(entry: dict[str, Any]) -> None:
    got = detect_overflow(entry["status"], entry["body"].encode(), wire_format=entry["format"])
    assert got == _expected(entry)


@pytest.mark.parametrize("entry", STREAMS, ids=_ids(STREAMS))
def test_corpus_stream_head(entry: dict[str, Any]) -> None:
    body = entry["body"].encode()
    got = detect_stream_overflow(body, wire_format=entry["format"])
    # a stream that ends after these bytes, as the relay reads it: event by event, then
    # as bare text when it held no SSE field; neither reading contradicts the other
    bare = detect_bare_stream_overflow(body, wire_format=entry["format"])
    assert bare in (None, got) or got is None
    assert (got or bare) == _expected(entry)


@pytest.mark.parametrize("entry", SSE_STREAMS, ids=_ids(SSE_STREAMS))
def test_corpus_stream_head_given_as_whole_body(entry: dict[str, Any]) -> None:
    got = detect_overflow(200, entry["body"].encode(), wire_format=entry["format"])
    assert got == _expected(entry)


@pytest.mark.parametrize("entry", JSON_BODIES, ids=_ids(JSON_BODIES))
def test_corpus_body_as_first_stream_error_event(entry: dict[str, Any]) -> None:
    got = detect_stream_overflow(_as_error_event(entry["body"]), wire_format=entry["format"])
    assert got == _expected(entry)


# --------------------------------------------------------------------------- edges


@pytest.mark.parametrize("status", [200, 400, 413, 500])
def test_empty_body_is_not_an_overflow(status: int) -> None:
    assert detect_overflow(status, b"", wire_format="openai") is None
    assert detect_overflow(status, b"   \n", wire_format="openai") is None
    assert detect_stream_overflow(b"", wire_format="openai") is None


def test_plain_text_error_body() -> None:
    text = b"prompt is too long: 210000 tokens > 200000 maximum"
    assert detect_overflow(400, text, wire_format="anthropic") == Overflow(210000, 200000)
    # The same words in a 200 non-JSON body are an answer, not an error.
    assert detect_overflow(200, text, wire_format="anthropic") is None
    # brpc's failed call (xllm) is plain text after the server's "[ip:port]", no JSON list
    said = b"[10.0.0.12:8010]Prompt is too long"
    assert detect_overflow(500, said, wire_format="anthropic") == Overflow(None, None)
    said = b"[[fd00::12]:8010]Prompt is too long"  # an IPv6 server
    assert detect_overflow(500, said, wire_format="anthropic") == Overflow(None, None)
    assert detect_overflow(500, b"[10.0.0.12:8010]Rate limit reached", wire_format="openai") is None
    assert detect_overflow(400, b'[{"error": "Prompt is too long"}', wire_format="openai") is None


@pytest.mark.parametrize(
    ("message", "counts", "whole"),
    [
        # the prompt alone, against a window that must hold the output limit too
        ("prompt is too long: 210000 tokens > 200000 maximum", (210000, 200000), True),
        # gmlx: the sum and then its parts, the reservation itemised
        (
            "prompt is too long: 71602 tokens > 65536 maximum. The request needs 63410 prompt"
            " + 8192 max generation tokens, which exceeds the context window (max_kv_size).",
            (63410, 57344),
            False,
        ),
        (
            "This model's maximum context length is 8192 tokens. However, your request has "
            "9000 input tokens. Please reduce the length of the input messages.",
            (9000, 8192),
            True,
        ),
        # a total that holds the reservation, an input cap, a window read with a pair
        (
            "This model's maximum context length is 8192 tokens. However, you requested 9000 "
            "tokens. Please reduce the length of the messages.",
            (9000, 8192),
            False,
        ),
        (
            "Input tokens exceed the configured limit of 272000 tokens. Your messages "
            "resulted in 300000 tokens.",
            (300000, 272000),
            False,
        ),
        ("5012 tokens exceeds the 4096-token context window", (5012, 4096), False),
        # the reservation itemised: already out
        (
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
            (188240, 178667),
            False,
        ),
        (
            "Request needs 9216 context tokens (8192 prompt + 1024 max generation), but "
            "MAX_KV_SIZE is 8192.",
            (8192, 7168),
            False,
        ),
    ],
    ids=[
        "anthropic",
        "gmlx",
        "vllm",
        "total",
        "input-cap",
        "window-alone-then-pair",
        "sum",
        "itemised",
    ],
)
def test_a_reading_says_whether_the_window_must_hold_the_output_too(
    message: str, counts: tuple[int, int], whole: bool
) -> None:
    body = orjson.dumps({"error": {"message": message}})
    got = detect_overflow(400, body, wire_format="openai")
    assert got is not None and (got.real, got.maximum) == counts and got.whole is whole


@pytest.mark.parametrize(
    ("message", "overflow"),
    [
        # Megatron's inference server prints the exception's class, and no message
        ("Request 0: {'type': 'MaxSequenceLengthOverflowError', 'message': None}", True),
        ("PromptTooLongError: the request could not be served", True),
        ("InputTooLongException raised by the worker", True),
        # a code in square brackets (xAI)
        ("Failed to start sampling: [input_too_large] Current message exceeds budget", True),
        ("Failed to start sampling: [rate_limit_exceeded] try again later", False),
        ("[image_too_large] the image exceeds the maximum", False),
        # an output limit, a quota, an image, a rate: never
        ("MaxTokensExceededError: too many", False),
        ("OutputLengthExceededError raised", False),
        ("TokenLimitExceededError: your token quota is spent", False),
        ("ImageTooLargeError raised", False),
        ("RateLimitExceededException raised", False),
    ],
)
def test_an_exception_name_is_read_as_a_code(message: str, overflow: bool) -> None:
    body = orjson.dumps({"error": {"message": message}})
    assert (detect_overflow(400, body, wire_format="openai") is not None) is overflow


def test_parts_that_add_up_to_less_than_their_count_name_some_of_it() -> None:
    # selfware's mock of OpenAI: "(including 200 in the functions)" is not the prompt
    message = (
        "This model's maximum context length is 8192 tokens. However, your messages resulted"
        " in 9000 tokens (including 200 in the functions). Please reduce the length of the"
        " messages or functions."
    )
    got = detect_overflow(400, _error_body(message), wire_format="openai")
    assert got is not None and (got.real, got.maximum) == (9000, 8192)
    requested = "This model's maximum context length is 8192 tokens. However, you requested"
    for parts, real, maximum in (
        ("(including 200 in the functions)", 9000, 8192),
        ("(including 1000 in the completion)", 8000, 7192),
        ("(8800 in the messages, 200 in the functions)", 9000, 8192),
    ):
        body = _error_body(f"{requested} 9000 tokens {parts}.")
        got = detect_overflow(400, body, wire_format="openai")
        assert got is not None and (got.real, got.maximum) == (real, maximum), parts


def test_litert_lms_wording_is_read_whatever_advice_follows() -> None:
    # OlliteRT appends advice that names tool schemas, Max Tokens and response quality
    said = (
        "Error: Input token ids are too long. Exceeding the maximum number of tokens allowed:"
        " 4467 >= 4000"
    )
    for advice in (
        "",
        " — Try increasing Max Tokens in the model's Inference Settings within OlliteRT. If"
        " the model doesn't support a larger context window, you can enable prompt compaction"
        " (Truncate History, Compact Tool Schemas, or Trim Prompt) in OlliteRT Settings as a"
        " fallback, though this may reduce response quality.",
        " — Try enabling prompt compaction (Truncate History, Compact Tool Schemas, or Trim"
        " Prompt) in OlliteRT Settings, or send shorter prompts.",
    ):
        body = orjson.dumps({"error": {"message": said + advice, "type": "server_error"}})
        assert detect_overflow(400, body, wire_format="openai") == Overflow(4467, 4000), advice
        event = b"data: " + body + b"\n\n"
        assert detect_stream_overflow(event, wire_format="openai") == Overflow(4467, 4000)


def test_lobehubs_envelope_is_read_by_its_upstreams_error() -> None:
    # LobeHub's {"body": {"error": <upstream>, "message": ...}, "errorType": ...}: the
    # upstream's words decide, its counts with them, whatever LobeHub classed it as
    def lobehub(error: dict[str, Any], kind: str) -> bytes:
        body = {"error": error, "endpoint": "https://api.openai.com/v1", "provider": "openai"}
        return orjson.dumps({"body": body, "errorType": kind})

    said = (
        "This model's maximum context length is 128000 tokens. However, your messages"
        " resulted in 139824 tokens. Please reduce the length of the messages."
    )
    window = lobehub({"message": said, "code": "context_length_exceeded"}, "ExceededContextWindow")
    got = detect_overflow(400, window, wire_format="openai")
    assert got is not None and (got.real, got.maximum) == (139824, 128000)
    string = (
        "Invalid 'messages[3].content': string too long. Expected a string with maximum"
        " length 10485760, but got a string with length 11534336 instead."
    )
    capped = lobehub(
        {"message": string, "code": "string_above_max_length"}, "ExceededContextWindow"
    )
    assert detect_overflow(400, capped, wire_format="openai") is None
    preflight = (
        "Prompt tokens (203950) leave less than 1024 tokens for completion within the model"
        ' context window (204800) for model "MiniMax-M2". Reduce input or attached tools.'
    )
    got = detect_overflow(
        400, lobehub({"message": preflight}, "ExceededContextWindow"), wire_format="openai"
    )
    assert got == Overflow(203950, 203776)
    # (only a body that holds an error is LobeHub's)
    other = {"errorType": "ValidationError", "body": {"message": "Input exceeds max length"}}
    assert detect_overflow(500, orjson.dumps(other), wire_format="openai") is None


def test_a_gateways_kind_and_its_404_state_an_overflow() -> None:
    # SI-LLM-Gateway's 503: "kind" classes the failure (an overflow's code reads under
    # any 503, as it did before a 503's words were read)
    gateway = {
        "code": "model_not_found",
        "kind": "context_length_exceeded",
        "retryable": False,
        "message": "No available provider for model 'qwen3-32b'. All 2 candidates failed.",
        "type": "server_error",
    }
    body = orjson.dumps({"error": gateway})
    assert detect_overflow(503, body, wire_format="openai") == Overflow(None, None)
    body = orjson.dumps({"error": {**gateway, "kind": "rate_limit"}})
    assert detect_overflow(503, body, wire_format="openai") is None

    # ... and its candidates' own words under gateway_debug decide: their counts, or that
    # no prompt fits (vLLM's max_tokens alone over the window)
    def attempted(said: str) -> bytes:
        reason = orjson.dumps({"object": "error", "message": said}).decode()
        debug = {"attempts": [{"kind": "context_length_exceeded", "reason": reason}]}
        return orjson.dumps({"error": {**gateway, "gateway_debug": debug}})

    over = (
        "This model's maximum context length is 32768 tokens. However, your messages"
        " resulted in 33072 tokens."
    )
    got = detect_overflow(503, attempted(over), wire_format="openai")
    assert got is not None and (got.real, got.maximum) == (33072, 32768)
    output = (
        "'max_tokens' or 'max_completion_tokens' is too large: 40000. This model's maximum"
        " context length is 32768 tokens and your request has 120 input tokens"
        " (40000 > 32768 - 120)."
    )
    assert detect_overflow(503, attempted(output), wire_format="openai") is None
    # "retryable": false is no word of waiting, true is
    sure: dict[str, Any] = {"message": "context window exceeded", "retryable": False}
    assert detect_overflow(503, orjson.dumps({"error": sure}), wire_format="openai")
    sure["retryable"] = True
    assert detect_overflow(503, orjson.dumps({"error": sure}), wire_format="openai") is None
    sure = {"message": "context window exceeded", "nonRetryable": False}
    assert detect_overflow(503, orjson.dumps({"error": sure}), wire_format="openai") is None
    # Kilo's gateway writes its estimate over the upstream's status, a 404 among them
    said = (
        "The maximum context length is 202800 tokens. However, about 236415 tokens were requested."
    )
    kilo = orjson.dumps({"error": said, "message": said})
    assert detect_overflow(404, kilo, wire_format="openai") == Overflow(236415, 202800)
    under = said.replace("236415", "2364")
    assert detect_overflow(404, orjson.dumps({"error": under}), wire_format="openai") is None
    # (a total itemised with the output reservation is no prompt's count)
    parts = (
        "This model's maximum context length is 8192 tokens. However, you requested 9000"
        " tokens (7000 in the messages, 2000 in the completion)."
    )
    assert detect_overflow(429, _error_body(parts), wire_format="openai") is None


def test_more_servers_wordings_and_a_full_kv_cache() -> None:
    icn = (
        "prompt (9000 tokens) leaves no generation capacity in the effective per-sequence"
        " context (8192)"
    )
    body = orjson.dumps({"error": {"message": icn, "code": "invalid_request", "retryable": False}})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(9000, 8192)
    # llama-box sends this to every slot in flight when its KV cache fills: a 4xx only
    # would mean this prompt
    full = _error_body(
        "decoding exceeds the available context size. try increasing the context size."
    )
    assert detect_overflow(500, full, wire_format="openai") is None
    assert detect_overflow(400, full, wire_format="openai") == Overflow(None, None)
    # a cap in characters names no window, singular or plural
    chars = "Input is too long: exceeds the character limit of 100000"
    got = detect_overflow(400, _error_body(chars), wire_format="openai")
    assert got is None or got.maximum is None
    # Qianfan v2's cap on the whole input, in characters: no count to trim by
    qianfan = {"code": "invalid_argument", "message": "input characters limit is 256000"}
    got = detect_overflow(400, orjson.dumps({"error": qianfan}), wire_format="openai")
    assert got == Overflow(None, None)
    # Xinference's qwen-omni wants room for audio; LLMPlayer refuses a prompt at the window
    omni = (
        "Prompt leaves 1 output token(s) within context_length 8192; audio generation needs"
        " at least 2 thinker tokens."
    )
    read = detect_overflow(400, _error_body(omni), wire_format="anthropic")
    assert read is not None and (read.real, read.maximum, read.whole) == (None, 8192, True)
    at = "Error: prompt too long (8191 tokens, max 8191)"
    usage = {"prompt_tokens": 8191, "completion_tokens": 0, "total_tokens": 8191}
    read = detect_overflow(200, _whole_reply(at, "stop", usage), wire_format="openai")
    assert read is not None and (read.real, read.maximum) == (8191, 8191)
    # a Tinker proxy's Anthropic sentence names the window, and refuses a prompt near it
    near = "prompt is too long: 32741 tokens > 32768 context window"
    read = detect_overflow(400, _error_body(near), wire_format="anthropic")
    assert read is not None and (read.real, read.maximum, read.whole) == (32741, 32768, True)
    # hf2q: a budget no slot can ever hold is an overflow, the budget slots share a wait
    never = (
        "Request can never fit the physical KV cache budget (needed_bytes=6442450944,"
        " budget_bytes=4294967296): prompt + max_tokens exceeds what a slot can ever hold."
    )
    assert detect_overflow(400, _error_body(never), wire_format="openai") == Overflow(None, None)
    shared = (
        "Shared physical KV cache budget exceeded (needed_bytes=2147483648,"
        " budget_bytes=8589934592): reduce max_tokens or shorten the prompt."
    )
    assert detect_overflow(429, _error_body(shared), wire_format="openai") is None


def test_geminis_sentence_with_an_empty_count_keeps_its_window() -> None:
    said = "The input token count () exceeds the maximum number of tokens allowed (131072)."
    body = orjson.dumps({"error": {"code": 400, "message": said, "status": "INVALID_ARGUMENT"}})
    assert detect_overflow(400, body, wire_format="gemini") == Overflow(None, 131072)


def test_a_failed_jobs_record_with_streamed_output_is_no_refusal() -> None:
    # cog-vllm fails a Replicate prediction with E1002 once a length stop follows output
    job = {
        "output": ["Based", " on", " the"],
        "error": "E1002 PromptTooLong: Prompt length exceeds maximum input length",
        "status": "failed",
    }
    assert detect_overflow(200, orjson.dumps(job), wire_format="openai") is None
    refused = orjson.dumps({**job, "output": []})
    assert detect_overflow(200, refused, wire_format="openai") == Overflow(None, None)
    # (only a failed job's record: an error beside some other "output" list is read)
    other = {"error": {"message": job["error"]}, "output": ["req-1"]}
    assert detect_overflow(400, orjson.dumps(other), wire_format="openai") == Overflow(None, None)


def test_a_status_envelopes_nested_upstream_answer_is_read() -> None:
    # a relay that unwraps OpenRouter's error object: its message, code and metadata
    raw = orjson.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 217779 tokens > 200000 maximum",
            },
        }
    ).decode()
    body = {"message": "Provider returned error", "code": 400, "metadata": {"raw": raw}}
    got = detect_overflow(400, orjson.dumps(body), wire_format="openai")
    assert got is not None and (got.real, got.maximum) == (217779, 200000)
    rate = {"message": "Provider returned error", "code": 429, "metadata": {"raw": "slow down"}}
    assert detect_overflow(400, orjson.dumps(rate), wire_format="openai") is None


def test_a_code_naming_max_tokens_is_an_output_limit() -> None:
    body = orjson.dumps({"error": {"message": "m", "code": "max_tokens_exceeded"}})
    assert detect_overflow(400, body, wire_format="openai") is None


def test_only_firsts_own_error_chunk_is_read_as_an_error() -> None:
    # Argonne's FIRST streams an upstream's error as the text of a chunk of its own id; a
    # model's chunk saying the same, or FIRST's id with a model's words, is an answer
    vllm = (
        '{"object":"error","message":"This model\'s maximum context length is 4096 tokens. '
        'However, you requested 5000 tokens (4900 in the messages, 100 in the completion).",'
        '"code":400}'
    )

    def chunk(ident: str, text: str) -> bytes:
        delta = {"role": "assistant", "content": text}
        choice = {"index": 0, "delta": delta, "finish_reason": "stop"}
        body = {"id": ident, "object": "chat.completion.chunk", "choices": [choice]}
        return b"data: " + orjson.dumps(body) + b"\n\ndata: [DONE]\n\n"

    error = "\n\n[ERROR] Error: could not send stream API call: " + vllm
    got = detect_stream_overflow(chunk("chatcmpl-api-error", error), wire_format="openai")
    assert got == Overflow(4900, 3996)
    assert detect_stream_overflow(chunk("chatcmpl-1", error), wire_format="openai") is None
    text = "Here is the answer: " + vllm
    assert detect_stream_overflow(chunk("chatcmpl-api-error", text), wire_format="openai") is None


@pytest.mark.parametrize(
    ("status", "message", "worded"),
    [
        (400, "Text too long", True),  # a size subject beside an excess
        (400, "Request contains an invalid argument.", False),
        (422, "No suitable variant found for model 'q' with required context size 118734", False),
        (500, "Request contains an invalid argument.", None),  # passing trouble, maybe
        (400, "max_tokens must be at most 4096", None),  # what a trim cannot fix
        # the window named beside an output setting: which of the two is over, the probe
        # tells (a prompt padded past the window, or a max_tokens no prompt fits with)
        (
            400,
            "Could not add request: prompt length is 31950 tokens, which gets rounded to 32000"
            " tokens, maximum number of output tokens is 800 tokens, but max model context"
            " length is 32768.",
            False,
        ),
        (400, "max_tokens=140000 cannot be greater than max_model_len=131072.", False),
        # ... but not beside a byte or media limit, nor an output limit with no window
        (400, "image of 6 MB and max_tokens exceed the context window", None),
        (422, "`max_new_tokens` must be <= 192. Given: 2048", None),
        (400, "Invalid image: unsupported format", None),
        (400, "You exceeded your current quota", None),
        # a rate limit named by its exception class (no spaces between the words)
        (400, "TokensPerMinuteExceededError: try again in 20s", None),
        (400, "RequestsPerDayLimitReached", None),
        (400, "TooManyRequestsException", None),
        (400, "PII detected in request", None),  # a privacy guard: no trim should pass it
        (500, "Request req_7 has n=32 which exceeds the maximum allowed 16", None),
        (429, "Request contains an invalid argument.", None),
    ],
)
def test_a_plain_client_error_is_a_suspect_only_when_asked_and_not_worded(
    status: int, message: str, worded: bool | None
) -> None:
    body = orjson.dumps({"error": {"message": message}})
    got = detect_suspect(status, body, plain=True)
    assert (got.worded if got is not None else None) is worded
    assert (detect_suspect(status, body) is not None) is bool(worded)


def test_an_error_written_as_text_into_a_stream_is_read() -> None:
    crane = b"data: error: Prompt length (33210) exceeds server max_seq_len (32768)\n\n"
    assert detect_stream_overflow(crane, wire_format="openai") == Overflow(33210, 32768)
    named = b"event: error\ndata: Prompt is too long\n\n"
    assert detect_stream_overflow(named, wire_format="openai") == Overflow(None, None)
    # text that is not named an error is read only in a listed wording (mistral.rs before
    # 0.9.2), never by the generic rule: a model's output comes as JSON
    raw = b"data: Prompt sequence length is greater than 4096, perhaps consider using `truncate"
    raw += b"_sequence`?\n\ndata: [DONE]\n\n"
    assert detect_stream_overflow(raw, wire_format="openai") == Overflow(None, 4096)
    said = b"data: Prompt length (33210) exceeds server max_seq_len (32768)\n\n"
    assert detect_stream_overflow(said, wire_format="openai") is None
    rate = b"data: error: rate limit reached, 60 requests per minute\n\n"
    assert detect_stream_overflow(rate, wire_format="openai") is None
    # only its first 4,096 characters are read, as any message's: a listed wording past
    # them, after a cut chunk's text, is not scanned for
    late = (
        b"data: " + "\u4e0a".encode() * 4100 + b" Prompt sequence length is greater than 4096\n\n"
    )
    assert detect_stream_overflow(late, wire_format="openai") is None
    assert detect_stream_overflow(late[:6] + late[-45:], wire_format="openai") is not None
    # an error object its server wrote without escaping the upstream's body inside it, which
    # no JSON reader parses (kiro-high-performance-proxy), read as an error written as text
    unescaped = (
        '{"error": "请求失败 [400]: {"message":"Input is too long.",'
        '"reason":"CONTENT_LENGTH_EXCEEDS_THRESHOLD"}"}'
    )
    framed = b"data: " + unescaped.encode() + b"\n\n"
    assert detect_stream_overflow(framed, wire_format="openai") == Overflow(None, None)
    quota = framed.replace(b"Input is too long.", b"Rate limit reached for requests")
    assert detect_stream_overflow(quota, wire_format="openai") is None
    cut = framed[: framed.index(b"long.") + 5] + b"\n\n"  # (cut short: not read)
    assert detect_stream_overflow(cut, wire_format="openai") is None


def test_a_stream_whose_lines_are_framed_twice_is_read_as_its_upstreams() -> None:
    # typingmind-proxy writes "data: " before each of its upstream's lines, its own
    # framing doubled and a comment framed as data: the upstream's events as they were
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    error = {"error": {"message": "prompt is too long: 208934 tokens > 200000 maximum"}}

    def doubled(*lines: bytes) -> bytes:
        return b"".join(b"data: " + line + b"\n\n\n\n" for line in lines)

    for opener in (b"data: " + orjson.dumps(role), b": keep-alive", b": OPENROUTER PROCESSING"):
        stream = doubled(opener, b"data: " + orjson.dumps(error))
        assert detect_stream_overflow(stream, wire_format="openai") == Overflow(208934, 200000)
    # the upstream's output so framed is output: an error after it is not read
    said = {"choices": [{"index": 0, "delta": {"content": "Hello"}}]}
    stream = doubled(b"data: " + orjson.dumps(said), b"data: " + orjson.dumps(error))
    assert detect_stream_overflow(stream, wire_format="openai") is None


def test_a_typed_error_event_without_an_error_key_is_read() -> None:
    # eurouter relays vLLM's refusal as {"message", "type": "stream_error", "code"}
    vllm = (
        "400 This model's maximum context length is 262144 tokens. However, you requested "
        "65539 output tokens and your prompt contains at least 196606 input tokens"
    )
    event = {"message": vllm, "type": "stream_error", "code": "BAD_REQUEST"}
    sse = b"data: " + orjson.dumps(event) + b"\n\n"
    assert detect_stream_overflow(sse, wire_format="openai") == Overflow(196606, 196605)
    # a type that ends in "error" but carries no message of its own is not an error event,
    # nor is a chunk typed otherwise that quotes the words
    for doc in ({"type": "stream_error", "text": vllm}, {"type": "delta", "message": vllm}):
        sse = b"data: " + orjson.dumps(doc) + b"\n\n"
        assert detect_stream_overflow(sse, wire_format="openai") is None, doc


def test_a_cause_beside_a_summary_is_read() -> None:
    # lightspeed-stack: {"detail": {"response": <a summary>, "cause": <the reason>}}
    detail = {
        "response": "Context window exceeded",
        "cause": "The input exceeds the context window size of model 'gpt-4o-mini'.",
    }
    body = orjson.dumps({"detail": detail})
    assert detect_overflow(413, body, wire_format="openai-responses") == Overflow(None, None)
    detail["cause"] = "The token quota for model gpt-4o-mini has been exceeded."
    detail["response"] = "The model quota has been exceeded"
    body = orjson.dumps({"detail": detail})
    assert detect_overflow(413, body, wire_format="openai-responses") is None


def test_an_error_bodys_sentences_under_unnamed_keys_are_read() -> None:
    # no key any reader names holds a message: the body's other sentences are read
    body = orjson.dumps({"detail": {"summary": "Request failed", "note": "Prompt is too long"}})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(None, None)
    # ... but never what echoes the request (a validation error's offending value), nor
    # a success body's, nor when a named key holds the message
    for doc, status in (
        ({"detail": [{"loc": ["body", "messages"], "input": "Prompt is too long"}]}, 422),
        ({"result": {"text": "Prompt is too long"}}, 200),
        ({"message": "Invalid role", "note": "Prompt is too long"}, 400),
    ):
        assert detect_overflow(status, orjson.dumps(doc), wire_format="openai") is None, doc


def test_only_an_answers_first_4096_characters_of_messages_are_read() -> None:
    # the readers' cost grows with what they scan: a message quoting a whole prompt is
    # read for its start, where every known wording sits
    quoted = " context token" * 4000  # 56 KB, inside the 64 KiB an answer may be read to
    first, last = "Prompt is too long." + quoted, quoted + " Prompt is too long."
    assert detect_overflow(400, _error_body(first), wire_format="openai") is not None
    assert detect_overflow(400, _error_body(last), wire_format="openai") is None
    # the room is the answer's, not each message's
    body = orjson.dumps({"error": {"message": quoted, "details": "Prompt is too long."}})
    assert detect_overflow(400, body, wire_format="openai") is None


def test_a_stream_event_holding_only_a_detail_is_an_error() -> None:
    # FastAPI's {"detail": ...} written into the stream it opened (Refact's chat)
    said = "error limiting messages: the messages exceed the allowed token budget"
    sse = b"data: " + orjson.dumps({"detail": said}) + b"\n\n"
    assert detect_stream_overflow(sse, wire_format="openai") == Overflow(None, None)
    # beside anything else it is not the event's whole, and no error
    other = {"detail": said, "choices": [{"index": 0, "delta": {"content": "ok"}}]}
    sse = b"data: " + orjson.dumps(other) + b"\n\n"
    assert detect_stream_overflow(sse, wire_format="openai") is None


def test_an_http_exception_returned_as_a_200_body_is_read_as_its_status() -> None:
    # gallama returns FastAPI's HTTPException rather than raising it: the client gets 200
    said = "Token length exceeds max length of 32768"
    returned = {"status_code": 400, "detail": said, "headers": None}
    assert detect_overflow(200, orjson.dumps(returned), wire_format="openai") == Overflow(
        None, 32768
    )
    # not with a success status in it, nor beside other fields (an answer's own "detail")
    for doc in (
        {**returned, "status_code": 200},
        {**returned, "choices": [{"index": 0, "message": {"content": said}}]},
        {"status_code": 400, "detail": {"msg": said}},
    ):
        assert detect_overflow(200, orjson.dumps(doc), wire_format="openai") is None


def test_a_response_returned_as_data_in_a_200_body_is_read_as_its_status() -> None:
    # openchat's length check returns (token ids, JSONResponse): FastAPI serialises both
    said = (
        "This model's maximum context length is 8192 tokens. However, you requested 8300"
        " tokens (300 in the messages, 8000 in the completion). Please reduce the length of"
        " the messages or completion."
    )
    inner = {"object": "error", "message": said, "type": "invalid_request_error", "code": None}
    returned = {
        "status_code": 400,
        "background": None,
        "body": json.dumps(inner),
        "raw_headers": [["content-type", "application/json"]],
    }
    body = orjson.dumps([[1, 30996, 7016], returned])
    assert detect_overflow(200, body, wire_format="openai") == Overflow(300, 192)
    # ... also with the media type a response built with one carries
    typed = {**returned, "media_type": "application/json"}
    assert detect_overflow(200, orjson.dumps(typed), wire_format="openai") == Overflow(300, 192)
    # not with a success status (or one written as a string), beside an answer's fields,
    # without the headers a serialised response carries, or with a body that says nothing
    headless = {key: value for key, value in returned.items() if key != "raw_headers"}
    for doc in (
        {**returned, "status_code": 200},
        {**returned, "status_code": "400"},
        {**returned, "choices": [{"index": 0, "message": {"content": said}}]},
        headless,
        {**returned, "body": ""},
    ):
        body = orjson.dumps([[1, 30996, 7016], doc])
        assert detect_overflow(200, body, wire_format="openai") is None, doc


def test_watsonx_errors_are_read_in_a_stream_under_the_status_they_name() -> None:
    # IBM watsonx writes its error object as a chat stream's chunk, beside "choices": []
    said = (
        "Invalid input argument for Model 'ibm/granite-4-h-small': This model's maximum"
        " context length is 131072 tokens. However, your request has 600039 input tokens."
    )
    chunk = {
        "errors": [{"code": "invalid_input_argument", "message": said, "more_info": "x"}],
        "trace": "903ff69ef8dc748c20d94f77c5810bf1",
        "status_code": 400,
        "choices": [],
    }
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") == Overflow(600039, 131072)
    # not under a success status, nor beside an answer (a list of "errors" alone is a
    # GraphQL-like body's too)
    answer = [{"index": 0, "delta": {"content": said}}]
    for doc in (
        {**chunk, "status_code": 200},
        {**chunk, "status_code": 600},
        {**chunk, "choices": answer},
        {**chunk, "data": {"chat": {"reply": "Here is the summary"}}},
        {**chunk, "errors": [{"code": "invalid_input_argument"}]},
        {key: value for key, value in chunk.items() if key != "status_code"},
    ):
        assert detect_stream_overflow(_sse(doc), wire_format="openai") is None, doc


def test_an_errors_explanation_is_read_and_words_said_twice_count_once() -> None:
    # Zylon PrivateGPT streams its refusal as an error event whose message is only "Request
    # Too Large" (as a body-size limit's is); its detail explains it
    said = "The message length 9412 exceeds the maximum token limit 7680."
    event: dict[str, Any] = {
        "type": "error",
        "error": {
            "type": "request_too_large",
            "message": "Request Too Large",
            "detail": {"code": "REQUEST_TOO_LARGE_USER_MSG_ERROR", "explanation": said},
        },
        "request_id": None,
        "exception": {"type": "RequestTooLarge", "message": said},
    }
    body = b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"
    assert detect_stream_overflow(body, wire_format="anthropic") == Overflow(9412, 7680)
    sized = {**event["error"], "detail": {"explanation": "Request body exceeds 10 MB."}}
    assert detect_overflow(413, orjson.dumps({"error": sized}), wire_format="anthropic") is None
    # the whole body says it again beside its detail: the probe's counts are read once
    whole = orjson.dumps({**event, "detail": said})
    suspect = detect_suspect(400, whole)
    assert suspect is not None and suspect.numbers == (9412, 7680)


def test_an_answer_stopped_at_length_before_any_output_is_an_unspent_stop() -> None:
    # mlx-omnia gives a prompt that fills the window a zero budget: an opener, then this
    # chunk; InfiniLM's whole answer so (a request with no output limit: the caller's)
    choice: dict[str, Any] = {"index": 0, "delta": {}, "finish_reason": "length"}
    stop: dict[str, Any] = {"id": "c1", "choices": [choice]}
    assert detect_unspent_stop(_sse(stop)) == Overflow(None, None)
    assert detect_unspent_stop(b"event: chunk\r\n" + _sse(stop)[:-2] + b"\r\n\r\n")
    message = {"role": "assistant", "content": ""}
    whole: dict[str, Any] = {
        "choices": [{"index": 0, "message": message, "finish_reason": "length"}]
    }
    usage: dict[str, Any] = {"prompt_tokens": 4389, "completion_tokens": 0, "total_tokens": 4389}
    docs: tuple[Any, ...] = (whole, {**whole, "usage": usage}, {**stop, "usage": None})
    for doc in docs:
        assert detect_unspent_stop(orjson.dumps(doc)) == Overflow(None, None), doc
    # anything written, or counted as written, or another stop, or no single choice
    for said in (
        {**choice, "delta": {"content": "partial"}},
        {**choice, "delta": {"reasoning_content": "hm"}},
        {**choice, "delta": {"tool_calls": [{"index": 0, "id": "t"}]}},
        {**choice, "text": "partial"},
        {**choice, "finish_reason": "stop"},
        # a field no reader knows, holding something, is output too
        {**choice, "delta": {"role": "assistant", "reasoning_details": [{"type": "x"}]}},
    ):
        assert detect_unspent_stop(_sse({**stop, "choices": [said]})) is None, said
    docs = (
        {**whole, "usage": {**usage, "completion_tokens": 412}},  # hidden reasoning, counted
        {**whole, "usage": "n/a"},
        {**stop, "choices": [choice, {**choice, "index": 1}]},
        {**stop, "choices": []},
        {**stop, "error": {"message": "x"}},
        [stop],
    )
    for doc in docs:
        assert detect_unspent_stop(orjson.dumps(doc)) is None, doc
    for raw in (b"", b"data: [DONE]\n\n", b'data: {"finish_reason": "length"', b": length"):
        assert detect_unspent_stop(raw) is None, raw
    # LMDeploy's interactive session counts the history it keeps: not the request's
    kept = {"prompt_tokens": 23, "total_tokens": 8223, "completion_tokens": 0}
    assert detect_unspent_stop(orjson.dumps({**whole, "usage": kept})) is None
    # one token counted with nothing written (RKLLM's floor, the token Ollama's full window
    # left) is unspent too; two, or one beside a larger total, is not
    one = {"prompt_tokens": 4095, "completion_tokens": 1, "total_tokens": 4096}
    assert detect_unspent_stop(orjson.dumps({**whole, "usage": one})) == Overflow(None, None)
    untotalled = {"prompt_tokens": 4095, "completion_tokens": 1}
    assert detect_unspent_stop(orjson.dumps({**whole, "usage": untotalled}))
    for spent in (
        {**one, "completion_tokens": 2, "total_tokens": 4097},
        {**one, "total_tokens": 4200},
        {**one, "completion_tokens": 1.0},
        {"completion_tokens": 1},
    ):
        assert detect_unspent_stop(orjson.dumps({**whole, "usage": spent})) is None, spent
    # a stream's usage, in a chunk of its own after the stop (OpenAI's) or Groq's x_groq
    counted = {"prompt_tokens": 4000, "completion_tokens": 512, "total_tokens": 4512}
    for doc, said_usage in (
        ({"choices": [], "usage": counted}, False),
        ({"choices": [], "usage": {**counted, "completion_tokens": 0, "total_tokens": 4000}}, True),
        ({"choices": [], "x_groq": {"usage": counted}}, False),
        ({**stop, "usage": None}, None),
    ):
        assert unspent_usage(_sse(doc)) is said_usage, doc
    assert unspent_usage(b"data: [DONE]\n\n") is None and unspent_usage(b"") is None


def test_a_reply_that_is_the_sdks_exception_is_read_as_the_error_it_relays() -> None:
    # RAGFlow and MaxKB answer their model's refusal as a completion of their own
    inner = (
        "Error code: 400 - {'object': 'error', 'message': \"This model's maximum context "
        "length is 16384 tokens. However, you requested 16463 tokens (14415 in the "
        "messages, 2048 in the completion).\", 'type': 'BadRequestError', 'code': 400}"
    )

    def completion(text: str) -> bytes:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        return orjson.dumps({"object": "chat.completion", "choices": [choice]})

    for prefix in ("**ERROR**: INVALID_REQUEST - ", "Exception:", ""):
        got = detect_overflow(200, completion(prefix + inner), wire_format="openai")
        assert got == Overflow(14415, 14336), prefix
    # ... also where the relayed body names no "error" (SiliconFlow's flat envelope)
    flat = (
        "**ERROR**: INVALID_REQUEST - Error code: 400 - {'code': 20015, 'message': 'length "
        "of prompt_tokens (70462) must be less than max_seq_len (65536).', 'data': None}"
    )
    got = detect_overflow(200, completion(flat), wire_format="openai")
    assert got == Overflow(70462, 65536)
    # a reply that introduces the exception, or goes on after it, explains it
    for text in (
        flat + ", which means your prompt was too long.",
        flat + '\n\nTry {"max_tokens": 512}',
        inner + "\n\nThis means the conversation outgrew the model's window.",
        inner + "\n\nsee [1]",
        "I got this from the API: " + flat,
        "The API returned: " + flat.split(" - ", 1)[1],
        "Sure! " + flat,
    ):
        assert detect_overflow(200, completion(text), wire_format="openai") is None, text
    # a reply that quotes it after words of its own, or relays a rate limit, is a reply
    quoted = "Here is the error you pasted:\n\n" + inner
    assert detect_overflow(200, completion(quoted), wire_format="openai") is None
    limit = "Exception:Error code: 429 - {'error': {'message': 'Rate limit reached'}}"
    assert detect_overflow(200, completion(limit), wire_format="openai") is None


def test_an_engine_status_as_the_reply_is_read_only_where_no_model_wrote_it() -> None:
    # LMDeploy 0.10-0.15 answers its engine's refusal as a completion of its own
    said = "internal error happened, status code ResponseType.INPUT_LENGTH_ERROR"

    def completion(text: str, reason: str, key: str = "content", chunk: bool = False) -> bytes:
        reply = {"role": "assistant", "content": None, key: text}
        choice = {"index": 0, "delta" if chunk else "message": reply, "finish_reason": reason}
        return orjson.dumps({"choices": [choice]})

    def message(text: str, output_tokens: int, kind: str = "text") -> bytes:
        usage = {"input_tokens": 34120, "output_tokens": output_tokens}
        content = [{"type": kind, kind: text}]
        return orjson.dumps({"type": "message", "content": content, "usage": usage})

    def response(text: str, status: str) -> bytes:
        generic = {"code": "server_error", "message": "Response generation failed."}
        part = {"type": "output_text", "text": text}
        item = {"type": "message", "role": "assistant", "content": [part]}
        doc = {"object": "response", "status": status, "error": generic, "output": [item]}
        return orjson.dumps(doc)

    def read(body: bytes, wire_format: str = "openai") -> Overflow | None:
        return detect_overflow(200, body, wire_format=wire_format)

    assert read(completion(said, "error")) == Overflow(None, None)
    # (a reasoning parser that found no closing think tag moves the words aside)
    assert read(completion(said, "error", "reasoning_content")) == Overflow(None, None)
    assert read(completion(said, "error", chunk=True)) == Overflow(None, None)
    assert read(message(said, 0), "anthropic") == Overflow(None, None)
    assert read(message(said, 0, "thinking"), "anthropic") == Overflow(None, None)
    assert read(response(said, "failed"), "openai-responses") == Overflow(None, None)
    failed = orjson.loads(response("", "failed"))
    failed["output_text"] = said
    assert read(orjson.dumps(failed), "openai-responses") == Overflow(None, None)
    # the same words as a model's reply (a reason of its own, output written, a response
    # that completed), another engine status, or words around them: a reply
    assert read(completion(said, "stop")) is None
    assert read(message(said, 12), "anthropic") is None
    assert read(response(said, "completed"), "openai-responses") is None
    assert read(response("Paris.", "failed"), "openai-responses") is None
    assert read(completion(said.replace("INPUT_LENGTH", "INTERNAL_ENGINE"), "error")) is None
    assert read(completion("It said: " + said, "error")) is None


def _whole_reply(text: str, finish: str = "stop", usage: Any = None) -> bytes:
    """A chat completion whose whole reply is ``text``, with ``usage`` if given."""
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "finish_reason": finish}
    doc: dict[str, Any] = {"object": "chat.completion", "choices": [choice]}
    if usage is not None:
        doc["usage"] = usage
    return orjson.dumps(doc)


def _messages_reply(text: str, stop: str, usage: dict[str, int]) -> dict[str, Any]:
    """An Anthropic message whose one text block is ``text``."""
    block = {"type": "text", "text": text}
    return {
        "type": "message",
        "role": "assistant",
        "content": [block],
        "stop_reason": stop,
        "usage": usage,
    }


def _reply_chunks(text: str, finish: str = "stop") -> bytes:
    """A chat stream that writes ``text`` in one chunk, then finishes in the next."""
    first = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    return _sse(first, last) + b"data: [DONE]\n\n"


def test_an_on_device_servers_refusal_as_the_whole_reply_is_read() -> None:
    # servers over Apple's on-device model write its refusal as the reply, finished "stop"
    # (afm-server as "Error: <description>", maclocal-api its own notice with the counts)
    notice = (
        "\u26a0\ufe0f **Context window exceeded**\n\nYour conversation has 4215 tokens but "
        "the maximum is 4096.\n\nPlease start a new conversation or reduce the message length."
    )

    def reply(text: str) -> bytes:
        return _whole_reply(text, usage={"completion_tokens": 10})

    chunks = _reply_chunks

    def read(body: bytes) -> Overflow | None:
        return detect_overflow(200, body, wire_format="openai")

    said = "Error: Exceeded model context window size"
    assert read(reply(said)) == Overflow(None, None)
    assert read(reply(notice)) == Overflow(4215, 4096)
    assert detect_stream_overflow(chunks(notice), wire_format="openai") == Overflow(4215, 4096)
    # Apple's counts by their names, the prompt often under the window that holds the output
    # (the retry then aims at 2/3), and maclocal-api's notice without them
    under = notice.replace("4215", "4089")
    assert read(reply(under)) == Overflow(4089, 4096)
    plain = (
        "\u26a0\ufe0f **Context window exceeded**\n\nThe conversation is too long. Apple "
        "Foundation Models has a 4096 token limit.\n\nPlease start a new conversation."
    )
    assert read(reply(plain)) is not None
    assert detect_stream_overflow(chunks(plain), wire_format="openai") is not None
    # words around them, or the notice's words in a reply of a model's own: a reply
    for text in (
        "It said: " + said,
        said + ". Try a shorter prompt.",
        "Context window exceeded: your conversation has 4215 tokens but the maximum is 4096.",
        notice + "\n\nIn short, start again.",
    ):
        assert read(reply(text)) is None, text
        assert detect_stream_overflow(chunks(text), wire_format="openai") is None, text


def test_an_empty_prompt_or_a_reservation_that_fills_the_window_is_no_overflow() -> None:
    def read(message: str) -> Overflow | None:
        return detect_overflow(422, _error_body(message), wire_format="openai")

    assert read("Messages token length must be in (0, 1048576], but got 0.") is None
    full = _error_body("\u274c Token limit exceeded: 4131 > 4096 (prompt: 35 + max: 4096)")
    assert detect_overflow(400, full, wire_format="openai") is None
    assert overflow.detect_unfixable(400, full)


def test_kuwas_refusals_as_the_whole_reply_are_read() -> None:
    # Kuwa GenAI OS answers its executors' refusals as the reply, finished "stop": its own
    # when no turn fits, and ollama-python's error as str(), "<message> (status code: N)"
    ollama = (
        "the prompt is longer than the context length currently available to the model; "
        "shorten the prompt, adjust the context length in settings, or use a model with a "
        "longer context length (status code: 400)"
    )

    def reply(text: str) -> bytes:
        return _whole_reply(text, usage=[])

    chunks = _reply_chunks

    refusal = "[Sorry, The input message is too long!]"
    for text in (refusal, ollama):
        assert detect_overflow(200, reply(text), wire_format="openai") == Overflow(None, None)
    assert detect_stream_overflow(chunks(refusal), wire_format="openai") is not None
    for text in (
        "model 'qwen2.5' not found (status code: 404)",  # not an overflow
        ollama + " Try a smaller model.",  # words after it: a reply
        "It said: [Sorry, The input message is too long!]",
    ):
        assert detect_overflow(200, reply(text), wire_format="openai") is None, text
        assert detect_stream_overflow(chunks(text), wire_format="openai") is None, text
    # ollama-python's form only where no model wrote it: a model's one-line reply that ends
    # so, output counted or streamed token by token, is a reply (the second review's)
    said = "fix: handle context length exceeded error from ollama (status code: 400)"
    counted = orjson.loads(reply(said))
    counted["usage"] = {"completion_tokens": 31}
    assert detect_overflow(200, orjson.dumps(counted), wire_format="openai") is None
    assert detect_stream_overflow(chunks(said), wire_format="openai") is None
    # ... and a refusal's words in the reasoning beside an answer are the model's
    thought = orjson.loads(reply("Paris."))
    thought["choices"][0]["message"]["reasoning_content"] = refusal
    assert detect_overflow(200, orjson.dumps(thought), wire_format="openai") is None


def test_an_error_objects_own_finish_reason_is_read_as_its_code() -> None:
    # DanyAPI relays DeepSeek web's hint error in a stream chunk: its finish reason names the
    # overflow where the message ("Content is too long") does not
    said = {"message": "Content is too long. Please shorten it and try again."}
    chunk = {"object": "chat.completion.chunk", "choices": []}
    over = {**chunk, "error": {**said, "finish_reason": "input_exceeds_limit"}}
    other = {**chunk, "error": {**said, "finish_reason": "error"}}
    assert detect_stream_overflow(_sse(over), wire_format="openai") == Overflow(None, None)
    assert detect_stream_overflow(_sse(other), wire_format="openai") is None


def test_robais_refusal_as_the_whole_reply_is_read_with_its_counts() -> None:
    # RobAI's research proxy refuses a prompt over 95% of the window as its reply, with
    # the counts it stated, finished "length"
    said = (
        "\u274c **Request Rejected: Token Limit Exceeded**\n\nYour request contains **245,310 "
        "tokens**, which exceeds the configured limit.\n\n**Limits:**\n- Your request: 245,310 "
        "tokens (102.2%)\n- Maximum allowed: 228,000 tokens (95%)\n- Model capacity: 240,000 "
        "tokens\n\n**Solution:** Please reduce the context size by:\n- Shortening your message"
        "\n- Removing older messages from the conversation history\n- Splitting into multiple "
        "smaller requests"
    )

    def reply(text: str) -> bytes:
        usage = {"prompt_tokens": 245310, "completion_tokens": 0, "total_tokens": 245310}
        return _whole_reply(text, "length", usage)

    def chunks(text: str) -> bytes:
        return _reply_chunks(text, "length")

    assert detect_overflow(200, reply(said), wire_format="openai") == Overflow(245310, 228000)
    assert detect_stream_overflow(chunks(said), wire_format="openai") == Overflow(245310, 228000)
    # a reply that quotes it and says more is a reply
    quoted = "The proxy answered:\n\n" + said
    assert detect_overflow(200, reply(quoted), wire_format="openai") is None
    assert detect_stream_overflow(chunks(said + "\n\nI can help."), wire_format="openai") is None


@pytest.mark.parametrize("status", [400, 500])
def test_a_servers_own_history_cut_that_cannot_fit_is_an_overflow(status: int) -> None:
    # node-llama-cpp's context shift (relayed as a 500 by the servers on it), and a server
    # that compacts the conversation itself: the newest turns alone do not fit
    for message in (
        "Failed to compress chat history for context shift due to a too long prompt or system "
        "message that cannot be compressed without affecting the generation quality. Consider "
        "increasing the context size or shortening the long prompt or system message.",
        "unable to compact conversation to the context window",
    ):
        got = detect_overflow(status, _error_body(message), wire_format="openai")
        assert got == Overflow(None, None), message
    for message in (
        "failed to compress the response: context deadline exceeded",  # a timeout
        "unable to truncate prompt: the tokenizer is not loaded",  # no window
        "cannot compress messages in the context of a tool call: invalid schema",  # a shape
        # a compaction that failed for a reason of its own (the first review's)
        "failed to compact conversation: context canceled",
        "cannot compress messages in the context of a streaming request",
        "Failed to compact conversation: context management is not enabled for this org",
        "Unable to truncate the prompt: the tokenizer's max length is not set",
    ):
        assert detect_overflow(status, _error_body(message), wire_format="openai") is None


def test_html_pages_are_never_read() -> None:
    page = (
        b"<html><body><h1>400 Bad Request</h1><p>This model's maximum context length is 10 "
        b"tokens. However, your messages resulted in 20 tokens.</p></body></html>"
    )
    assert detect_overflow(400, page, wire_format="openai") is None


def test_malformed_json_is_not_an_overflow() -> None:
    cut = (
        b'{"error":{"message":"This model\'s maximum context length is 4097 tokens. '
        b"However, your messages resulted in 4619 tok"
    )
    assert detect_overflow(400, cut, wire_format="openai") is None
    assert detect_stream_overflow(b"data: " + cut + b"\n\n", wire_format="openai") is None


def test_huge_body_is_not_an_overflow() -> None:
    message = "prompt is too long: 210000 tokens > 200000 maximum"
    small = orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )
    assert detect_overflow(400, small, wire_format="anthropic") == Overflow(210000, 200000)
    padding = "x" * MAX_BYTES
    huge = orjson.dumps(
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
            "pad": padding,
        }
    )
    assert len(huge) > MAX_BYTES
    assert detect_overflow(400, huge, wire_format="anthropic") is None


def test_only_the_first_64_kib_of_a_stream_are_read() -> None:
    event = (
        b'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"prompt is too long: 210000 tokens > 200000 maximum"}}\n\n'
    )
    tail = b": " + b"x" * MAX_BYTES + b"\n\n"
    assert detect_stream_overflow(event + tail, wire_format="anthropic") == Overflow(210000, 200000)
    assert detect_stream_overflow(tail + event, wire_format="anthropic") is None


def test_error_message_holding_json() -> None:
    inner = {
        "error": {
            "code": 400,
            "message": "The input token count (1200293) exceeds the maximum number of tokens "
            "allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    }
    once = {
        "error": {"message": orjson.dumps(inner).decode(), "code": 400, "status": "Bad Request"}
    }
    twice = {"error": {"message": "upstream said: " + orjson.dumps(once).decode()}}
    for body in (once, twice):
        got = detect_overflow(400, orjson.dumps(body), wire_format="gemini")
        assert got == Overflow(1200293, 1048576)


def test_nested_error_objects() -> None:
    body = {
        "error": {
            "type": "error",
            "sequence_number": 2,
            "error": {
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
            },
        }
    }
    got = detect_overflow(400, orjson.dumps(body), wire_format="openai-responses")
    assert got == Overflow(None, None)


def test_success_bodies_quoting_an_overflow_are_not_overflows() -> None:
    quote = "The API said: prompt is too long: 300000 tokens > 200000 maximum"
    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": quote}}],
    }
    assert detect_overflow(200, orjson.dumps(chat), wire_format="openai") is None
    anthropic = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": quote}],
    }
    assert detect_overflow(200, orjson.dumps(anthropic), wire_format="anthropic") is None
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": quote}}],
    }
    head = b"data: " + orjson.dumps(chunk) + b"\n\n"
    assert detect_stream_overflow(head, wire_format="openai") is None


def test_rate_limit_wording_wins_whatever_the_status() -> None:
    message = (
        "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 342389. "
        "The input or output tokens must be reduced in order to run successfully."
    )
    for status in (400, 413, 429, 200):
        assert detect_overflow(status, _error_body(message), wire_format="openai") is None
    # An overflow message with a rate-limit code is still a rate limit.
    body = orjson.dumps(
        {
            "error": {
                "message": "prompt is too long: 5 tokens > 4 maximum",
                "type": "rate_limit_error",
            }
        }
    )
    assert detect_overflow(400, body, wire_format="anthropic") is None


# (a 403, 404 or 429 with a listed wording that states both counts is one: the tests below)
@pytest.mark.parametrize("status", [401, 402, 529])
def test_statuses_that_are_never_overflows(status: int) -> None:
    body = _error_body("prompt is too long: 210000 tokens > 200000 maximum")
    assert detect_overflow(status, body, wire_format="anthropic") is None


def test_code_alone_is_an_overflow() -> None:
    body = orjson.dumps({"error": {"code": "context_length_exceeded", "message": "too long"}})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(None, None)


@pytest.mark.parametrize(
    "code",
    [
        "tokens_too_long",
        "model_max_prompt_tokens_exceeded",
        "ContextLengthExceeded",
        "InputTooLong",
        "PROMPT_TOKEN_LIMIT_EXCEEDED",
        "context-overflow",
        "https://example.invalid/errors/token-limit-exceeded",
    ],
)
def test_unlisted_codes_that_read_as_an_overflow(code: str) -> None:
    body = orjson.dumps({"error": {"code": code, "message": "Request rejected"}})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(None, None)


@pytest.mark.parametrize(
    "code",
    [
        "max_tokens_per_request",
        "token_quota_exceeded",
        "RateLimitExceeded.EndpointTPMExceeded",
        "request_too_large",
        "string_above_max_length",
        "output_tokens_exceeded",
        "max_completion_tokens_too_large",
        "image_input_too_large",
        "tool_schema_too_long",
        "daily_token_limit_exceeded",
        "budget_exceeded",
        "a very long sentence that a server put where a code goes, saying the context "
        "window was exceeded",
    ],
)
def test_codes_that_do_not_read_as_an_overflow(code: str) -> None:
    body = orjson.dumps({"error": {"code": code, "message": "Request rejected"}})
    assert detect_overflow(400, body, wire_format="openai") is None


def test_structured_counts_fill_in_a_bare_message() -> None:
    body = orjson.dumps(
        {
            "error": {
                "code": 400,
                "message": "request exceeds the available context size",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9,
                "n_ctx": 8,
            }
        }
    )
    assert detect_overflow(400, body, wire_format="openai") == Overflow(9, 8)


def test_context_size_exceeded_and_the_kv_wording_by_status() -> None:
    # llama.cpp's "Context size has been exceeded": a 4xx, or the 500 an over-large
    # request gets when its decode finds no room (also as a stream's first event)
    body = b'{"error": "Context size has been exceeded."}'
    assert detect_overflow(400, body, wire_format="openai") == Overflow(None, None)
    assert detect_overflow(500, body, wire_format="openai") == Overflow(None, None)
    assert detect_overflow(504, body, wire_format="openai") is None
    event = (
        b'data: {"error":{"code":500,"message":"Context size has been exceeded.",'
        b'"type":"server_error"}}\n\n'
    )
    assert detect_stream_overflow(event, wire_format="openai") == Overflow(None, None)
    # its "no KV slot" wording means the prompt on a 4xx only: a 500 when the shared
    # pool is full, whoever filled it
    kv = (
        b'{"error":{"message":"input prompt is too big compared to KV size.'
        b' please increase KV size"}}'
    )
    assert detect_overflow(400, kv, wire_format="openai") == Overflow(None, None)
    assert detect_overflow(500, kv, wire_format="openai") is None


def test_an_overflow_code_beside_an_output_setting_alone() -> None:
    # vllm-lite sends context_length_exceeded for a max_tokens over its generation ceiling
    ceiling = {
        "error": {
            "message": "max_tokens (1000000) exceeds the server's default generation ceiling "
            "(8192); no model context length is configured",
            "code": "context_length_exceeded",
        }
    }
    assert detect_overflow(400, orjson.dumps(ceiling), wire_format="openai") is None
    # ... and a message that names the prompt's side, or the room it leaves, keeps the
    # code's reading
    for message in (
        "max_tokens and the prompt exceed the model's window",
        "max_tokens exceeds the remaining context window (812 tokens left)",
    ):
        ceiling["error"]["message"] = message
        assert detect_overflow(400, orjson.dumps(ceiling), wire_format="openai") is not None
    # the code written into a router's text reads as the window exceeded
    router = (
        "Router error: All auto-routing models failed. Last error: CONTEXT_LENGTH_EXCEEDED: "
        "openrouter/meta-llama/llama-3.1-8b-instruct (max: 131072) (requested: 140512)"
    )
    assert detect_overflow(502, _error_body(router), wire_format="openai") is not None


@pytest.mark.parametrize(
    "lead",
    ["context length max tokens to", "prompt length", "context length <=", "exceeds", "tokens"],
)
@pytest.mark.parametrize("fill", [" ", "1", "1,"])
def test_a_long_run_after_a_reader_word_is_read_in_linear_time(lead: str, fill: str) -> None:
    # Two greedy quantifiers side by side over a run of blanks or digits tried every split
    # of it: 4 KiB of them held the event loop for minutes. A hang guard, not a timing
    # target: linear readers take milliseconds, the quadratic and cubic ones took seconds.
    message = lead + " " + fill * (4000 // len(fill)) + " x"
    body = orjson.dumps({"error": {"message": message}})
    started = time.monotonic()
    detect_overflow(400, body, wire_format="openai")
    overflow.detect_unfixable(400, body)
    detect_suspect(400, body, plain=True)
    assert time.monotonic() - started < 2.0


def test_qianfan_native_error_at_status_200() -> None:
    body = b'{"error_code":336103,"error_msg":"Prompt tokens too long"}'
    assert detect_overflow(200, body, wire_format="openai") == Overflow(None, None)
    # its other errors in the same shape are not overflows; nor is a success body
    quota = b'{"error_code":17,"error_msg":"Open api daily request limit reached"}'
    assert detect_overflow(200, quota, wire_format="openai") is None
    zero = b'{"error_code":0,"error_msg":"Prompt tokens too long"}'
    assert detect_overflow(200, zero, wire_format="openai") is None
    # without an "error_code", an "error_msg" is an error (Onyx's answer), unless empty
    onyx = (
        b'{"answer":"","message_id":1842,"error_msg":"Context window exceeded: Your input'
        b" is too long for the model to process. Your invoked model (gpt-4o) has a maximum"
        b' context size of 128000."}'
    )
    assert detect_overflow(200, onyx, wire_format="openai") == Overflow(None, 128000)
    for answered in (
        b'{"answer":"The context window is too long to read.","error_msg":""}',
        # beside an answer, an "error_msg" is a note on it
        b'{"answer":"Here is the summary","error_msg":"Context window exceeded while reading'
        b' document 3; it was skipped"}',
    ):
        assert detect_overflow(200, answered, wire_format="openai") is None


def test_an_upstream_answer_a_gateway_failed_to_validate() -> None:
    # Vercel AI Gateway's stream error holds the upstream's error body, escaped, as the
    # value its schema turned down
    upstream = json.dumps(
        {
            "error": {
                "message": "This model's maximum context length is 40960 tokens. However,"
                " you requested 100 output tokens and your prompt contains at least 40861"
                " input tokens, for a total of at least 40961 tokens."
            }
        }
    )

    def event(value: object) -> bytes:
        error = {"code": "error", "message": "Stream error occurred", "value": value}
        chunk = {"object": "chat.completion.chunk", "error": error}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    wrapped = {"error_type": "validation_error", "error_message": upstream}
    assert detect_stream_overflow(event(wrapped), wire_format="openai") is not None
    # a value with no error message of its own says nothing
    reply = {"choices": [{"delta": {"content": "context length exceeded"}}]}
    assert detect_stream_overflow(event(reply), wire_format="openai") is None
    # a validation error's "value" is otherwise the request's own (express-validator)
    echo = {
        "errors": [
            {
                "value": [
                    "maximum context length is 8192 tokens. However, your messages "
                    "resulted in 9000 tokens."
                ],
                "msg": "Invalid value",
            }
        ]
    }
    assert detect_overflow(400, orjson.dumps(echo), wire_format="openai") is None


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Token sequence length is longer than the specified maximum sequence length for"
            " this model (1336 > 512).",
            Overflow(1336, 512),
        ),
        # two pairs, or a pair that is no excess: recognised, counts not guessed
        ("sequence length is longer than the maximum (1336 > 512) (20 > 10)", Overflow(None, None)),
        ("sequence length is longer than the maximum (512 > 1336)", Overflow(None, None)),
        # ... or "N/M"
        ("Exceeded max context: 9100/8192 tokens", Overflow(9100, 8192)),
        ("Exceeded max context: 8192/9100 tokens", Overflow(None, None)),
        # a limit and the count a request "needs"
        (
            "The model's context is limited to 8192 tokens; the request needs 9100.",
            Overflow(9100, 8192),
        ),
        # ... or the smaller count said to be all that is left
        ("9100 tokens requested but only 8192 available", Overflow(9100, 8192)),
        # ... or the limit by its name (EasyDeL's eSurge: the budget is the window less a reserve)
        (
            "Prompt too long: length=9120 > budget=7936 (model_max=8192, reserve=256).",
            Overflow(9120, 7936),
        ),
    ],
)
def test_counts_stated_as_one_pair(message: str, expected: Overflow) -> None:
    body = orjson.dumps({"error": {"message": message}})
    assert detect_overflow(400, body, wire_format="openai") == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # vLLM >= 0.8 (wording per earendil-works/pi packages/ai/src/utils/overflow.ts)
        (
            "This model's maximum context length is 40960 tokens. However, you requested 0 output "
            "tokens and your prompt contains at least 40961 input tokens, for a total of at least "
            "40961 tokens.",
            Overflow(40961, 40960),
        ),
        (
            "This model's maximum context length is 65536 tokens. However, you requested 16384 "
            "output tokens and your prompt contains at least 49153 input tokens, for a total of at "
            "least 65537 tokens.",
            Overflow(49153, 49152),
        ),
        (
            "Prompt contains 240000 tokens, too large for model with 128000 maximum context length",
            Overflow(240000, 128000),
        ),
        ("prompt too long; exceeded max context length by 4021 tokens", Overflow(None, None)),
        (
            "The prompt is too long: 208863, model maximum context length: 202752",
            Overflow(208863, 202752),
        ),
        (
            "Your request exceeded model token limit: 262144 (requested: 291351)",
            Overflow(291351, 262144),
        ),
        (
            "The input (300000 tokens) is longer than the model's context length (262144 tokens).",
            Overflow(300000, 262144),
        ),
        (
            "Requested token count exceeds the model's maximum context length of 131072 tokens.",
            Overflow(None, 131072),
        ),
        (
            "Input length 131393 exceeds the maximum allowed input length of 131040 tokens.",
            Overflow(131393, 131040),
        ),
        (
            "Input length (265330) exceeds model's maximum context length (262144).",
            Overflow(265330, 262144),
        ),
        (
            "Prompt has 5,958,968 tokens, but the configured context size is 256,000 tokens",
            Overflow(5958968, 256000),
        ),
        (
            "This model's maximum context length is 2049 tokens, however you requested 2054 tokens "
            "(2049 in your prompt, 5 for the completion).",
            Overflow(2049, 2044),
        ),
    ],
)
def test_documented_wordings(message: str, expected: Overflow) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") == expected


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens is too large: 8192. This model supports at most 4096 completion tokens, "
        "whereas you provided 8192.",
        "max_tokens: 128000 > 64000, which is the maximum allowed number of output tokens",
        "Request exceeds the maximum size",
        "messages: at least one message is required",
        "Invalid API Key",
        "This endpoint's maximum context length is 8192 tokens. However, you requested about "
        "9000 tokens (100 of text input, 8192 in the output).",
    ],
)
def test_wordings_that_are_not_overflows(message: str) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") is None


# --------------------------------------------------------------------------- bare streams


def test_a_stream_of_bare_text_is_read_as_an_error_body() -> None:
    def bare(data: bytes) -> Overflow | None:
        return detect_bare_stream_overflow(data, wire_format="openai")

    assert bare(b"Prompt is too long") == Overflow(None, None)
    stated = b"This model's maximum context length is 8192 tokens. However, your messages "
    assert bare(b"\n" + stated + b"resulted in 9000 tokens.\n") == Overflow(9000, 8192)
    assert bare(b'{"error_msg": "Input text is too long, input_ids_len (8300)"}\n') is not None
    # anything with an SSE line is a stream, read event by event, never as bare text
    for sse in (b"data: Prompt is too long", b": Prompt is", b"event:x\nPrompt is too long"):
        assert bare(sse) is None
    # no overflow's wording, or too long to be an error someone wrote raw
    assert bare(b"Rate limit exceeded: too many tokens per minute") is None
    assert bare(b"The model says the prompt is fine.") is None
    assert bare(b"") is None and bare(b" \n ") is None
    assert bare(b"Prompt is too long " + b"x" * overflow.BARE_STREAM_LIMIT) is None
    # a JSON-lines answer is an error only with an error key; a BOM hides no SSE line
    assert bare(b'{"message": "The input exceeds the context window", "done": true}') is None
    # ... or typed as one: vLLM's flat error, written raw into a 200 stream (Slurm-vLLM's
    # proxy)
    flat = {"object": "error", "message": stated.decode() + "resulted in 9000 tokens.", "code": 400}
    assert bare(orjson.dumps(flat)) == Overflow(9000, 8192)
    assert bare(orjson.dumps({**flat, "object": "chat.completion"})) is None
    # (typed as an error as a whole only: not a tool call's arguments in an answer)
    args = orjson.dumps({"type": "error", "message": flat["message"]}).decode()
    call = {"function": {"name": "report", "arguments": args}}
    answer = {"message": {"role": "assistant", "tool_calls": [call]}, "done": True}
    assert bare(orjson.dumps(answer)) is None
    assert bare(orjson.dumps({"message": {"type": "error", "message": flat["message"]}})) is None
    assert bare("\ufeffdata: Prompt is too long".encode()) is None
    assert bare("\ufeffPrompt is too long".encode()) == Overflow(None, None)
    # keep-alive comments before the text (CLIProxyAPI 1.0) are no SSE lines of output,
    # however many; a field after them still makes it a stream
    error = b'{"error":{"message":"Prompt is too long: 9000 tokens > 8192 maximum"}}'
    assert bare(b": PROCESSING\n\n" * 500 + error) == Overflow(9000, 8192, whole=True)
    # the same error object twice back to back (hivemind-scheduler) is read once; two
    # different objects stay unread, as any JSON that does not parse
    assert bare(error + error) == Overflow(9000, 8192, whole=True)
    assert bare(error + error.replace(b"9000", b"9001")) is None
    assert bare(b": PROCESSING\n\ndata: " + error) is None
    # the stream's terminator after the error, on its own line or glued to it (openguard)
    assert bare(error + b"data: [DONE]") == Overflow(9000, 8192, whole=True)
    assert bare(error + b"\n\ndata: [DONE]\n\n") == Overflow(9000, 8192, whole=True)
    assert bare(b"data: [DONE]\n\n") is None
    assert bare(b"data: [DONE]\n\n" + error) is None
    limited = b'{"error":{"message":"Rate limit reached for tokens per min"}}data: [DONE]'
    assert bare(limited) is None


def test_a_reply_in_an_overflows_words_leaves_the_next_events_to_decide() -> None:
    refusal = "request (9412 tokens) exceeds the available context size (8192 tokens)"

    def chunk(**choice: Any) -> bytes:
        return b"data: " + orjson.dumps({"choices": [{"index": 0, **choice}]}) + b"\n\n"

    said = chunk(delta={"content": refusal})
    error = b'data: {"error": {"message": "rpc error: ' + refusal.encode() + b'"}}\n\n'
    role = chunk(delta={"role": "assistant"})
    assert not stream_event_has_output(said)
    assert stream_event_has_output(chunk(delta={"content": "Hello"}))
    # (a long reply chunk is output, whatever it says)
    assert stream_event_has_output(chunk(delta={"content": refusal + " and" * 300}))
    assert detect_stream_overflow(role + said + error, wire_format="openai") == Overflow(9412, 8192)
    more = chunk(delta={"content": " is what llama.cpp says"})
    assert detect_stream_overflow(role + said + more + error, wire_format="openai") is None
    # one such reply is held a stream: a second one is output, whatever follows
    twice = role + said + said + error
    assert detect_stream_overflow(twice, wire_format="openai") is None
    assert overflow.stream_event_output(said) == overflow.WORDED
    assert overflow.stream_event_output(said, held=overflow.WORDED) == overflow.OUTPUT
    # LocalAI's legacy completions end in a reply that is the backend's gRPC error
    grpc = "Internal error: rpc error: code = Internal desc = " + refusal
    ends = chunk(text=refusal) + chunk(text=grpc, finish_reason="stop")
    assert detect_stream_overflow(ends, wire_format="openai") == Overflow(9412, 8192)
    assert detect_stream_overflow(chunk(text="rpc error: code = X"), wire_format="openai") is None


def _sse(*docs: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(doc) + b"\n\n" for doc in docs)


def test_a_reply_after_a_start_that_counted_the_prompt_closes_on_no_output() -> None:
    # llamaR and claudish count the prompt in message_start, write the refusal as the
    # reply, and close it stating only the output (or 0 to both): the start's count shows
    # the server counts, so no output counted means the reply was not the model's
    refusal = "Prompt too long: 33120 tokens exceed the 32768-token context window."

    def stream(start: dict[str, Any], usage: dict[str, int], *, text: str = refusal) -> bytes:
        return _sse(
            {"type": "message_start", "message": {"content": [], "usage": start}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
            {"type": "content_block_delta", "index": 0, "delta": {"text": text}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
            {"type": "message_stop"},
        )

    def read(data: bytes) -> Overflow | None:
        return detect_stream_overflow(data, wire_format="anthropic")

    counted = {"input_tokens": 33120, "output_tokens": 0}
    assert read(stream(counted, {"output_tokens": 0})) == Overflow(33120, 32768)
    assert read(stream({**counted, "output_tokens": 1}, {"input_tokens": 0, "output_tokens": 0}))
    # output counted at the close, a start that counted no prompt, or a reply in other words
    assert read(stream(counted, {"output_tokens": 14})) is None
    assert read(stream({"input_tokens": 0, "output_tokens": 0}, {"output_tokens": 0})) is None
    assert read(stream(counted, {"output_tokens": 0}, text="Here is the plan.")) is None
    # the relay's verdicts, event by event: the start is kept as held is, and a reply in an
    # overflow's words after it closes on a usage that counts no output
    start = _sse({"type": "message_start", "message": {"usage": counted}})
    assert overflow.stream_event_output(start) == overflow.COUNTED
    assert overflow.stream_event_output(start, held=overflow.COUNTED) == overflow.NO_OUTPUT
    said = _sse({"type": "content_block_delta", "index": 0, "delta": {"text": refusal}})
    assert overflow.stream_event_output(said, held=overflow.COUNTED) == overflow.WORDED_COUNTED
    close = _sse({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 0}})
    assert overflow.stream_event_output(close, held=overflow.WORDED_COUNTED) == overflow.UNSPENT
    assert overflow.stream_event_output(close, held=overflow.WORDED) == overflow.OUTPUT
    # a reply closed before any output after a counted start is still no output
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}
    stop["usage"] = {"output_tokens": 0}
    assert overflow.stream_event_output(_sse(stop), held=overflow.COUNTED) == overflow.NO_OUTPUT


def test_a_reply_its_usage_says_cost_no_output_is_the_servers_error() -> None:
    # LMDeploy's Anthropic stream writes its engine's status as the reply, then a
    # message_delta that counts no output token for the prompt it counted: the reply was
    # the server's, read as an error's message (here llama.cpp's words, read the same)
    refusal = "request (9412 tokens) exceeds the available context size (8192 tokens)"
    opened = _sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 0, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": refusal},
        },
        {"type": "content_block_stop", "index": 0},
    )

    def closed(usage: dict[str, int]) -> bytes:
        delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
        return opened + _sse(delta, {"type": "message_stop"})

    def read(data: bytes) -> Overflow | None:
        return detect_stream_overflow(data, wire_format="anthropic")

    assert read(closed({"input_tokens": 34120, "output_tokens": 0})) == Overflow(9412, 8192)
    # output counted, no prompt counted (a translation that counts nothing), or no verdict
    # event at all: the model's answer
    assert read(closed({"input_tokens": 34120, "output_tokens": 17})) is None
    assert read(closed({"output_tokens": 0})) is None
    assert read(closed({"input_tokens": 0, "output_tokens": 0})) is None
    assert read(opened + _sse({"type": "message_stop"})) is None
    # the relay's verdicts, event by event
    last = _sse({"type": "message_delta", "usage": {"input_tokens": 90, "output_tokens": 0}})
    assert overflow.stream_event_output(last) == overflow.OUTPUT
    assert overflow.stream_event_output(last, held=overflow.WORDED) == overflow.UNSPENT
    ended = _sse({"type": "content_block_stop", "index": 0})
    assert overflow.stream_event_output(ended, held=overflow.WORDED) == overflow.NO_OUTPUT

    # a chat stream's usage settles nothing (no server is known to answer so), and a whole
    # reply's usage never makes its text an error: placeholder counts are common
    said = {"choices": [{"index": 0, "delta": {"content": refusal}}]}
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 9412, "completion_tokens": 0}}
    assert detect_stream_overflow(_sse(said, finish, usage), wire_format="openai") is None
    assert detect_stream_overflow(_sse({**said, **usage}), wire_format="openai") is None
    message = {"role": "assistant", "content": refusal}
    reply = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9412, "completion_tokens": 0},
    }
    assert detect_overflow(200, orjson.dumps(reply), wire_format="openai") is None
    anthropic = {
        "type": "message",
        "content": [{"type": "text", "text": refusal}],
        "usage": {"input_tokens": 34120, "output_tokens": 0},
    }
    assert detect_overflow(200, orjson.dumps(anthropic), wire_format="anthropic") is None


@pytest.mark.parametrize(
    "reply",
    [
        "That `rpc error: code = InvalidArgument desc = prompt is too long: 9000 tokens > 8192"
        " maximum` means your prompt is over.",
        "The line \"Error code: 400 - {'error': {'message': \"This model's maximum context"
        ' length is 4097 tokens. However, your messages resulted in 4619 tokens."}}" means ...',
        "Seeing rpc error: code = Unavailable desc = connection refused means the backend is"
        " down; a long chat may fail with: prompt is too long: 9000 tokens > 8192 maximum",
    ],
    ids=["grpc-quoted", "sdk-quoted", "grpc-elsewhere"],
)
def test_an_answer_that_quotes_an_error_is_no_error(reply: str) -> None:
    body = orjson.dumps(
        {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": reply}}]}
    )
    assert detect_overflow(200, body, wire_format="openai") is None


def test_a_js_sdk_error_as_the_reply_is_read() -> None:
    # LibreChat's agents API: after the role chunk, the openai-node SDK's error as printed
    # ("Error: " + its message, "400 " + the provider's), with finish_reason "stop"
    said = "\n\nError: 400 This model's maximum context length is 128000 tokens. However, your"
    said += " messages resulted in 131786 tokens. Please reduce the length of the messages."
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}

    def chunk(text: str) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}

    stream = _sse(role, chunk(said)) + b"data: [DONE]\n\n"
    assert detect_stream_overflow(stream, wire_format="openai") == Overflow(131786, 128000)
    # a model's answer that starts so is an answer: streamed token by token (no finish
    # reason in its chunk), or whole
    answer = said.strip() + " That is what openai-node prints; trim the history."
    streamed = {"choices": [{"index": 0, "delta": {"content": answer}}]}
    assert detect_stream_overflow(_sse(role, streamed), wire_format="openai") is None
    message = {"role": "assistant", "content": answer}
    whole = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    assert detect_overflow(200, orjson.dumps(whole), wire_format="openai") is None


def test_an_excess_past_the_window_and_onnx_runtime_genai_are_read() -> None:
    said = (
        "Estimated input (~712345 tokens) is far past the context window of gpt-5.4 (272000"
        " tokens). Start a new session or choose a model with a larger context window."
    )
    assert detect_overflow(413, _error_body(said), wire_format="openai") == Overflow(712345, 272000)
    genai = b"500 Internal Server Error\ninput sequence_length (4391) is >= max_length (4096)"
    assert detect_overflow(500, genai, wire_format="openai") == Overflow(4391, 4096)
    # (the request's own max_length over the window is a setting, no prompt stated)
    setting = b"max_length (8192) cannot be greater than model context_length (4096)"
    assert detect_overflow(500, setting, wire_format="openai") is None


def test_a_limited_context_a_seq_length_and_a_bracketed_limit_are_read() -> None:
    # ferrum-infer-rs: the window, then the prompt and the output it reserves
    said = (
        "This model context is limited to 4096 tokens, but this request needs 4210 input"
        " tokens + 256 output tokens. Reduce max_tokens or shorten the messages."
    )
    assert detect_overflow(400, _error_body(said), wire_format="openai") == Overflow(4210, 3840)
    # a Rust server's "the prompt is P tokens and `max_tokens` is C; together they exceed
    # this model's context of L"
    together = (
        "the prompt is 7000 tokens and `max_tokens` is 2048; together they exceed this"
        " model's context of 8192"
    )
    assert detect_overflow(400, _error_body(together), wire_format="openai") == Overflow(7000, 6144)
    # ... where the reservation alone fills the window, no trim helps
    alone = said.replace("4210 input tokens + 256", "312 input tokens + 16384")
    assert detect_overflow(400, _error_body(alone), wire_format="openai") is None
    assert detect_unfixable(400, _error_body(alone))
    # gLLM answers {"object": "error"} with 200, no count in it
    gllm = {"object": "error", "message": "seq length exceeds max model length", "code": 400}
    assert detect_overflow(200, orjson.dumps(gllm), wire_format="openai") == Overflow(None, None)
    # rtp-llm's images expanding the prompt past max_seq_len, under its own error code
    rtp = {
        "error_code": 901,
        "error_code_str": "901_MM_LONG_PROMPT_ERROR",
        "message": "input after multimodal process is 34816 > max_seq_len(32768)",
    }
    assert detect_overflow(500, orjson.dumps(rtp), wire_format="openai") == Overflow(34816, 32768)


def test_shepherds_and_rvllms_wordings_are_read_with_their_counts() -> None:
    # shepherd's llama.cpp backend keeps a tenth of the window for the output
    said = (
        "This model's maximum context length is 8192 tokens. Your conversation used 9000"
        " tokens, leaving -808 for generation (minimum 819 required)."
    )
    assert detect_overflow(400, _error_body(said), wire_format="openai") == Overflow(9000, 7373)
    # ... its TensorRT backend itemises the output asked for after the prompt; where that
    # alone fills the window, no trim helps
    trt = (
        "TensorRT generation failed: This model's maximum context length is 4096 tokens."
        " However, your messages resulted in 3500 tokens plus 1024 max generation tokens."
    )
    assert detect_overflow(500, _error_body(trt), wire_format="openai") == Overflow(3500, 3072)
    alone = trt.replace("3500 tokens plus 1024", "120 tokens plus 4096")
    assert detect_overflow(500, _error_body(alone), wire_format="openai") is None
    assert detect_unfixable(500, _error_body(alone))
    # rvllm, as a stream's error frame after the role's chunk
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    error = {"error": {"message": "prompt has 8300 tokens, max_model_len is 8192"}}
    stream = _sse(role, error) + b"data: [DONE]\n\n"
    assert detect_stream_overflow(stream, wire_format="openai") == Overflow(8300, 8192)
    # vmlx, its window counting the one output token that must remain (413, code
    # prompt_too_long: the output words beside it keep the code's own reading off)
    vmlx = (
        "prompt_too_long: tokenized prompt has 131450 tokens; the model has a declared context"
        " of 131072 tokens including input and output. At least one output token must remain"
        " (maximum input 131071). Shorten the prompt/history or use a larger-context model."
    )
    body = orjson.dumps({"error": {"message": vmlx, "code": "prompt_too_long"}})
    assert detect_overflow(413, body, wire_format="openai") == Overflow(131450, 131071)


def test_vertexs_advice_to_count_billing_characters_is_no_billing_error() -> None:
    said = (
        "Unable to submit request because the input token count is 1148762 but model only"
        " supports up to 1048576. Reduce the input token count and try again. You can also use"
        " the CountTokens API to calculate prompt token count and billing characters. Learn"
        " more: https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/send-chat-prompts-gemini"
    )
    body = orjson.dumps({"error": {"code": 400, "message": said, "status": "INVALID_ARGUMENT"}})
    assert detect_overflow(400, body, wire_format="gemini") == Overflow(1148762, 1048576)
    # a billing error is one still
    billing = "Billing is not enabled for this project. Enable billing to use the API."
    body = orjson.dumps(
        {"error": {"code": 400, "message": billing, "status": "FAILED_PRECONDITION"}}
    )
    assert detect_overflow(400, body, wire_format="gemini") is None


def test_a_refusal_said_twice_behind_an_error_label_is_the_servers() -> None:
    # AI-Gateway streams an upstream's failure as one chunk whose refusal is the error and
    # whose text is "**Error**: " and the same, finished "stop"
    said = "The input token count (1196265) exceeds the maximum number of tokens allowed (1048576)."

    def chunk(refusal: str, text: str) -> bytes:
        delta = {"refusal": refusal, "content": text}
        doc = {"choices": [{"index": 0, "delta": delta, "finish_reason": "stop"}]}
        return _sse(doc) + b"data: [DONE]\n\n"

    for label in ("**Error**: ", "Error: ", "**Error:** "):
        read = detect_stream_overflow(chunk(said, label + said), wire_format="openai")
        assert read == Overflow(1196265, 1048576), label
    # a rate limit said so is none; a refusal alone, a text alone, or a text that says
    # more than the refusal behind its label is a model's
    tpm = "429 All 1 attempt(s) failed. Last error: Rate limit reached on tokens per min (TPM)."
    for refusal, text in (
        (tpm, "**Error**: " + tpm),
        (said, ""),
        ("", "**Error**: " + said),
        (said, "I cannot help. " + said),
        (said, "**Error**: see below. " + said),
    ):
        assert detect_stream_overflow(chunk(refusal, text), wire_format="openai") is None, text


def test_each_attempt_of_a_failover_summary_is_read_alone() -> None:
    # llm-api-router lists what each provider said; a quota on the backup does not veto the
    # primary's overflow, since a shorter prompt passes the primary
    overflow_said = (
        "This model's maximum context length is 128000 tokens. However, your messages"
        " resulted in 131245 tokens. Please reduce the length of the messages."
    )
    quota = "You exceeded your current quota, please check your plan and billing details."
    listed = (
        "Internal server error: All providers failed:\n- openai-primary: Provider error: "
        + overflow_said
        + "\n- openai-backup: Rate limited: "
        + quota
    )
    body = orjson.dumps({"detail": listed})
    assert detect_overflow(500, body, wire_format="openai") == Overflow(131245, 128000, whole=True)
    # 429chain's "Tried: a (400: <its body>), b (401: <its error>)"
    anthropic = orjson.dumps(
        {
            "type": "error",
            "error": {"message": "prompt is too long: 208531 tokens > 200000 maximum"},
        }
    ).decode()
    tried = (
        'All providers exhausted in chain "default". Tried: openrouter/claude (400: '
        + anthropic
        + "), backup/gpt-4o (401: Incorrect API key provided: sk-te****cdef.)"
    )
    read = detect_overflow(502, _error_body(tried), wire_format="openai")
    assert read is not None and (read.real, read.maximum) == (208531, 200000)
    # no attempt that overflowed, or one attempt only
    for other, status in (
        (listed.replace(overflow_said, quota), 500),
        (listed.split("\n- openai-backup")[0] + " " + quota, 500),
        (tried.replace("400: " + anthropic, "429: " + quota), 502),
    ):
        assert detect_overflow(status, _error_body(other), wire_format="openai") is None, other
    assert overflow_read.failover_attempts("All providers failed: just one") == []
    # llm-failover-proxy lists its attempts as objects: each one's words are read alone
    attempts = [
        {
            "provider": "groq",
            "status": 413,
            "message": "HTTP 413, Request too large on tokens"
            " per minute (TPM): Limit 12000, Requested 211873, please reduce your message size",
        },
        {
            "provider": "anthropic",
            "status": 400,
            "message": "HTTP 400, prompt is too long: 209834 tokens > 200000 maximum",
        },
    ]
    error = {"message": "No provider could answer (2 attempt(s)).", "proxy": {"attempts": attempts}}
    read = detect_overflow(502, orjson.dumps({"error": error}), wire_format="openai")
    assert read is not None and (read.real, read.maximum) == (209834, 200000)
    # ... and none of them an overflow, or one attempt only: none
    refused = {"provider": "openai", "status": 429, "message": "HTTP 429, " + quota}
    for listed_attempts in ([attempts[0], refused], [refused]):
        error = {**error, "proxy": {"attempts": listed_attempts}}
        assert detect_overflow(502, orjson.dumps({"error": error}), wire_format="openai") is None
    alone = {**error, "proxy": {"attempts": [attempts[1]]}}
    assert detect_overflow(502, orjson.dumps({"error": alone}), wire_format="openai") is not None


def test_an_error_between_a_proxys_own_tags_is_read_with_its_status() -> None:
    # GeminiForJanitors writes an upstream's error as the whole reply between its tags, a
    # zero-width space before each, after a notice of its own where it has one
    said = "The input token count (1187231) exceeds the maximum number of tokens allowed (1048576)."
    tagged = (
        "\u200b<proxy>\nFix requests turns enabled (for this message only).\n"
        "Error from Google AI (400): INVALID_ARGUMENT\n" + said + "\n\u200b</proxy>"
    )
    body = _whole_reply(tagged)
    assert detect_overflow(200, body, wire_format="openai") == Overflow(1187231, 1048576)
    escaped = json.dumps(json.loads(body)).encode()  # (as Flask writes it: \u200b)
    assert detect_overflow(200, escaped, wire_format="openai") == Overflow(1187231, 1048576)
    chunk = {"choices": [{"index": 0, "delta": {"content": tagged}, "finish_reason": "stop"}]}
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") == Overflow(1187231, 1048576)
    # a 429's quota so, the tags without their zero-width spaces, or more after them: none
    for text in (
        tagged.replace("(400)", "(429)"),
        tagged.replace("\u200b", ""),
        tagged + " Shall I shorten it?",
    ):
        assert detect_overflow(200, _whole_reply(text), wire_format="openai") is None, text


def test_coding_cli_bridges_overflow_replies_are_read() -> None:
    # Codex CLI's own refusal, as codex-exec-proxy relays it (an error object, whole or in
    # a stream) and codex-proxy inside the CLI's whole stderr
    codex = (
        "Codex ran out of room in the model's context window. Start a new thread or clear"
        " earlier history before retrying."
    )
    body = orjson.dumps({"detail": {"message": codex, "type": "server_error", "code": None}})
    assert detect_overflow(500, body, wire_format="openai") == Overflow(None, None)
    stderr = "Codex execution failed: OpenAI Codex v0.171.0\nERROR: " + codex + "\ntokens used\n0\n"
    assert detect_overflow(500, orjson.dumps({"detail": stderr}), wire_format="openai")
    # opencode-to-openai streams opencode's error as the first text behind a relay's tag,
    # then finishes the reply with nothing more: a frame, read when the finish comes
    said = (
        "[Proxy Error] ContextOverflowError: Session too large to compact - context exceeds"
        " model limit even after stripping media"
    )
    first = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": None}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    stream = _sse(first, last) + b"data: [DONE]\n\n"
    assert detect_stream_overflow(stream, wire_format="openai") == Overflow(None, None)
    # more written after it: an answer
    more = {"choices": [{"index": 0, "delta": {"content": " So I stopped."}}]}
    assert detect_stream_overflow(_sse(first, more, last), wire_format="openai") is None


def test_a_status_named_before_an_upstreams_address_is_the_upstreams() -> None:
    # openai-playground answers every upstream error as its own 404, the upstream's status
    # and body in its message
    inner = {
        "error": {
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 8307,
            "n_ctx": 8192,
        }
    }
    said = (
        "Error: http status 400. Error message from http://127.0.0.1:8080/v1/chat/completions: "
        + orjson.dumps(inner).decode()
    )
    assert detect_overflow(404, _error_body(said), wire_format="openai") == Overflow(8307, 8192)
    # ... and a 429's body so is a rate limit, a 404 that names no status is the gateway's
    limited = said.replace("http status 400", "http status 429")
    assert detect_overflow(404, _error_body(limited), wire_format="openai") is None
    plain = said.replace("Error: http status 400. ", "")
    assert detect_overflow(404, _error_body(plain), wire_format="openai") is None


def test_a_prompt_too_long_for_the_window_and_an_error_finish_are_read() -> None:
    said = (
        "Prompt too long (9000 tokens) for context window (8192). Model supports 8192. Need"
        " ~9100 for prompt & buffer. Available for generation: -908 tokens."
    )
    assert detect_overflow(500, orjson.dumps({"error": said}), wire_format="openai") == Overflow(
        9000, 8192
    )
    # LLM-Inference-Service streams it as the reply of a chunk that finished with "error"
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    chunk = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "error"}]}
    stream = _sse(role, chunk) + b"data: [DONE]\n\n"
    assert detect_stream_overflow(stream, wire_format="openai") == Overflow(9000, 8192)
    # a reply that finished otherwise is the model's, whatever it says
    answered = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "stop"}]}
    assert detect_stream_overflow(_sse(role, answered), wire_format="openai") is None
    # a whole completion that finished with "error" is not read so: its text may be the
    # model's, cut short by a failure (unless it holds an upstream's error body: below)
    failed = {"choices": [{"message": {"content": said}, "finish_reason": "error"}]}
    assert detect_overflow(200, orjson.dumps(failed), wire_format="openai") is None


def test_a_whole_completion_finished_on_an_upstreams_error_body_is_read() -> None:
    # RelayFreeLLM answers its retries' failure as a completion of its own: no usage, the
    # finish reason "error", the last upstream's error body in JSON inside the text
    upstream = orjson.dumps(
        {
            "error": {
                "message": "This model's maximum context length is 1048576 tokens. However,"
                " you requested 1053235 tokens (797235 in the messages, 256000 in the"
                " completion). Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
            }
        }
    ).decode()
    said = "All retries failed. Last error: [DeepSeek] API Error 400: " + upstream
    failed = {"choices": [{"message": {"content": said}, "finish_reason": "error"}], "usage": None}

    def read(doc: dict[str, Any]) -> Overflow | None:
        return detect_overflow(200, orjson.dumps(doc), wire_format="openai")

    assert read(failed) == Overflow(797235, 792576)
    assert read({**failed, "usage": {"prompt_tokens": 0, "completion_tokens": 0}}) is not None
    # output counted, another finish, or no error body in JSON: the model's words
    assert read({**failed, "usage": {"prompt_tokens": 9, "completion_tokens": 40}}) is None
    stopped = {"choices": [{"message": {"content": said}, "finish_reason": "stop"}]}
    assert read(stopped) is None
    for text in (
        said.replace("{", "(", 1),
        said.replace('"error"', '"detail"', 1),
        said + "\n\nTo handle this you should",  # a model quoting it, cut short
    ):
        bare = {"choices": [{"message": {"content": text}, "finish_reason": "error"}]}
        assert read(bare) is None, text
    # gomcptest's answer to a failed call: text of its own around Vertex's words, and a
    # usage that counts no output token, where no model wrote it
    vertex = (
        "I encountered an error while processing your request.\n\nError details: cannot"
        " generate content: Error 400, Message: The input token count (1187304) exceeds the"
        " maximum number of tokens allowed (1048576)., Status: INVALID_ARGUMENT"
    )
    zero = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    gomcp = {"choices": [{"message": {"content": vertex}, "finish_reason": "error"}]}
    assert read({**gomcp, "usage": zero}) == Overflow(1187304, 1048576)
    assert read(gomcp) is None  # no usage, no error body: the model's words, perhaps
    assert read({**gomcp, "usage": {**zero, "completion_tokens": 12}}) is None


_OPENAI_SAID = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted"
    " in 130512 tokens. Please reduce the length of the messages."
)


def test_an_upstreams_error_a_gateway_holds_under_any_key_is_read() -> None:
    # MemoryRouter: {"error": "Provider error", "provider_error": <the upstream's body>}
    def wrapped(inner: dict[str, Any]) -> bytes:
        return orjson.dumps({"error": "Provider error", "provider_error": inner})

    said = {"error": {"message": _OPENAI_SAID, "code": "context_length_exceeded"}}
    assert detect_overflow(400, wrapped(said), wire_format="openai") == Overflow(
        130512, 128000, whole=True
    )
    limited = {"error": {"message": "Rate limit reached for gpt-4o on tokens per min (TPM)"}}
    assert detect_overflow(400, wrapped(limited), wire_format="openai") is None
    # an object without an error of its own is not walked (a validation error's value),
    # nor one under a key that echoes the request, whatever it holds (a client's own
    # tool result {"error": ...} that a validation error quotes back)
    echoed = {"error": "Invalid request", "value": {"messages": [{"content": _OPENAI_SAID}]}}
    assert detect_overflow(400, orjson.dumps(echoed), wire_format="openai") is None
    own = {"error": _OPENAI_SAID}
    item = {"type": "string_type", "msg": "Input should be a valid string"}
    pydantic = {"detail": [{**item, "input": own}]}
    assert detect_overflow(422, orjson.dumps(pydantic), wire_format="openai") is None
    for key in ("body", "input", "param", "payload", "instance", "arguments"):
        quoted = {"error": {"message": "Invalid request body", key: own}}
        assert detect_overflow(400, orjson.dumps(quoted), wire_format="openai") is None, key
    # ... or kept as its JSON text (llm-budget-gateway's "provider_body"), but never a
    # validation error's "value" or "data", which may be a string the client sent
    text = orjson.dumps(said).decode()
    kept = {"error": {"message": "upstream provider error: openai (HTTP 400)", "type": "x"}}
    kept["error"]["provider_body"] = text
    assert detect_overflow(400, orjson.dumps(kept), wire_format="openai") == Overflow(
        130512, 128000, whole=True
    )
    for key in ("value", "data", "Value", "originalValue", "errorData", "upstream_request"):
        quoted = {"error": {"message": "Invalid value", key: text}}
        assert detect_overflow(400, orjson.dumps(quoted), wire_format="openai") is None, key
    # (a key naming the upstream holds its answer, its message or data: the third review's)
    for key in ("upstream_message", "providerErrorData", "upstreamPayload"):
        kept = {"error": {"message": "upstream provider error", key: text}}
        got = detect_overflow(400, orjson.dumps(kept), wire_format="openai")
        assert got == Overflow(130512, 128000, whole=True), key
    not_json = {"error": {"message": "upstream provider error", "provider_body": "{not json"}}
    assert detect_overflow(400, orjson.dumps(not_json), wire_format="openai") is None


def test_openais_input_wording_for_one_input_of_a_list() -> None:
    for said in (
        "Invalid 'input': maximum context length is 8192 tokens.",
        "Invalid 'input[0]': maximum input length is 8192 tokens",
        "Invalid 'input[2047]': maximum input length is 8192 tokens",
    ):
        body = _error_body(said)
        assert detect_overflow(400, body, wire_format="openai") == Overflow(None, 8192), said
    # a status in brackets beside a stated limit is no prompt's count (the review's)
    bracketed = _error_body("Error [400]: maximum input length is 8192 tokens")
    assert detect_overflow(400, bracketed, wire_format="openai") is None


@pytest.mark.parametrize(
    "message",
    [
        "今日输入超过上限，请明天再试",  # today's input over the cap: a quota
        "每小时输入超过上限",
        "输入超过上限，请稍后重试",  # retry later
        "输入内容超过模型单次上限(图片数量)",  # the number of images
        "输入内容超过上限：最多支持 10 张图片",
    ],
)
def test_chinese_caps_of_a_period_or_a_medium_are_no_window(message: str) -> None:
    for status in (400, 403, 500):
        assert detect_overflow(status, _error_body(message), wire_format="openai") is None


def test_a_window_less_its_reservation_is_no_reservation_read() -> None:
    # only Plexus's "with C reserved for the response" is read as the output's (the
    # second review's): here the window is stated less it, and the prompt is over
    said = (
        "Your prompt has 7000 tokens, which exceeds the 6192 tokens available (8192 context"
        " window less 2000 reserved for the response)."
    )
    assert detect_overflow(400, _error_body(said), wire_format="openai") is not None


def test_a_hedged_wording_is_a_suspect_a_probe_settles() -> None:
    # a Kiro relay's guess at its upstream's "Improperly formed request"
    said = (
        "Invalid request format. The conversation may be too long or contain unsupported content."
    )
    body = orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
    )
    assert detect_overflow(400, body, wire_format="anthropic") is None
    assert detect_suspect(400, body) is not None
    # unhedged, the same words state an overflow
    plain = body.replace(b"may be too long or contain unsupported content", b"is too long")
    assert detect_overflow(400, plain, wire_format="anthropic") is not None
    for hedged in ("seems too long", "appears to be too long", "may have been too long"):
        said = f"The conversation {hedged}."
        assert detect_overflow(400, _error_body(said), wire_format="openai") is None, hedged
    # a hedge holds for its own words only
    both = body.replace(b"Invalid request format.", b"The prompt is too long.")
    assert detect_overflow(400, both, wire_format="anthropic") is not None


def test_a_bare_body_is_the_upstreams_where_the_error_says_so() -> None:
    # llm-security-gates' 502: {"error": "upstream", "status": 400, "body": "<its answer>"}
    upstream = {"error": {"message": _OPENAI_SAID, "type": "invalid_request_error"}}
    relayed = {"error": "upstream", "status": 400, "body": json.dumps(upstream)}
    read = detect_overflow(502, orjson.dumps(relayed), wire_format="openai")
    assert read == Overflow(130512, 128000, whole=True)
    # ... or the backend's (lumynax-marama-route: "backend_http_error", beside its catalog)
    backend = {"ok": False, "error": "backend_http_error", "status": 400}
    backend["body"] = json.dumps(upstream)
    read = detect_overflow(400, orjson.dumps(backend), wire_format="openai")
    assert read == Overflow(130512, 128000, whole=True)
    # a body beside any other error may be the request a client sent: never read
    for error in ("invalid request", "validation failed"):
        other = {**relayed, "error": error}
        assert detect_overflow(400, orjson.dumps(other), wire_format="openai") is None, error


def test_an_upstreams_error_list_a_relay_keeps_as_text_is_read() -> None:
    # Google's OpenAI-compatible endpoints answer a list of one error; a relay keeps it as
    # the text of its "body"
    said = "The input token count (1203311) exceeds the maximum number of tokens allowed (1048576)."
    upstream = [{"error": {"code": 400, "message": said, "status": "INVALID_ARGUMENT"}}]
    relayed = {"ok": False, "error": "backend_http_error", "body": json.dumps(upstream)}
    read = detect_overflow(400, orjson.dumps(relayed), wire_format="openai")
    assert read == Overflow(1203311, 1048576)
    two = {**relayed, "body": json.dumps(upstream * 2)}
    assert detect_overflow(400, orjson.dumps(two), wire_format="openai") is None


def test_an_upstreams_error_body_a_relay_keeps_as_its_response_is_read() -> None:
    # Lemonade's cloud backend keeps the upstream's body whole under details.response
    def relayed(upstream: dict[str, Any], status: int) -> bytes:
        details = {"response": upstream, "status_code": status}
        error = {"details": details, "message": "cloud (x) request failed", "type": "backend_error"}
        return orjson.dumps({"error": error})

    fastchat = {"object": "error", "message": _OPENAI_SAID, "code": 40303}
    assert detect_overflow(400, relayed(fastchat, 400), wire_format="openai") == Overflow(
        130512, 128000, whole=True
    )
    fastapi = {"detail": "Requested tokens (2310) exceed context window of 2048"}
    assert detect_overflow(500, relayed(fastapi, 500), wire_format="openai") == Overflow(2310, 2048)
    ollama = {"error": "prompt too long; exceeded max context length by 1200 tokens"}
    assert detect_overflow(400, relayed(ollama, 400), wire_format="openai") is not None
    # a response that is no error body: its words are the model's, never read (the second
    # review's: a message beside an answer's object, a "detail" beside other keys)
    for other in (
        {"object": "chat.completion", "message": _OPENAI_SAID},
        {"detail": _OPENAI_SAID, "id": "x"},
    ):
        assert detect_overflow(400, relayed(other, 400), wire_format="openai") is None
    answer = {"object": "chat.completion", "choices": [{"message": {"content": _OPENAI_SAID}}]}
    assert detect_overflow(400, relayed(answer, 400), wire_format="openai") is None


def test_the_status_an_sdk_exception_names_stands_for_the_wrappers() -> None:
    # headroom guesses a status from the exception's words: 429 where they hold "limit",
    # 404 where they hold "model"; the status the exception names is the upstream's
    said = "Error code: 400 - " + str({"error": {"message": _OPENAI_SAID, "param": "messages"}})
    as_limit = {"error": {"message": said, "type": "rate_limit_exceeded"}}
    assert detect_overflow(429, orjson.dumps(as_limit), wire_format="openai") == Overflow(
        130512, 128000, whole=True
    )
    missing = {"type": "error", "error": {"type": "not_found_error", "message": said}}
    assert detect_overflow(404, orjson.dumps(missing), wire_format="anthropic") is not None
    # the status it names rules too: a rate limit, a missing model, whatever the wrapper's
    for named in ("429", "404"):
        other = {"error": {"message": said.replace("400", named, 1)}}
        assert detect_overflow(400, orjson.dumps(other), wire_format="openai") is None, named
    # not an exception's start: the wrapper's status holds
    quoted = {"error": {"message": "Upstream said: " + _OPENAI_SAID, "type": "rate_limit"}}
    assert detect_overflow(429, orjson.dumps(quoted), wire_format="openai") is None
    # a named rate limit is no suspect either, and what the exception's body holds counts
    tier = "Input is too long for the current tier: 45000 tokens exceeds the limit of 30000."
    limited = {"error": {"message": "Error code: 429 - " + str({"error": {"message": tier}})}}
    assert detect_suspect(400, orjson.dumps(limited)) is None
    inner = {"error": {"message": "Request too large: 45000 tokens > 30000.", "status": 429}}
    own = {"error": {"message": "Error code: 400 - " + orjson.dumps(inner).decode()}}
    assert detect_overflow(400, orjson.dumps(own), wire_format="openai") is None


def test_an_upstreams_typed_error_kept_as_json_text_is_read() -> None:
    # earcon answers 200 with the upstream's body kept as text under a key that names it;
    # vLLM's body is typed {"object": "error"} and has no "error" key of its own
    inner = {
        "object": "error",
        "message": "Prompt contains 40321 tokens and 0 draft tokens, too large for model"
        " with 32768 maximum context length",
        "type": "invalid_request_error",
    }
    kept = {"error": {"upstream_status": 400, "upstream_body": orjson.dumps(inner).decode()}}
    read = detect_overflow(200, orjson.dumps(kept), wire_format="openai")
    assert read == Overflow(40321, 32768)
    # not under a key that may echo the request, nor an object that is no error
    echoed = {"error": {"upstream_status": 400, "body": kept["error"]["upstream_body"]}}
    plain = {"object": "chat.completion", "message": inner["message"], "type": "text"}
    untyped = {"error": {"upstream_body": orjson.dumps(plain).decode()}}
    for doc in (echoed, untyped):
        assert detect_overflow(200, orjson.dumps(doc), wire_format="openai") is None, doc


def test_an_sdk_exception_a_relay_kept_under_its_own_key_is_read() -> None:
    # Sunbird AI's 502 keeps the openai SDK's exception beside a message of its own
    said = "Error code: 400 - " + str({"object": "error", "message": _OPENAI_SAID})
    detail = {"service": "Sunflower Inference Service", "original_error": said}
    body: dict[str, Any] = {
        "error_code": "EXTERNAL_SERVICE_ERROR",
        "message": "An unexpected error occurred during inference. Please try again.",
        "details": [detail],
    }
    read = detect_overflow(502, orjson.dumps(body), wire_format="openai")
    assert read == Overflow(130512, 128000, whole=True)
    # ... not where the key may echo the request, nor an exception it names another status
    echoed = {**detail, "original_input": said}
    del echoed["original_error"]
    limited = {**detail, "original_error": said.replace("400", "429", 1)}
    for kept in (echoed, limited):
        doc = {**body, "details": [kept]}
        assert detect_overflow(502, orjson.dumps(doc), wire_format="openai") is None, kept


def test_a_payload_measured_in_tokens_is_the_prompt() -> None:
    # herrbasan's LLM-Gateway checks the prompt against what its window leaves available
    for said, counts in (
        ("[ModelRouter] Payload too large: 9702 tokens exceeds available 5530", (9702, 5530)),
        (
            "[Context Strategy] 413 Payload Too Large: System prompt alone exceeds available"
            " tokens (6120 > 5530).",
            (6120, 5530),
        ),
    ):
        body = _error_body(said)
        assert detect_overflow(413, body, wire_format="openai") == Overflow(*counts), said
        assert detect_stream_overflow(b"data: " + body + b"\n\n", wire_format="openai")
    # a payload in bytes stays a body-size limit, and what is available beside no count of
    # tokens is no window (a balance, credits, cache blocks)
    for said in (
        "Payload too large: 9 MB exceeds the 8 MB limit",
        "Payload too large (12 MB); the request has 9702 tokens",
        "Requested 9702 tokens exceeds available balance of 5530 tokens",
        "Request of 9702 tokens exceeds available credits (5530)",
        "9702 tokens exceeds available KV cache blocks (5530)",
        "This request (9702 tokens) exceeds available tokens in your plan (5530)",
        "Requested 9702 tokens exceeds available 5530 tokens of your subscription",
    ):
        assert detect_overflow(400, _error_body(said), wire_format="openai") is None, said


def test_what_a_plan_or_an_account_allows_is_no_overflow() -> None:
    # a plan's or a tier's cap on a request, or an account's balance, whatever the counts
    for said in (
        "This request (9702 tokens) exceeds the limit in your plan (5530)",
        "Your prompt of 9702 tokens exceeds the maximum for the free tier (5530)",
        "Prompt too long for your subscription: 9702 tokens > 5530",
        "Request of 9702 tokens exceeds your balance of 5530 tokens",
    ):
        body = _error_body(said)
        assert detect_overflow(400, body, wire_format="openai") is None, said
        assert detect_suspect(400, body, plain=True) is None, said
    # ... while a window's own words, and a load balancer's name, still read
    window = "prompt is too long: 9702 tokens > 5530 maximum (load balancer: eu-1)"
    assert detect_overflow(400, _error_body(window), wire_format="openai") is not None


def test_a_prompt_and_max_new_tokens_in_parentheses_are_itemised() -> None:
    # paladin8's infer: "prompt (P tokens) + max_new_tokens (C) exceeds max_seq_len (L)"
    def read(prompt: int, output: int) -> tuple[Overflow | None, bool]:
        said = f"prompt ({prompt} tokens) + max_new_tokens ({output}) exceeds max_seq_len (4096)"
        body = orjson.dumps({"detail": said})
        return detect_overflow(422, body, wire_format="openai"), detect_unfixable(422, body)

    assert read(4050, 128) == (Overflow(4050, 3968), False)
    assert read(12, 4096) == (None, True)  # the output alone fills the window


def test_a_limit_in_bytes_or_elements_is_no_overflow() -> None:
    # SMG's cap on an ASR prompt in bytes, under a code that reads as an overflow's
    asr = {"error": {"code": "asr_prompt_too_long", "message": "prompt must not exceed 4096 bytes"}}
    assert detect_overflow(400, orjson.dumps(asr), wire_format="openai") is None
    # NVIDIA's gateway on an embeddings array's length
    said = "'input' array is too large, must be less than 2048 elements"
    assert detect_overflow(400, orjson.dumps({"message": said}), wire_format="openai") is None
    # ... while a memory size beside a count of tokens is no byte limit (vmlx)
    vmlx = (
        "Prompt too long (~34,354 tokens estimated). This would need ~13.4GB of KV cache"
        " memory, exceeding the safe limit of ~20,119 tokens."
    )
    coded = {"error": {"message": vmlx, "code": "prompt_too_long"}}
    assert detect_overflow(413, orjson.dumps(coded), wire_format="openai") is not None


def test_an_http_status_before_the_message_is_no_count() -> None:
    # the OpenAI .NET SDK's ClientResultException, as Microsoft's Agent Framework answers
    # it: "HTTP 400 (type: code)", then the upstream's message with the counts
    said = (
        "HTTP 400 (invalid_request_error: context_length_exceeded)\nParameter: messages\n\n"
        "Message too long: 9262 tokens exceeds the 8192-token context window."
    )
    problem = {"title": "execution_error", "status": 500, "detail": said}
    assert detect_overflow(500, orjson.dumps(problem), wire_format="openai-responses") == (
        Overflow(9262, 8192)
    )


def test_an_error_body_written_raw_into_a_stream_is_read() -> None:
    body = {"error": {"message": _OPENAI_SAID, "code": "context_length_exceeded"}}
    # agent-cli's memory proxy: "data: " then OpenAI's pretty-printed body, unprefixed lines
    pretty = b"data: " + orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n\n"
    assert detect_stream_overflow(pretty, wire_format="openai") == Overflow(
        130512, 128000, whole=True
    )
    # AutoRAG's proxy: the body as a line of its own, then "data: [DONE]"
    line = orjson.dumps(body) + b"\ndata: [DONE]\n\n"
    assert detect_stream_overflow(line, wire_format="openai") is not None
    # ... also after an empty "data:" line
    after = b"data:\n" + orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n\n"
    assert detect_stream_overflow(after, wire_format="openai") is not None
    # a rate limit so is no overflow; a block that is not JSON whole is a normal one
    limited = {"error": {"message": "Rate limit reached for gpt-4o on tokens per min (TPM)"}}
    raw = b"data: " + orjson.dumps(limited, option=orjson.OPT_INDENT_2) + b"\n\n"
    assert detect_stream_overflow(raw, wire_format="openai") is None
    chunk = {"choices": [{"index": 0, "delta": {"content": _OPENAI_SAID}}]}
    odd = b"data: " + orjson.dumps(chunk) + b'\nx-note: {"error": 1}\n\n'
    assert detect_stream_overflow(odd, wire_format="openai") is None


def test_difys_stream_error_event_is_read() -> None:
    said = (
        "Query or prefix prompt is too long, you can reduce the prefix prompt, or shrink the"
        " max token, or switch to a llm with a larger token limit size."
    )
    event = {"event": "error", "code": "completion_request_error", "status": 400, "message": said}
    assert detect_stream_overflow(_sse(event), wire_format="openai") == Overflow(None, None)
    event["message"] = "Rate limit exceeded, please try again later."
    assert detect_stream_overflow(_sse(event), wire_format="openai") is None
    # Flowise's, with its data an object
    flowise = {"event": "error", "data": {"message": said}}
    assert detect_stream_overflow(_sse(flowise), wire_format="openai") == Overflow(None, None)


def test_a_status_and_its_body_as_the_whole_reply_is_read() -> None:
    # Open WebUI's pipelines: f"Error: {status} - {body}" as the reply, whole or one chunk
    message = "prompt is too long: 214316 tokens > 200000 maximum"
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    said = "Error: 400 - " + orjson.dumps(body).decode()
    whole = {"choices": [{"index": 0, "message": {"content": said}, "finish_reason": "stop"}]}
    assert detect_overflow(200, orjson.dumps(whole), wire_format="openai") == Overflow(
        214316, 200000
    )
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}
    chunk = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": None}]}
    assert detect_stream_overflow(_sse(role, chunk), wire_format="openai") is not None
    # a whole completion that counts output is a model's answer in those words, however
    # its usage names the count
    for usage in ({"prompt_tokens": 900, "completion_tokens": 60}, {"output_tokens": 60}):
        counted = {**whole, "usage": usage}
        assert detect_overflow(200, orjson.dumps(counted), wire_format="openai") is None
    # words after the body, a body with no error, or another status: an answer, or no overflow
    for text in (
        said + " Let me know if this helps.",
        "Error: 400 - " + orjson.dumps({"message": message}).decode(),
        said.replace("400", "429", 1),
    ):
        other = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None, text
    # (its DeepSeek pipeline wraps an exception that says so again: "Error: Error: 400 - ")
    twice = {"choices": [{"index": 0, "message": {"content": "Error: " + said}}]}
    assert detect_overflow(200, orjson.dumps(twice), wire_format="openai") is not None
    # its Bedrock pipeline answers with botocore's ClientError, where no model wrote it
    boto = (
        "Error: An error occurred (ValidationException) when calling the Converse operation:"
        " Input is too long for requested model."
    )
    bedrock = {"choices": [{"index": 0, "message": {"content": boto}, "finish_reason": "stop"}]}
    assert detect_overflow(200, orjson.dumps(bedrock), wire_format="openai") is not None
    throttled = boto.replace("ValidationException", "ThrottlingException").replace(
        "Input is too long for requested model.", "Too many tokens, please wait."
    )
    written: dict[str, Any] = {"prompt_tokens": 9, "completion_tokens": 30}
    for text, spent in ((throttled, None), (boto, written)):
        answer: dict[str, Any] = {
            "choices": [{"message": {"content": text}, "finish_reason": "stop"}]
        }
        if spent is not None:
            answer["usage"] = spent
        assert detect_overflow(200, orjson.dumps(answer), wire_format="openai") is None, text
    # antigravity2api's "错误: API请求失败 (400): <body>" (error: API request failed), whole or
    # one chunk, the body as Google pretty-prints it
    google = {
        "error": {
            "code": 400,
            "message": "The input token count (1091639) exceeds the maximum number of tokens"
            " allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    }
    relayed = (
        "错误: API请求失败 (400): " + orjson.dumps(google, option=orjson.OPT_INDENT_2).decode()
    )
    whole = {"choices": [{"index": 0, "message": {"content": relayed + "\n"}}]}
    assert detect_overflow(200, orjson.dumps(whole), wire_format="openai") == Overflow(
        1091639, 1048576
    )
    chunk = {"choices": [{"index": 0, "delta": {"content": relayed}, "finish_reason": None}]}
    assert detect_stream_overflow(_sse(role, chunk), wire_format="openai") is not None
    # other words before the status, the status outside the parentheses, or another: no
    for text in (
        relayed.replace("API请求失败", "请求失败", 1),
        relayed.replace("错误: API请求失败", "Error: Bad Request", 1),
        relayed.replace(" (400):", ": 400 -", 1),
        relayed.replace("(400)", "(429)", 1),
    ):
        other = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None, text
    # VCPToolBox's "[UPSTREAM_ERROR] 上游API返回状态码 400，错误信息: <body>" (the upstream API
    # returned status 400, error message:), as a stream's one chunk
    relayed = "[UPSTREAM_ERROR] 上游API返回状态码 400，错误信息: " + orjson.dumps(google).decode()
    chunk = {"choices": [{"index": 0, "delta": {"content": relayed}, "finish_reason": "stop"}]}
    got = detect_stream_overflow(_sse(chunk) + b"data: [DONE]\n\n", wire_format="openai")
    assert got == Overflow(1091639, 1048576)
    for text in (relayed.replace("400", "429", 1), "Here it is: " + relayed):
        chunk["choices"][0]["delta"] = {"content": text}
        assert detect_stream_overflow(_sse(chunk), wire_format="openai") is None, text
    # Mcp-AI Proxy's "上游返回错误 (400)：<body>" (the upstream returned an error), a full-width
    # colon before the pretty-printed body, as a chat chunk's or a Gemini candidate's whole
    # text with its finish reason
    pretty = orjson.dumps(google, option=orjson.OPT_INDENT_2).decode()
    relayed = "\n\n上游返回错误 (400)：" + pretty + "\n"
    chunk = {"choices": [{"index": 0, "delta": {"content": relayed}, "finish_reason": "stop"}]}
    got = detect_stream_overflow(_sse(chunk) + b"data: [DONE]\n\n", wire_format="openai")
    assert got == Overflow(1091639, 1048576)

    def candidate(text: str) -> bytes:
        parts = [{"text": text}]
        doc = {
            "candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP"}]
        }
        return _sse(doc)

    assert detect_stream_overflow(candidate(relayed), wire_format="gemini") == got
    # a 429's body so, or the words after the body or before the label: none
    for text in (
        relayed.replace("(400)", "(429)"),
        relayed + "So shorten it.",
        "The proxy said: " + relayed.lstrip(),
    ):
        assert detect_stream_overflow(candidate(text), wire_format="gemini") is None, text


def test_claude_codes_api_error_as_the_whole_reply_is_its_error() -> None:
    # bridges that run Claude Code return its result, "API Error: 400 {...}", as the reply
    # (claude-max-proxy-py: a whole answer counting nothing; claude-code-relay: a stream's
    # one chunk with its finish reason)
    said = {
        "type": "invalid_request_error",
        "message": "prompt is too long: 212842 tokens > 200000 maximum",
    }
    relayed = "API Error: 400 " + orjson.dumps({"type": "error", "error": said}).decode()
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": relayed}}
    whole: dict[str, Any] = {"choices": [{**choice, "finish_reason": "stop"}], "usage": usage}
    got = detect_overflow(200, orjson.dumps(whole), wire_format="openai")
    assert got == Overflow(212842, 200000, whole=True)
    chunk = {"choices": [{"index": 0, "delta": {"content": relayed}, "finish_reason": "stop"}]}
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") is not None
    # a reply that introduces it, another status, or output counted: the model's answer
    for text in ("It said: " + relayed, relayed.replace("400", "429")):
        other = {**whole, "choices": [{**choice, "message": {"content": text}}]}
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None, text
    spent = {**whole, "usage": {**usage, "completion_tokens": 80}}
    assert detect_overflow(200, orjson.dumps(spent), wire_format="openai") is None


def test_the_system_prompts_own_cap_is_no_overflow() -> None:
    # "Prompt exceeds maximum length" (Zhipu, MLX servers) is listed; nvd-claude-proxy's
    # cap on the system prompt, which no trim shortens, is not it
    system = "Value error, System prompt exceeds maximum length of 256000 characters"
    assert detect_overflow(400, orjson.dumps({"error": system}), wire_format="openai") is None
    listed = "Prompt exceeds max length"
    assert detect_overflow(400, orjson.dumps({"error": listed}), wire_format="openai")
    for system in ("System-prompt", "system_prompt"):
        said = f"{system} exceeds maximum length of 256000 characters"
        assert detect_overflow(400, orjson.dumps({"error": said}), wire_format="openai") is None


def test_a_remedy_after_an_overflow_may_name_what_to_shorten() -> None:
    # TensorSharp: the tool result its advice names is what to shorten, not a limit of
    # its own; the generic readers take it as they take the first sentence alone
    said = (
        "The protected prompt requires 20480 tokens after old conversation turns are"
        " removed, which exceeds the model's 16384-token context window."
    )
    remedy = " Start a new chat or shorten the latest request/tool result; it cannot be safely"
    body = orjson.dumps({"error": said + remedy + " truncated."})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(20480, 16384)
    # ... but a tool, a file or an image over its own limit is stated, not advised; and a
    # remedy that names an output, a time or a size is kept, as any sentence is
    for other in (
        "The tool result requires 20480 tokens, which exceeds the model's 16384-token context"
        " window. Shorten the tool result.",
        said + " Reduce max_tokens or shorten the tool result.",
        said + " Shorten the tool result or try again later.",
        said + " Remove files over 10 MB.",
        said + " The tool result is too large.",
        # (a remedy that states an excess of its own states a limit; files and images are
        # named, as they are in the first sentence)
        "Bad request.\nRemove the tool result, which exceeds the maximum input length.",
        "Request rejected.\nShorten the tool result: it has too many tokens.",
        "Input exceeds the maximum allowed length. Reduce the image resolution.",
        "Input exceeds the maximum length. Split the document into smaller chunks.",
        "Input exceeds context. Reduce tool output tokens.",
    ):
        assert detect_overflow(400, orjson.dumps({"error": other}), wire_format="openai") is None


def test_advice_after_an_overflow_does_not_veto_it() -> None:
    # freellmapi's router, when no candidate's window fits the prompt, advises on keys and
    # rate limits in a sentence of its own
    said = (
        "The request is too large for every available candidate's context/token window."
        " Reduce the prompt/history size or enable a larger-context model. All models"
        " exhausted: 4 routes checked (4 prompt too large for the model). Add more API keys"
        " or wait for rate limits to reset."
    )
    coded = {"error": {"message": said, "code": "context_length_exceeded"}}
    assert detect_overflow(413, orjson.dumps(coded), wire_format="openai") == Overflow(None, None)
    # the first sentence states the error: there a rate limit or a key is never advice
    for first in (
        "Add more API keys: the prompt exceeds the context window.",
        "Rate limit reached: the prompt exceeds the context window. Try again in 20s.",
        "The prompt exceeds the context window for your API key tier. Try a smaller prompt.",
    ):
        body = orjson.dumps({"error": {"message": first, "code": "context_length_exceeded"}})
        assert detect_overflow(400, body, wire_format="openai") is None, first
    # nor is a sentence that is not advice ("Your quota ..."), or advice's words alone
    quota = said.replace("Add more API keys", "Your quota is spent; add more API keys")
    body = orjson.dumps({"error": {"message": quota, "code": "context_length_exceeded"}})
    assert detect_overflow(413, body, wire_format="openai") is None
    # waiting is how a rate limit is fixed: "Try again in ...", "Retry after ..." are no
    # advice here, nor is advice that names a quota, a rate per period, credits or a tier
    for limited in (
        "Too many tokens: 45000 exceeds the limit of 30000. Try again in 1 minute when the"
        " TPM limit resets.",
        "Prompt too long; try again after your quota resets (45000 tokens > 30000 limit).",
        "Request too large: 45000 tokens exceeds the maximum of 30000 tokens. Retry after the"
        " rate limit window resets.",
        "Your prompt is too long: 45000 tokens > 30000 token limit. Consider upgrading your"
        " plan to raise your tokens per minute quota.",
        "Prompt exceeds max tokens allowed (45000 > 32768). Contact support to increase your"
        " quota.",
        # advice is let pass only where the message names the context window
        "45000 tokens exceeds the limit of 30000 tokens. Consider upgrading your plan for"
        " higher rate limits.",
        "45000 tokens exceeds the limit of 30000 tokens. Add a payment method to raise your"
        " limits.",
    ):
        for status in (400, 413, 500):
            body = _error_body(limited)
            assert detect_overflow(status, body, wire_format="openai") is None, limited
        stream = b"data: " + _error_body(limited) + b"\n\n"
        assert detect_stream_overflow(stream, wire_format="openai") is None, limited
    horde = (
        "Too many anonymous requests on using the AI Horde currently (4/3). Please consider"
        " getting a personal API key at https://aihorde.net/register."
    )
    assert detect_overflow(400, _error_body(horde), wire_format="openai") is None
    assert detect_suspect(400, _error_body(horde), plain=True) is None


def test_a_bracketed_error_as_the_whole_reply_is_read_where_no_model_wrote_it() -> None:
    # codex-pool turns a Codex response.failed into "[Error: <its message>]" as the reply:
    # a completion with no usage (or no output counted), a chunk with its finish reason
    said = "[Error: Your input exceeds the context window of this model. Please adjust your input.]"
    whole = {"choices": [{"index": 0, "message": {"content": said}, "finish_reason": "stop"}]}
    assert detect_overflow(200, orjson.dumps(whole), wire_format="openai") == Overflow(None, None)
    counted = {**whole, "usage": {"prompt_tokens": 10, "completion_tokens": 0}}
    assert detect_overflow(200, orjson.dumps(counted), wire_format="openai") is not None
    chunk = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "stop"}]}
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") == Overflow(None, None)
    # ... and an Anthropic text delta so, closed by a message_delta that counts no output
    start = {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}}
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": said},
    }
    stop = {"type": "content_block_stop", "index": 0}

    def closed(output_tokens: int) -> dict[str, Any]:
        usage = {"output_tokens": output_tokens}
        return {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}

    stream = _sse(start, delta, stop, closed(0))
    assert detect_stream_overflow(stream, wire_format="anthropic") == Overflow(None, None)
    # a model's answer in the same words: output counted, or no finish reason beside it
    answered = _sse(start, delta, stop, closed(25))
    assert detect_stream_overflow(answered, wire_format="anthropic") is None
    spent = {**whole, "usage": {"prompt_tokens": 10, "completion_tokens": 25}}
    assert detect_overflow(200, orjson.dumps(spent), wire_format="openai") is None
    # ... and a chunk whole without its finish reason, closed by the next with nothing more
    # written (local-ai-runtime's "\n[Error: API stream 400: {...}]"): the server's; more
    # text after it makes it a model's
    unfinished = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": None}]}
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    read = detect_stream_overflow(_sse(unfinished, finish), wire_format="openai")
    assert read == Overflow(None, None)
    broken = {"choices": [{"index": 0, "delta": {"content": "\n" + said}}]}
    assert detect_stream_overflow(_sse(broken, finish), wire_format="openai") == read
    more = {"choices": [{"index": 0, "delta": {"content": " Retry later."}}]}
    assert detect_stream_overflow(_sse(unfinished, more, finish), wire_format="openai") is None
    # words around the brackets, a bracket left open, or another error inside them
    for reply in ("Output: " + said, said[:-1], "[Error: rate limit reached, retry in 20s]"):
        other = {"choices": [{"message": {"content": reply}, "finish_reason": "stop"}]}
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None, reply


def test_claude_codes_refusal_as_the_whole_reply_is_read_where_no_model_wrote_it() -> None:
    # bridges that run Claude Code relay its "Prompt is too long" as the reply: a whole
    # answer that counts no prompt (or carries no usage), as a chat completion, a Messages
    # answer or a Gemini candidate; a chunk with its finish reason; or a chat stream's first
    # text, finished by the next chunk with nothing more written
    said = "Prompt is too long"
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    chat = {"choices": [{"index": 0, "message": {"role": "assistant", "content": said}}]}
    chat["choices"][0]["finish_reason"] = "stop"
    message: dict[str, Any] = {"type": "message", "content": [{"type": "text", "text": said}]}
    message |= {"stop_reason": "end_turn", "usage": {"input_tokens": 0, "output_tokens": 0}}
    candidate = {"content": {"role": "model", "parts": [{"text": said}]}, "finishReason": "OTHER"}
    gemini = {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 0}}
    for whole in ({**chat, "usage": usage}, chat, message, gemini):
        read = detect_overflow(200, orjson.dumps(whole), wire_format="openai")
        assert read == Overflow(None, None), whole
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    said_chunk = {"choices": [{"index": 0, "delta": {"content": said}}]}
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    one = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "stop"}]}
    for stream in (_sse(role, said_chunk, finish), _sse(one)):
        assert detect_stream_overflow(stream, wire_format="openai") == Overflow(None, None)
    # ... and its later versions' details after a middle dot, whole or streamed
    dotted = said + " \u00b7 the request is ~208473 tokens (limit 200000) but this conversation"
    dotted += " is only ~1532 tokens \u2014 the rest is system prompt and tools."
    detailed = {**chat, "usage": usage}
    detailed["choices"] = [{"index": 0, "message": {"content": dotted}, "finish_reason": "stop"}]
    assert detect_overflow(200, orjson.dumps(detailed), wire_format="openai") is not None
    dotted_chunk = {"choices": [{"index": 0, "delta": {"content": dotted}}]}
    stream = _sse(role, dotted_chunk, finish)
    assert detect_stream_overflow(stream, wire_format="openai") is not None
    assert overflow.stream_event_output(_sse(said_chunk)) == overflow.CLI_REFUSAL
    held = overflow.stream_event_output(_sse(finish), held=overflow.CLI_REFUSAL)
    assert held == overflow.UNSPENT
    # a model's answer in those words: a usage that counts the prompt, more text after it,
    # the words among others, or another sentence
    counted = {**chat, "usage": {"prompt_tokens": 900, "completion_tokens": 5}}
    assert detect_overflow(200, orjson.dumps(counted), wire_format="openai") is None
    more = {"choices": [{"index": 0, "delta": {"content": " for this model."}}]}
    answered = _sse(role, said_chunk, more, finish)
    assert detect_stream_overflow(answered, wire_format="openai") is None
    for reply in ("The error said: Prompt is too long", "prompt is too long", "Prompt is too"):
        other = {**chat, "usage": usage}
        other["choices"] = [{"index": 0, "message": {"content": reply}, "finish_reason": "stop"}]
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None, reply
    two = {**gemini, "candidates": [candidate, candidate]}
    assert detect_overflow(200, orjson.dumps(two), wire_format="gemini") is None


def test_an_upstreams_error_in_a_list_of_one_ends_a_framed_reply() -> None:
    # polyclaude writes "[polyclaude error] backend 400: " and the first 400 characters of
    # the upstream's body as the reply; Google's OpenAI-compatible endpoints send their
    # error as a list of one
    inner = [
        {
            "error": {
                "code": 400,
                "message": "The input token count (1093507) exceeds the maximum number of"
                " tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        }
    ]
    start = {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}}
    opened = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    stop = {"type": "content_block_stop", "index": 0}

    def replied(text: str, output_tokens: int) -> bytes:
        delta = {"type": "content_block_delta", "index": 0}
        delta["delta"] = {"type": "text_delta", "text": text}
        usage = {"output_tokens": output_tokens}
        end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
        return _sse(start, opened, delta, stop, end)

    said = "[polyclaude error] backend 400: " + json.dumps(inner, indent=2) + "\n"
    read = detect_stream_overflow(replied(said, 0), wire_format="anthropic")
    assert read == Overflow(1093507, 1048576)
    assert detect_stream_overflow(replied(said, 30), wire_format="anthropic") is None
    # a list of two, or one that is no error, is a model's text
    two = said.replace("[\n", "[\n" + json.dumps(inner[0]) + ",\n", 1)
    other = said.replace('"error"', '"answer"', 1)
    for text in (two, other):
        assert detect_stream_overflow(replied(text, 0), wire_format="anthropic") is None, text


def test_a_gateways_upstream_status_stands_for_the_type_it_wrote() -> None:
    # VaalaCat's ai-gateway types every error written into a stream it opened early
    # "rate_limit_error", its message "upstream returned <status>: <the body, cut>"
    cut = (
        'upstream returned 400: {\n    "error": {\n        "message": "' + _OPENAI_SAID + '",\n'
        '        "type": "invalid_request_error",\n ...'
    )
    body = {"error": {"message": cut, "type": "rate_limit_error"}}
    read = detect_overflow(200, orjson.dumps(body), wire_format="openai")
    assert read == Overflow(130512, 128000, whole=True)
    stream = b": keepalive\n\ndata: " + orjson.dumps(body) + b"\n\ndata: [DONE]\n\n"
    assert detect_stream_overflow(stream, wire_format="openai") == read
    # the upstream's own rate limit, or words before the status: the type holds
    limited = {"error": {"message": cut.replace("400", "429", 1), "type": "rate_limit_error"}}
    assert detect_overflow(200, orjson.dumps(limited), wire_format="openai") is None
    said = {"error": {"message": "queue wait: " + cut, "type": "rate_limit_error"}}
    assert detect_overflow(200, orjson.dumps(said), wire_format="openai") is None
    # coderouter names the one upstream its failover tried, typing the stream's error
    # "overloaded_error" whatever the upstream said
    refused = "prompt is too long: 210000 tokens > 200000 maximum"
    upstream = {"type": "error", "error": {"type": "invalid_request_error", "message": refused}}
    failed = "profile='claude-code': all providers failed: [cloud-sonnet status=N] N from"
    failed += " upstream: b'" + json.dumps(upstream, separators=(",", ":")) + "'"
    for status, read in (("400", Overflow(210000, 200000, whole=True)), ("529", None)):
        error = {"type": "overloaded_error", "message": failed.replace("N", status)}
        event = {"type": "error", "error": error}
        block = b"event: error\ndata: " + orjson.dumps(event) + b"\n\n"
        assert detect_stream_overflow(block, wire_format="anthropic") == read, status
    # neuralbrok's 503 names the last upstream's status; llmcycle writes its failover's
    # error as a stream's whole reply, finished beside it
    lmstudio = {"error": "Trying to keep the first 6391 tokens when context the overflows."}
    last = "All providers failed. Tried: lmstudio. Last: [lmstudio] LM Studio HTTP N: "
    openai = json.dumps({"error": {"message": _OPENAI_SAID, "type": "invalid_request_error"}})
    cycled = "\n\n[LLMCycle Proxy Error]: All 3 providers failed. Last error: [standa] Bad"
    cycled += " request (N): " + openai
    for status, named in (("400", True), ("404", False), ("429", False)):
        message = last.replace("N", status) + json.dumps(lmstudio)
        wrapped = orjson.dumps(
            {"type": "error", "error": {"type": "overloaded_error", "message": message}}
        )
        got = detect_overflow(503, wrapped, wire_format="anthropic")
        assert (got is not None) is named, status
        delta = {"content": cycled.replace("N", status)}
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": "stop"}]}
        got = detect_stream_overflow(_sse(chunk), wire_format="openai")
        assert (got is not None) is named, status
    # proxytool's "upstream error (HTTP 400): {...}", a stream's one finished chunk
    llamacpp = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 40123,
            "n_ctx": 32768,
        }
    }
    delta = {"content": "upstream error (HTTP 400): " + json.dumps(llamacpp)}
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": "stop"}]}
    got = detect_stream_overflow(_sse(chunk), wire_format="openai")
    assert got == Overflow(40123, 32768)
    # (a reply that goes on after the body, or a chunk not finished beside it, is a reply)
    for delta, finish in (
        ({"content": cycled.replace("N", "400") + " Retry?"}, "stop"),
        ({"content": cycled.replace("N", "400")}, None),
    ):
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        assert detect_stream_overflow(_sse(chunk), wire_format="openai") is None


def test_a_responses_item_added_is_output_unless_an_empty_message() -> None:
    # an empty message's added events open a reply (LiteLLM's before its incomplete stop);
    # a reasoning item or a call added means the model is generating: the stream goes out
    def added(item: dict[str, Any]) -> bytes:
        return _sse({"type": "response.output_item.added", "output_index": 0, "item": item})

    empty = {"type": "message", "role": "assistant", "content": []}
    assert stream_event_output(added(empty)) == ""
    part = {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}}
    assert stream_event_output(_sse(part)) == ""
    for item in (
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "name": "shell", "arguments": "", "call_id": "c1"},
    ):
        assert stream_event_has_output(added(item)), item
    refusal = {**part, "part": {"type": "refusal", "refusal": ""}}
    assert stream_event_has_output(_sse(refusal))


def test_a_messages_stop_at_max_tokens_counting_the_prompt_alone_is_read() -> None:
    # text-generation-webui's Messages route (and hebo-gateway, Pollinations) answers a
    # prompt that filled the window as a stop at max_tokens with nothing written, its usage
    # counting the prompt and no output: no model stops at its limit before a token
    usage = {"input_tokens": 41210, "output_tokens": 0}
    whole = {"type": "message", "role": "assistant", "content": [], "stop_reason": "max_tokens"}
    read = detect_overflow(200, orjson.dumps({**whole, "usage": usage}), wire_format="anthropic")
    assert read == Overflow(None, None)
    empty_text = {**whole, "content": [{"type": "text", "text": ""}], "usage": usage}
    assert detect_overflow(200, orjson.dumps(empty_text), wire_format="anthropic") is not None
    start = {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}}

    def stopped(counts: dict[str, int]) -> bytes:
        delta = {"stop_reason": "max_tokens", "stop_sequence": None}
        return _sse(start, {"type": "message_delta", "delta": delta, "usage": counts})

    assert detect_stream_overflow(stopped(usage), wire_format="anthropic") == Overflow(None, None)
    # Ollama's floor of one output token when the prompt fills its window (32767 of
    # 32768), as Messages bridges over it relay the stop
    floor = {"input_tokens": 32767, "output_tokens": 1}
    read = detect_overflow(200, orjson.dumps({**whole, "usage": floor}), wire_format="anthropic")
    assert read == Overflow(None, None)
    assert detect_stream_overflow(stopped(floor), wire_format="anthropic") == read
    # output counted or written, a cache's replay, no prompt counted: a model's stop; one
    # token after a short prompt is a one-token probe's answer
    for counts in (
        {"input_tokens": 41210, "output_tokens": 3},
        {"input_tokens": 12, "output_tokens": 1},
        {"input_tokens": 41210, "output_tokens": 0, "cache_read_input_tokens": 40000},
        {"input_tokens": 0, "output_tokens": 0},
        {"output_tokens": 0},
        # a prompt smaller than any window: a bridge over a thinking model that hid the
        # thinking a small max_tokens spent (Api-Conversion over Gemini)
        {"input_tokens": 14, "output_tokens": 0},
    ):
        body = orjson.dumps({**whole, "usage": counts})
        assert detect_overflow(200, body, wire_format="anthropic") is None, counts
        assert detect_stream_overflow(stopped(counts), wire_format="anthropic") is None, counts
    for content in ([{"type": "text", "text": "Hel"}], [{"type": "thinking", "thinking": ""}]):
        body = orjson.dumps({**whole, "content": content, "usage": usage})
        assert detect_overflow(200, body, wire_format="anthropic") is None, content
    said = _sse(
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
    )
    tail = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": usage}
    assert detect_stream_overflow(said + _sse(tail), wire_format="anthropic") is None


def test_a_messages_stop_after_a_start_that_counted_the_prompt_is_read() -> None:
    # llmmllab's bridge (and modelmeld) count the prompt in message_start, then stop at
    # max_tokens stating only the output, 0: the prompt alone was counted
    def stream(start_input: int, delta_usage: dict[str, int], *, text: str = "") -> bytes:
        usage = {"input_tokens": start_input, "output_tokens": 0}
        start = {"type": "message_start", "message": {"content": [], "usage": usage}}
        said = []
        if text:
            block = {"type": "text_delta", "text": text}
            said = [{"type": "content_block_delta", "index": 0, "delta": block}]
        stop = {"stop_reason": "max_tokens", "stop_sequence": None}
        delta = {"type": "message_delta", "delta": stop, "usage": delta_usage}
        return _sse(start, {"type": "ping"}, *said, delta, {"type": "message_stop"})

    counted = stream(131209, {"output_tokens": 0})
    assert detect_stream_overflow(counted, wire_format="anthropic") == Overflow(None, None)
    # no prompt counted at the start, output counted or written, a cache's replay
    for other in (
        stream(0, {"output_tokens": 0}),
        stream(131209, {"output_tokens": 4}),
        stream(131209, {"output_tokens": 0}, text="Hel"),
        stream(131209, {"output_tokens": 0, "cache_read_input_tokens": 120000}),
    ):
        assert detect_stream_overflow(other, wire_format="anthropic") is None


def test_an_empty_text_delta_is_no_output_before_an_error() -> None:
    # vandamme-proxy opens a Messages reply (an empty block, an empty text delta) before it
    # writes the upstream's error into the stream
    start = {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}}
    opened = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}

    def delta(text: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }

    said = "Streaming error: HTTPException: 500: prompt is too long: 208473 tokens > 200000 maximum"
    error = {"error": {"message": said, "type": "streaming_error", "code": "stream_error"}}
    stream = _sse(start, opened, {"type": "ping"}, delta(""), error)
    assert detect_stream_overflow(stream, wire_format="anthropic") == Overflow(208473, 200000)
    assert stream_event_output(_sse(delta(""))) == ""
    assert stream_event_output(_sse({"type": "content_block_stop", "index": 0})) == ""
    # a delta with text is output: the error after it is the stream's end, not the prompt's
    assert stream_event_has_output(_sse(delta("Hel")))
    spoken = _sse(start, opened, delta("Hel"), error)
    assert detect_stream_overflow(spoken, wire_format="anthropic") is None


def test_a_reply_ending_in_an_upstreams_error_body_is_a_frame_in_a_messages_stream() -> None:
    # a Foundry proxy writes the upstream's error as the reply's one text, "Error from
    # upstream: 400 - <its body>", then closes it counting no output (and no input either)
    inner = {
        "error": {
            "message": "Input tokens exceed the configured limit of 272000 tokens. Your"
            " messages resulted in 300007 tokens. Please reduce the length of the messages.",
            "code": "context_length_exceeded",
        }
    }
    said = "Error from upstream: 400 - " + orjson.dumps(inner).decode()
    start = {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}}
    stop = {"type": "content_block_stop", "index": 0}

    def replied(text: str, output_tokens: int) -> bytes:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
        delta["delta"] = {"type": "text_delta", "text": text}
        usage = {"output_tokens": output_tokens}
        end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
        return _sse(start, delta, stop, end)

    read = detect_stream_overflow(replied(said, 0), wire_format="anthropic")
    assert read is not None and (read.real, read.maximum) == (300007, 272000)
    # output counted, or words after the body: a model's answer
    assert detect_stream_overflow(replied(said, 25), wire_format="anthropic") is None
    after = replied(said + " So the history is too long.", 0)
    assert detect_stream_overflow(after, wire_format="anthropic") is None
    # free-claude-code writes NVIDIA NIM's body, which has no "error" key, as the reply:
    # a message beside an HTTP error status as its code is an error body too
    nim = {
        "message": "This model's maximum context length is 202752 tokens. However, your"
        " messages resulted in 249928 tokens. Please reduce the length of the messages.",
        "type": "Bad Request",
        "code": 400,
    }
    read = detect_stream_overflow(replied(orjson.dumps(nim).decode(), 0), wire_format="anthropic")
    assert read is not None and (read.real, read.maximum) == (249928, 202752)
    for other in ({**nim, "code": 200}, {**nim, "code": "400"}, {"text": nim["message"]}):
        text = orjson.dumps(other).decode()
        assert detect_stream_overflow(replied(text, 0), wire_format="anthropic") is None, other
    # ... as the whole text only: words before it may be a model's answer quoting one
    quoted = "Example: " + orjson.dumps(nim).decode()
    assert detect_stream_overflow(replied(quoted, 0), wire_format="anthropic") is None


def test_a_messages_stream_closed_with_nothing_counted_then_an_error_is_read() -> None:
    # agentgateway serves a Messages stream from a Responses upstream: on the upstream's
    # error it closes the reply it opened (no output token counted), then writes the error
    start = {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}}
    usage = {"input_tokens": 0, "output_tokens": 0}
    closed = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
    stop = {"type": "message_stop"}
    said = "Your input exceeds the context window of this model. Please adjust your input."
    error = {"type": "error", "error": {"type": "context_length_exceeded", "message": said}}
    stream = _sse(start, closed, stop, error)
    assert detect_stream_overflow(stream, wire_format="anthropic") == Overflow(None, None)
    # a relay holding the stream holds the close, and the error decides
    assert overflow.stream_event_output(_sse(closed)) == overflow.NO_OUTPUT
    assert overflow.stream_event_output(_sse(stop)) == overflow.NO_OUTPUT
    assert detect_stream_overflow(_sse(start, stop, error), wire_format="anthropic") is not None
    # a placeholder delta with no stop reason is output, as before
    placeholder = {**closed, "delta": {"stop_reason": None}}
    assert overflow.stream_event_output(_sse(placeholder)) == overflow.OUTPUT
    # a reply that counted its output, even with no text, is an answer: the error after it
    # comes too late
    spent = {**closed, "usage": {"input_tokens": 4000, "output_tokens": 3}}
    assert overflow.stream_event_output(_sse(spent)) == overflow.OUTPUT
    assert detect_stream_overflow(_sse(start, spent, stop, error), wire_format="anthropic") is None
    # ... and so is one that wrote text before its close
    text = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": "Hi"},
    }
    assert (
        detect_stream_overflow(_sse(start, text, closed, stop, error), wire_format="anthropic")
        is None
    )


def test_an_error_line_as_the_whole_reply_is_read_where_no_model_wrote_it() -> None:
    # Apple-Intelligence-API answers the on-device model's refusal as the reply, one line
    said = "Error: Exceeded context window size."
    whole = {"choices": [{"message": {"content": said}, "finish_reason": "length"}]}
    assert detect_overflow(200, orjson.dumps(whole), wire_format="openai") == Overflow(None, None)
    chunk = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "length"}]}
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") == Overflow(None, None)
    # output counted, a chunk without its finish reason, more lines, or another error
    spent = {**whole, "usage": {"prompt_tokens": 4000, "completion_tokens": 9}}
    assert detect_overflow(200, orjson.dumps(spent), wire_format="openai") is None
    unfinished = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": None}]}
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    assert detect_stream_overflow(_sse(unfinished, finish), wire_format="openai") is None
    # a model's complete sentence finishes "stop", however it is sent
    stopped = {"choices": [{"message": {"content": said}, "finish_reason": "stop"}]}
    assert detect_overflow(200, orjson.dumps(stopped), wire_format="openai") is None
    one = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "stop"}]}
    assert detect_stream_overflow(_sse(one), wire_format="openai") is None
    for text in (
        said + "\nHere is why it happens.",
        said[:-1] + ". Trim the history and retry.",
        "Error: rate limit reached, retry in 20s",
    ):
        other = {"choices": [{"message": {"content": text}, "finish_reason": "length"}]}
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None, text


def test_llama_swaps_loading_status_is_held_and_bare_reasoning_is_output() -> None:
    def bare(said: str) -> bytes:
        return b"data: " + orjson.dumps({"choices": [{"delta": {"reasoning_content": said}}]})

    # llama-swap's status starts with a rule; its later chunks are held after it
    assert overflow.stream_event_output(bare("━━━━━")) == overflow.LOADING
    assert overflow.stream_event_output(bare("llama"), held=overflow.LOADING) == overflow.NO_OUTPUT
    said = "request (9416 tokens) exceeds the available context size (8192 tokens)"
    raw = orjson.dumps({"error": {"code": 400, "message": said}})
    status = b"\n\n".join([bare("━━━━━"), bare("llama"), bare("-swap"), bare("\n")])
    assert detect_stream_overflow(status + b"\n\n" + raw, wire_format="openai") is not None
    # a server's own reasoning in that bare shape starts otherwise: output at once
    assert overflow.stream_event_output(bare("Let me think")) == overflow.OUTPUT
    thinking = b"\n\n".join([bare("Let me think"), bare("llama")]) + b"\n\n" + raw
    assert detect_stream_overflow(thinking, wire_format="openai") is None
    # after the status, the model's first chunk is output, as after any other opener
    real = {"id": "c1", "choices": [{"index": 0, "delta": {"reasoning_content": "Hm"}}]}
    first = b"data: " + orjson.dumps(real)
    assert overflow.stream_event_output(first, held=overflow.LOADING) == overflow.OUTPUT


def test_a_line_stating_an_overflow_with_its_counts_as_the_whole_reply_is_read() -> None:
    # m4gshm's OpenVINO agent server answers a prompt over its limit as the reply, one line,
    # finished "length", the completion with no usage (pydantic's compact JSON)
    said = "prompt exceeds limit: 33000 >= 32768"
    choice: dict[str, Any] = {"index": 0, "message": {"content": said}, "finish_reason": "length"}
    whole: dict[str, Any] = {"object": "chat.completion", "usage": None, "choices": [choice]}
    body = orjson.dumps(whole)
    assert b'"finish_reason":"length"' in body
    assert detect_overflow(200, body, wire_format="openai") == Overflow(33000, 32768)
    chunk = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": "length"}]}
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") == Overflow(33000, 32768)
    # output counted, no counts, another finish, or more than one line: an answer
    spent = {**whole, "usage": {"prompt_tokens": 4000, "completion_tokens": 12}}
    stopped = {**whole, "choices": [{**choice, "finish_reason": "stop"}]}
    failed = {**whole, "choices": [{**choice, "finish_reason": "error"}]}
    for other in (spent, stopped, failed):
        assert detect_overflow(200, orjson.dumps(other), wire_format="openai") is None
    for text in (
        "prompt exceeds limit",
        said + "\nSo the history was cut.",
        said + ". So the history was cut.",
        said + " {x}",
        f"The API said &quot;{said}&quot;",  # (quotes, HTML-escaped or not: an answer)
        f"The API said \u00ab{said}\u00bb",
    ):
        reply = {"choices": [{"message": {"content": text}, "finish_reason": "length"}]}
        assert detect_overflow(200, orjson.dumps(reply), wire_format="openai") is None, text


def test_a_servers_error_line_finished_as_a_model_would_is_read_when_nothing_was_output() -> None:
    # LLMPlayer answers a prompt over its window with a whole reply, "Error: <its refusal>",
    # finished "stop" (Messages: "end_turn"), whose usage counts the prompt and no output
    said = "Error: prompt too long (2311 tokens, max 2047)"
    spent = {"prompt_tokens": 2311, "completion_tokens": 0, "total_tokens": 2311}
    assert detect_overflow(200, _whole_reply(said, "stop", spent), wire_format="openai") == (
        Overflow(2311, 2047)
    )
    message = _messages_reply(said, "end_turn", {"input_tokens": 2311, "output_tokens": 0})
    block = message["content"][0]
    read = detect_overflow(200, orjson.dumps(message), wire_format="anthropic")
    assert read is not None and (read.real, read.maximum) == (2311, 2047)
    # output counted, no prompt counted, no usage, a refusal without both counts, or more
    # than the one line: a model may have written it
    for other in (
        _whole_reply(said, "stop", {**spent, "completion_tokens": 14}),
        _whole_reply(said, "stop", {**spent, "prompt_tokens": 0}),
        _whole_reply(said, "stop"),
        _whole_reply("Error: prompt too long.", "stop", spent),
        _whole_reply(said + "\nShorten it.", "stop", spent),
        _whole_reply("prompt too long (2311 tokens, max 2047)", "stop", spent),
        orjson.dumps({**message, "usage": {"input_tokens": 2311, "output_tokens": 9}}),
        orjson.dumps({**message, "content": [block, block]}),
        # a cache's replay, a total above the prompt, reasoning beside the text: a model's
        _whole_reply(said, "stop", {**spent, "prompt_tokens_details": {"cached_tokens": 9}}),
        _whole_reply(said, "stop", {**spent, "total_tokens": 2400}),
        orjson.dumps(
            {
                "choices": [
                    {
                        "message": {"content": said, "reasoning_content": "Hm"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": spent,
            }
        ),
        orjson.dumps({**message, "usage": {**message["usage"], "cache_read_input_tokens": 9}}),
    ):
        assert detect_overflow(200, other, wire_format="openai") is None, other


def test_an_upstreams_refusal_as_a_reply_that_counted_nothing_is_read() -> None:
    # EvalScope's agent bridge answers a provider's context-length 400 as a whole reply, the
    # provider's message as its text, finished "length" (Anthropic: stopped at max_tokens),
    # with a usage of 0 prompt and 0 output tokens: no model ran
    said = (
        "This model's maximum context length is 32768 tokens. However, you requested 33548"
        " tokens (31500 in the messages, 2048 in the completion). Please reduce the length of"
        " the messages or completion."
    )
    nothing = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    body = _whole_reply(said, "length", nothing)
    assert detect_overflow(200, body, wire_format="openai") == Overflow(31500, 30720)
    ended = _whole_reply(said + "\n", "length", nothing)
    assert detect_overflow(200, ended, wire_format="openai") == Overflow(31500, 30720)
    message = _messages_reply(
        "prompt is too long: 208656 tokens > 200000 maximum",
        "max_tokens",
        {"input_tokens": 0, "output_tokens": 0},
    )
    block = message["content"][0]
    read = detect_overflow(200, orjson.dumps(message), wire_format="anthropic")
    assert read is not None and (read.real, read.maximum) == (208656, 200000)
    # a prompt, output, total or cache read counted, no usage, another finish or stop, more
    # than one text or choice, a tool call beside it, or a text that quotes the error,
    # says more than one line, or states no counts (servers that write a usage of zeros
    # on every answer exist): an answer
    counted = {**nothing, "prompt_tokens": 31500}
    explained = f'The error "{said}" means the history is too long.'
    quoted = {**message, "content": [{"type": "text", "text": f"That message, {explained}"}]}
    tool = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    choice = orjson.loads(body)["choices"][0]
    for other in (
        _whole_reply(said, "length", counted),
        _whole_reply(said, "length", {**nothing, "completion_tokens": 60}),
        _whole_reply(said, "length", {**nothing, "total_tokens": 4100}),
        _whole_reply(said, "length"),
        _whole_reply(said, "stop", nothing),
        _whole_reply(explained, "length", nothing),
        _whole_reply(said + "\nSo the history is cut.", "length", nothing),
        _whole_reply("Input is too long for the context window.", "length", nothing),
        orjson.dumps({**orjson.loads(body), "choices": [choice, choice]}),
        orjson.dumps(
            {
                **orjson.loads(body),
                "choices": [{**choice, "message": {**choice["message"], "tool_calls": [tool]}}],
            }
        ),
        orjson.dumps({**message, "stop_reason": "end_turn"}),
        orjson.dumps({**message, "usage": {"input_tokens": 9, "output_tokens": 0}}),
        orjson.dumps({**message, "usage": {**message["usage"], "cache_read_input_tokens": 9}}),
        orjson.dumps({**message, "content": [block, block]}),
        orjson.dumps(quoted),
        _whole_reply(f"That error, \u2018{said}\u2019, means so.", "length", nothing),
        _whole_reply(f"That error, &quot;{said}&quot;, means so.", "length", nothing),
        _whole_reply(said, "length", {**nothing, "prompt_tokens_details": {"cached_tokens": 9}}),
    ):
        assert detect_overflow(200, other, wire_format="openai") is None, other


def test_html_escapes_in_a_message_are_read_as_their_characters() -> None:
    # the AI Services WordPress plugin relays Anthropic's message HTML-escaped
    said = (
        "Generating content with model claude-sonnet-4 failed: Error while making request to"
        " the Anthropic API: prompt is too long: 208311 tokens &gt; 200000 maximum "
    )
    doc = {"code": "rest_generating_content_failed", "message": said, "data": {"status": 500}}
    read = detect_overflow(500, orjson.dumps(doc), wire_format="openai")
    assert read is not None and (read.real, read.maximum) == (208311, 200000)


def test_an_empty_reply_finished_length_before_any_output_is_an_overflow() -> None:
    # LMDeploy (to 0.9) answers a prompt that leaves no room in its session with no text,
    # finished "length", the prompt counted and no output token (indistinguishable from an
    # answer to max_tokens 0, which few servers take)
    counted = {"prompt_tokens": 2391, "completion_tokens": 0, "total_tokens": 2391}
    body = _whole_reply("", "length", counted)
    assert detect_overflow(200, body, wire_format="openai") == Overflow(None, None)
    # (LMDeploy 0.6 may finish it "stop", its output counted below zero: the total less
    # the prompt, issue 3036)
    below = {"prompt_tokens": 60008, "completion_tokens": -55973, "total_tokens": 4035}
    for finish in ("stop", "length"):
        read = detect_overflow(200, _whole_reply("", finish, below), wire_format="openai")
        assert read == Overflow(None, None)
    spaced = _whole_reply("", "stop", below).replace(
        b'"completion_tokens":', b'"completion_tokens" : '
    )
    assert detect_overflow(200, spaced, wire_format="openai") == Overflow(None, None)
    for uncounted in ({"completion_tokens": -1}, {"prompt_tokens": 0, "completion_tokens": -1}):
        read = detect_overflow(200, _whole_reply("", "stop", uncounted), wire_format="openai")
        assert read is None, uncounted
    # Ollama counts one output token where the prompt filled its window (32767 of 32768),
    # not after a short prompt (a one-token probe's answer) nor beside a larger total
    floor = {"prompt_tokens": 32767, "completion_tokens": 1, "total_tokens": 32768}
    read = detect_overflow(200, _whole_reply("", "length", floor), wire_format="openai")
    assert read == Overflow(None, None)
    for other_floor in (
        {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
        {**floor, "total_tokens": 32900},
        {**floor, "completion_tokens": 2, "total_tokens": 32769},
    ):
        read = detect_overflow(200, _whole_reply("", "length", other_floor), wire_format="openai")
        assert read is None, other_floor
    # (LlamaEdge 0.11 counts a total of 0: below the prompt, a slip, not reasoning apart)
    slipped = _whole_reply("", "length", {**counted, "total_tokens": 0})
    assert detect_overflow(200, slipped, wire_format="openai") == Overflow(None, None)
    tool = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    doc = orjson.loads(body)
    message = doc["choices"][0]["message"]

    def said(**fields: Any) -> bytes:
        return orjson.dumps({**doc, "choices": [{**doc["choices"][0], "message": fields}]})

    # (gateways over Gemini write thinking that spent a small max_tokens apart from the
    # output count: in the total, or in the output's details)
    thought = {"completion_tokens_details": {"reasoning_tokens": 60}}
    for other in (
        _whole_reply("", "length", {**counted, "completion_tokens": 512}),  # reasoning spent
        _whole_reply("", "length", {**counted, "total_tokens": 2451}),
        _whole_reply("", "length", {**counted, **thought}),
        _whole_reply("", "length", {**counted, "prompt_tokens_details": {"cached_tokens": 9}}),
        said(role="assistant", content=None),
        said(role="assistant", content="", thinking="Hm"),
        said(role="assistant", content="", refusal="No."),
        _whole_reply("", "length", {**counted, "prompt_tokens": 0}),
        _whole_reply("", "length"),
        _whole_reply("", "stop", counted),
        _whole_reply("Hi", "stop", {**counted, "completion_tokens": -55973}),
        orjson.dumps({**doc, "choices": [*doc["choices"], *doc["choices"]]}),
        orjson.dumps(
            {
                **doc,
                "choices": [{**doc["choices"][0], "message": {**message, "tool_calls": [tool]}}],
            }
        ),
        orjson.dumps(
            {
                **doc,
                "choices": [
                    {**doc["choices"][0], "message": {**message, "reasoning_content": "Hm"}}
                ],
            }
        ),
    ):
        assert detect_overflow(200, other, wire_format="openai") is None, other
    # streamed (LlamaEdge, text-generation-webui): the stop before any output, its usage in
    # its chunk or the next, whatever the request's output limit, as the whole reply is
    stop = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    usage = {"choices": [], "usage": counted}
    opener = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    for stream in (
        _sse({**stop, "usage": counted}),
        _sse(opener) + _sse(stop) + _sse(usage) + b"data: [DONE]\n\n",
        _sse(stop) + b": keep-alive\n\n" + _sse(usage),
        # (a chunk with no usage and no output between waits, as the relay does)
        _sse(stop) + _sse({"choices": [], "usage": None}) + _sse(usage),
    ):
        assert detect_stream_overflow(stream, wire_format="openai") == Overflow(None, None)
    # an error after the stop is read for itself
    words = "This model's maximum context length is 4096 tokens. However, your messages"
    error = {"error": {"message": words + " resulted in 5000 tokens."}}
    read = detect_stream_overflow(_sse(stop) + _sse(error), wire_format="openai")
    assert read is not None and read.maximum == 4096
    # ... not after text, nor with a usage that counts more, or none, or a cached prompt
    text = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    for stream in (
        _sse(text) + _sse({**stop, "usage": counted}),
        _sse(stop) + _sse({"choices": [], "usage": {**counted, "completion_tokens": 512}}),
        _sse(stop) + _sse({"choices": [], "usage": {**counted, "total_tokens": 2451}}),
        _sse(stop) + b"data: [DONE]\n\n",
        _sse(stop),
        _sse(stop) + _sse({"choices": [], "usage": {**counted, **thought}}),
    ):
        assert detect_stream_overflow(stream, wire_format="openai") is None, stream


def test_an_openai_format_window_stop_with_nothing_said_is_an_overflow() -> None:
    # GLM's OpenAI-compatible API: one chunk, or a whole completion, finished
    # "model_context_window_exceeded" whose delta is the opener alone
    choice: dict[str, Any] = {"index": 0, "finish_reason": "model_context_window_exceeded"}
    opener = {"role": "assistant", "content": ""}
    chunk: dict[str, Any] = {"id": "1", "model": "glm-5", "choices": [{**choice, "delta": opener}]}
    assert detect_stream_overflow(_sse(chunk), wire_format="openai") == Overflow(None, None)
    for message in (opener, {"role": "assistant", "content": None}):
        whole = {"id": "1", "model": "glm-5", "choices": [{**choice, "message": message}]}
        read = detect_overflow(200, orjson.dumps(whole), wire_format="openai")
        assert read == Overflow(None, None)
    zero: dict[str, Any] = {"prompt_tokens": 9000, "completion_tokens": 0}
    assert detect_stream_overflow(_sse({**chunk, "usage": zero}), wire_format="openai")

    def variant(**fields: Any) -> dict[str, Any]:
        return {**chunk, "choices": [{**chunk["choices"][0], **fields}]}

    for other in (
        variant(delta={**opener, "content": "partial"}),
        variant(delta={**opener, "reasoning": "hm"}),
        variant(delta={}),  # a gateway's translated tail
        variant(index=1),
        variant(logprobs={"content": [{"token": "a", "logprob": -0.1}]}),
        variant(finish_reason="length"),
        {**chunk, "usage": {**zero, "completion_tokens": 30}},
        {**chunk, "choices": [*chunk["choices"], *chunk["choices"]]},
    ):
        assert detect_stream_overflow(_sse(other), wire_format="openai") is None, other


def test_a_responses_window_stop_with_nothing_said_is_an_overflow() -> None:
    # api2api translates Claude's stop into a Responses object left "incomplete" for it,
    # with one empty message and no output token counted
    part = {"type": "output_text", "text": ""}
    empty: dict[str, Any] = {"type": "message", "role": "assistant", "content": [part]}
    response: dict[str, Any] = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "model_context_window_exceeded"},
        "output": [empty],
        "output_text": "",
        "usage": {"input_tokens": 199994, "output_tokens": 0},
    }
    for doc in (response, {**response, "output": []}, {**response, "usage": None}):
        read = detect_overflow(200, orjson.dumps(doc), wire_format="openai-responses")
        assert read == Overflow(None, None), doc
    said = {**empty, "content": [{"type": "output_text", "text": "Partial"}]}
    reasoning = {"type": "reasoning", "summary": []}
    refusal = {**empty, "content": [{"type": "refusal", "refusal": "I cannot help"}]}
    for other in (
        {**response, "output": [said]},
        {**response, "output": [refusal]},
        {**response, "output": [reasoning, empty]},
        {**response, "output_text": "Partial"},
        {**response, "usage": {"input_tokens": 199994, "output_tokens": 12}},
        {**response, "incomplete_details": {"reason": "max_output_tokens"}},
        {**response, "status": "completed"},
    ):
        read = detect_overflow(200, orjson.dumps(other), wire_format="openai-responses")
        assert read is None, other
    # rosetta-llm writes the stop reason as the response's status
    stopped: dict[str, Any] = {"object": "response", "status": "model_context_window_exceeded"}
    stopped["output"] = []
    stopped["usage"] = {"input_tokens": 199990, "output_tokens": 0}
    read = detect_overflow(200, orjson.dumps(stopped), wire_format="openai-responses")
    assert read == Overflow(None, None)
    with_text = orjson.dumps({**stopped, "output": [said]})
    assert detect_overflow(200, with_text, wire_format="openai-responses") is None


def test_a_responses_event_whose_response_failed_is_an_error_event() -> None:
    # codex-cc sends its upstream's error as response.completed with a failed response
    said = "DeepSeek HTTP 400: This model's maximum context length is 131072 tokens. However,"
    said += " you requested 140000 tokens (139000 in the messages, 1000 in the completion)."
    failed = {"id": "resp_error", "status": "failed", "error": {"message": said}, "output": []}
    event = {"type": "response.completed", "response": failed}
    read = detect_stream_overflow(_sse(event), wire_format="openai-responses")
    assert read == Overflow(139000, 130072)
    for other in (
        {**event, "response": {**failed, "status": "completed"}},
        {**event, "response": {**failed, "error": None}},
    ):
        assert detect_stream_overflow(_sse(other), wire_format="openai-responses") is None


def test_a_response_left_incomplete_before_output_is_an_unspent_stop() -> None:
    # for a Responses request with no max_output_tokens (the relay's to know): LiteLLM over
    # Claude's window stop, ds4codex over a server that stopped at "length" (as
    # response.completed), RKLLM's floor of one output token
    response: dict[str, Any] = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [],
        "usage": {"input_tokens": 4302, "output_tokens": 1, "total_tokens": 4303},
    }
    for said in (
        orjson.dumps(response),
        _sse({"type": "response.incomplete", "response": response}),
        _sse({"type": "response.completed", "response": {**response, "usage": {}}}),
    ):
        assert detect_unspent_stop(said) == Overflow(None, None), said
    # (reasoning that spent one token is the window's stop too: window_filled)
    reasoned = {**response, "output": [{"type": "reasoning", "summary": []}]}
    assert detect_unspent_stop(orjson.dumps(reasoned)) == Overflow(None, None)
    for other in (
        {**reasoned, "usage": {"input_tokens": 4302, "output_tokens": 300}},
        {**response, "usage": {"input_tokens": 4302, "output_tokens": 300}},
        {**response, "usage": {"input_tokens": 4302, "output_tokens": 1, "total_tokens": 4400}},
        # hidden reasoning counted in the total, or a usage that states no output count
        {**response, "usage": {"input_tokens": 4302, "output_tokens": 0, "total_tokens": 9302}},
        {**response, "usage": {"input_tokens": 4302}},
        {**response, "incomplete_details": {"reason": "content_filter"}},
        {**response, "status": "completed"},
    ):
        assert detect_unspent_stop(orjson.dumps(other)) is None, other


def test_a_response_the_window_stopped_with_reasoning_alone_is_read() -> None:
    # foveance over gpt-oss (vLLM's default budget is what the window leaves): 128 tokens
    # of reasoning, no text; the response says its request set no max_output_tokens
    response: dict[str, Any] = {
        "object": "response",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "max_output_tokens": None,
        "output": [{"type": "reasoning", "summary": [], "content": [{"text": "I need"}]}],
        "usage": {"input_tokens": 130944, "output_tokens": 128, "total_tokens": 131072},
    }
    body = orjson.dumps(response)
    assert detect_overflow(200, body, wire_format="openai-responses") == Overflow(None, None)
    assert detect_unspent_stop(body) == Overflow(None, None)
    # LiteLLM over Claude's window stop: an empty message, 13 output tokens counted
    empty = [{"type": "message", "content": [{"type": "output_text", "text": ""}]}]
    litellm = {**response, "output": empty, "usage": {"input_tokens": 199987, "output_tokens": 13}}
    assert detect_overflow(200, orjson.dumps(litellm), wire_format="openai-responses") is not None
    # a request that set a cap, or one the body does not show: the relay's to know
    # (alcf-proxy: 8 tokens counted after a 32760-token prompt, no cap sent)
    capped = {**response, "max_output_tokens": 1024}
    unknown = {k: v for k, v in response.items() if k != "max_output_tokens"}
    for said in (capped, unknown):
        assert detect_overflow(200, orjson.dumps(said), wire_format="openai-responses") is None
    streamed = _sse({"type": "response.completed", "response": unknown})
    assert detect_unspent_stop(streamed) == Overflow(None, None)
    # (Claude's window stop as api2api translates it reads whatever the request set)
    translated = {**response, "incomplete_details": {"reason": "model_context_window_exceeded"}}
    translated.update(output=[], usage={"input_tokens": 199990, "output_tokens": 0})
    read = detect_overflow(200, orjson.dumps(translated), wire_format="openai-responses")
    assert read == Overflow(None, None)
    # text written, or output not far below the prompt (a server's default cap of a few
    # hundred tokens spent reasoning: codex-relay's 16 after 1,210), or no usage to tell
    text = [{"type": "message", "content": [{"type": "output_text", "text": "The node"}]}]
    for other in (
        {**response, "output": text},
        {**response, "output_text": "The node"},
        {**response, "output": [{"type": "function_call", "name": "grep", "arguments": "{}"}]},
        {**response, "usage": {"input_tokens": 1210, "output_tokens": 16}},
        {**response, "usage": {"input_tokens": 130944, "output_tokens": 600}},
        {**response, "usage": None},
        {**response, "incomplete_details": {"reason": "content_filter"}},
    ):
        other_body = orjson.dumps(other)
        assert detect_overflow(200, other_body, wire_format="openai-responses") is None, other
        assert detect_unspent_stop(other_body) is None, other


def test_a_prompt_tokens_key_in_a_message_names_the_prompt() -> None:
    # mlxts: "Requested prompt_tokens P plus max_tokens C exceeds this server's total token
    # limit of L." with context_length_exceeded: the prompt's side, not an output cap
    said = (
        "Requested prompt_tokens 31200 plus max_tokens 2048 exceeds this server's total token"
        " limit of 32768."
    )
    error = {"message": said, "param": "max_tokens", "code": "context_length_exceeded"}
    body = orjson.dumps({"error": error})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(31200, 30720)
    colons = said.replace("_tokens ", "_tokens: ")
    body = orjson.dumps({"error": {**error, "message": colons}})
    assert detect_overflow(400, body, wire_format="openai") == Overflow(31200, 30720)
    # the reservation alone fills the limit: nothing to trim
    full = said.replace("31200", "14").replace("2048", "32768")
    body = orjson.dumps({"error": {**error, "message": full}})
    assert detect_overflow(400, body, wire_format="openai") is None
    assert detect_unfixable(400, body)
    # a budget's total token limit is no window, and a count key that exceeds nothing does
    # not make an output cap the prompt's
    for other in (
        "Request would exceed your organization's total token limit of 100000 for today:"
        " prompt_tokens 90000 plus max_tokens 20000.",
        "This session has reached its total token limit of 200000: prompt_tokens 150000"
        " plus max_tokens 60000.",
        "max_tokens (1000000) exceeds the server's default generation ceiling (prompt_tokens=12)",
    ):
        body = orjson.dumps({"error": {"message": other, "type": "invalid_request_error"}})
        assert detect_overflow(400, body, wire_format="openai") is None, other
    # (beside the overflow code, the output cap stays one)
    capped = {**error, "message": other}
    assert detect_overflow(400, orjson.dumps({"error": capped}), wire_format="openai") is None


def test_an_anthropic_reply_stopped_on_error_after_an_overflows_words_is_read() -> None:
    said = "Requested token count exceeds the model's maximum context length of 163840 tokens."
    opening: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 0}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": said}},
        {"type": "content_block_stop", "index": 0},
    ]
    stopped = {"type": "message_delta", "delta": {"stop_reason": "error"}, "usage": {}}
    stream = _sse(*opening, stopped)
    assert detect_stream_overflow(stream, wire_format="anthropic") == Overflow(None, 163840)
    ended = {**stopped, "delta": {"stop_reason": "end_turn"}}
    assert detect_stream_overflow(_sse(*opening, ended), wire_format="anthropic") is None


def test_a_long_reply_in_an_overflows_words_is_closed_by_an_error_stop_only() -> None:
    # a 600-character answer that quotes an overflow, in one delta, then placeholder usage
    # (a prompt counted, no output): the model's; the same closed with "error": the server's
    said = (
        "That error means your request was too big: \"This model's maximum context length is"
        ' 8192 tokens. However, your messages resulted in 9000 tokens." To fix it, '
    )
    said += "shorten the history. " * ((600 - len(said)) // 21 + 1)
    assert 512 < len(said) <= 1024
    opening: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"content": []}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": said}},
        {"type": "content_block_stop", "index": 0},
    ]
    usage = {"input_tokens": 3000, "output_tokens": 0}
    placeholder = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
    assert detect_stream_overflow(_sse(*opening, placeholder), wire_format="anthropic") is None
    stopped = {**placeholder, "delta": {"stop_reason": "error"}}
    assert detect_stream_overflow(_sse(*opening, stopped), wire_format="anthropic") == Overflow(
        9000, 8192
    )


def test_an_output_cap_a_gateway_calls_a_context_overflow_is_none() -> None:
    # gaud wraps Anthropic's output cap as "Context window exceeded" with the overflow code
    cap = "max_tokens: 128000 > 64000, which is the maximum allowed number of output tokens"
    inner = orjson.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": cap}}
    )
    said = "Context window exceeded: Context window exceeded (claude): " + inner.decode()
    error = {"message": said, "type": "invalid_request_error", "code": "context_length_exceeded"}
    body = orjson.dumps({"error": error})
    assert detect_overflow(400, body, wire_format="openai") is None
    assert detect_suspect(400, body) is None


def test_a_platforms_status_envelope_sent_with_200_is_read() -> None:
    said = "the token count: [131500] exceeds the model: [gpt-4o]'s maximum token count: [128000]"
    casibase = {"status": "error", "msg": said, "data": None, "data2": None}
    assert detect_overflow(200, orjson.dumps(casibase), wire_format="openai") == Overflow(
        131500, 128000
    )
    window = "This model's maximum context length is 8192 tokens. However, your messages resulted"
    window += " in 9000 tokens."
    bisheng = {"status_code": 500, "status_message": window}
    assert detect_overflow(200, orjson.dumps(bisheng), wire_format="openai") is not None
    # a status that is no error, a rate limit in the same envelope, an answer beside it
    assert (
        detect_overflow(200, orjson.dumps({**casibase, "status": "ok"}), wire_format="openai")
        is None
    )
    limited = {"status": "error", "msg": "Rate limit exceeded: 30000 tokens per minute"}
    assert detect_overflow(200, orjson.dumps(limited), wire_format="openai") is None
    answered = {**bisheng, "choices": [{"message": {"content": "hi"}}]}
    assert detect_overflow(200, orjson.dumps(answered), wire_format="openai") is None
    assert (
        detect_overflow(200, orjson.dumps({**bisheng, "status_code": 200}), wire_format="openai")
        is None
    )
    # BRConnector answers every error {"success": false, "data": <message>} with 200
    brconnector = {"success": False, "data": "Input is too long for requested model."}
    assert detect_overflow(200, orjson.dumps(brconnector), wire_format="openai") is not None
    succeeded = {"success": True, "data": brconnector["data"]}
    assert detect_overflow(200, orjson.dumps(succeeded), wire_format="openai") is None
    # Java and Go platforms' result object {"code": 500, "msg": ..., "data": null}: read
    # when its code is an HTTP error status, as an int or a string
    result = {"code": 500, "msg": window, "data": None}
    assert detect_overflow(200, orjson.dumps(result), wire_format="openai") is not None
    assert (
        detect_overflow(200, orjson.dumps({**result, "code": "400"}), wire_format="openai")
        is not None
    )
    # a business code (success as 0 or 200, or an API's own numbering) says nothing, and
    # neither does one beside an answer
    for code in (0, 200, "200", 1, 10001, True):
        said_ok = orjson.dumps({**result, "code": code})
        assert detect_overflow(200, said_ok, wire_format="openai") is None, code
    # a rate limit or a byte limit in such an envelope is none either
    per_minute = {"code": 429, "msg": "Request too large: 30000 tokens per min", "data": None}
    assert detect_overflow(200, orjson.dumps(per_minute), wire_format="openai") is None
    sized = {"code": 413, "msg": "Request body of 9000000 bytes is too large", "data": None}
    assert detect_overflow(200, orjson.dumps(sized), wire_format="openai") is None
    answered = {**result, "choices": [{"message": {"content": "hi"}}]}
    assert detect_overflow(200, orjson.dumps(answered), wire_format="openai") is None


def test_an_upstream_body_a_relay_holds_under_data_is_read() -> None:
    # juzibot's openai-proxy answers with axios's error: the upstream's body under "data"
    said = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
    upstream = {"error": {"code": 400, "message": said, "status": "INVALID_ARGUMENT"}}
    relayed = {"message": "Request failed with status code 400", "data": upstream, "status": 400}
    assert detect_overflow(400, orjson.dumps(relayed), wire_format="openai") == Overflow(
        1200000, 1048576
    )
    # a "data" that holds no error (a request echoed back) is not read
    echoed = {"message": "Request failed with status code 400", "data": {"prompt": said}}
    assert detect_overflow(400, orjson.dumps(echoed), wire_format="openai") is None
    # gcligo keeps the body its "upstream error" wraps under details.upstream (and a quota
    # kept there says what it is: no overflow, no probe)
    wrapped = {"message": "upstream error", "type": "upstream_error", "code": "upstream_error"}
    gcligo = {"error": {**wrapped, "details": {"upstream": upstream}}}
    assert detect_overflow(502, orjson.dumps(gcligo), wire_format="openai") == Overflow(
        1200000, 1048576
    )
    quota = {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota)."}}
    exhausted = orjson.dumps({"error": {**wrapped, "details": {"upstream": quota}}})
    assert detect_overflow(502, exhausted, wire_format="openai") is None
    assert detect_suspect(400, exhausted, plain=True) is None


def test_a_byte_limits_code_outweighs_a_length_in_plain_words() -> None:
    # maclocal-api's 413 for a body over 100 MB: a byte limit, probed as a suspect
    said = "Your conversation is too long. Please start a new conversation."
    body = orjson.dumps({"error": {"message": said, "type": "payload_too_large"}})
    assert detect_overflow(413, body, wire_format="openai") is None
    assert detect_suspect(413, body) is not None
    # ... but not where the message names tokens or the window
    said = "The message length 140233 exceeds the maximum token limit 126720."
    body = orjson.dumps({"error": {"message": said, "type": "request_too_large"}})
    assert detect_overflow(413, body, wire_format="openai") is not None


def test_a_count_against_an_allowed_count_is_read() -> None:
    # (vLLM's "prompt list length N exceeds the maximum allowed count" counts prompts)
    said = "Input tokens 9000 exceed the allowed count of 8192"
    assert detect_overflow(400, _error_body(said), wire_format="openai") == Overflow(9000, 8192)
    listed = "prompt list length 2000 exceeds the maximum allowed count of 1024."
    assert detect_overflow(400, _error_body(listed), wire_format="openai") is None


@pytest.mark.parametrize(("output", "fixable"), [(32704, True), (32705, False)])
def test_a_padded_prompt_needs_one_block_beside_the_output(output: int, fixable: bool) -> None:
    # vllm-spyre pads prompts to 64-token blocks: a room under 64 fits no prompt
    said = (
        "Could not add request: prompt length is 12 tokens, which gets padded to 64 tokens,"
        f" maximum number of output tokens is {output} tokens, but max model context length is"
        " 32768."
    )
    found = detect_overflow(400, _error_body(said), wire_format="openai")
    assert (found is not None) is fixable
    assert detect_unfixable(400, _error_body(said)) is not fixable


def test_json_nested_past_the_decoders_depth_inside_a_message_is_no_error() -> None:
    # a message holding JSON is read for the error it relays; nesting deeper than the
    # decoder goes must not raise (a RecursionError would fail the answer)
    message = 'context window exceeded [{"a":' + "[" * 3000
    for body in (
        _error_body(message),
        orjson.dumps({"detail": message}),
    ):
        detect_overflow(400, body, wire_format="openai")
        detect_suspect(400, body)
    assert detect_bare_stream_overflow(message.encode(), wire_format="openai") is not None


def test_readings_that_stay_narrow() -> None:
    def read(message: str) -> Overflow | None:
        return detect_overflow(400, _error_body(message), wire_format="openai")

    # OpenAI's window sentence alone, unless its advice names the output too
    window = "This model's maximum context length is 131072 tokens. Please reduce the length of"
    assert read(window + " the prompt") == Overflow(None, 131072)
    assert read(window + " the messages or completion.") == Overflow(None, None)
    # a cap on the number of messages is none; a message count beside an overflow is
    assert read("message count 64 exceeds limit of 50") is None
    assert read("Number of messages in the conversation exceeds the limit of 100") is None
    counted = "9000 tokens exceed the context window of 8192 tokens (number of messages: 12)"
    assert read(counted) == Overflow(9000, 8192)
    # an HTTP status a message quotes is no count
    for status in ("400 Bad Request", "413 Content Too Large", "400 (Bad Request)"):
        quoted = f"upstream {status}: prompt too long: 300000 exceeds 262144 tokens"
        assert read(quoted) == Overflow(300000, 262144), status


@pytest.mark.parametrize("status", [400, 403, 500])
def test_a_strong_sentence_names_what_exceeds(status: int) -> None:
    # an endpoint's name ("completion") is no output setting; max_tokens alone is
    for message in (
        "Chat completion request exceeds the context window",
        "Completion failed: context window exceeded.",
        "input length and max_tokens exceed the context window",
    ):
        assert detect_overflow(status, _error_body(message), wire_format="openai") is not None
    for setting in (
        "Provided max_tokens (8192) exceeds context window size (4096).",
        "max_tokens is too large for the model context window",
    ):
        assert detect_overflow(status, _error_body(setting), wire_format="openai") is None


def test_a_424_carries_the_model_own_refusal() -> None:
    # Huawei MindIE and SageMaker endpoints answer a model's refusal with 424 (Failed
    # Dependency); SageMaker's AWS-style {"ErrorCode", "Message"} quotes the container's body
    mindie = (
        b'{"error":"Failed to enqueue inferRequest. This model\'s maximum input ids length cannot'
        b' be greater than maxPositionEmbeddings 32768,the input ids length is 41207",'
        b'"error_type":"Generation Error"}'
    )
    assert detect_overflow(424, mindie, wire_format="openai") == Overflow(41207, 32768)
    tgi = "Input validation error: `inputs` must have less than 1000 tokens. Given: 1413"
    inner = json.dumps({"error": tgi})
    wrapped = {
        "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
        "Message": f'Received client error (422) from primary with message "{inner}". See logs',
    }
    body = json.dumps(wrapped).encode()
    assert detect_overflow(424, body, wire_format="openai") == Overflow(1413, 1000)
    other = json.dumps({**wrapped, "Message": "index out of range in self"}).encode()
    assert detect_overflow(424, other, wire_format="openai") is None
    # an embeddings model or endpoint is still no overflow of a chat
    embedding = _error_body("input is longer than the embedding model's maximum of 512 tokens")
    assert detect_overflow(400, embedding, wire_format="openai") is None


@pytest.mark.parametrize("status", [500, 502])
def test_a_500_or_a_gateways_502_is_read_as_a_400_is(status: int) -> None:
    # servers answer a too-long prompt's exception with 500; relays such as ds-free-api
    # and tensorzero wrap their provider's refusal in a 502
    for message in (
        "provider error: 输入内容超长，请缩短后重试",
        "Upstream error: context window exceeded",
        "clewd: prompt is too long",
        "The input is too large.",
    ):
        assert detect_overflow(status, _error_body(message), wire_format="openai") == Overflow(
            None, None
        ), message
    counted = "Reason: The number of prompt tokens (5120) is greater than the context size (4096)."
    assert detect_overflow(status, _error_body(counted), wire_format="openai") == Overflow(
        5120, 4096
    )
    # llama.cpp's shared KV pool at 500: another request may have filled it
    kv = _error_body("input prompt is too big compared to KV size. Please try increasing KV size.")
    assert detect_overflow(status, kv, wire_format="openai") is None
    assert overflow.detect_suspect(500, kv) is None  # nor a probe's
    assert detect_overflow(400, kv, wire_format="openai") is not None
    # a timed-out upstream never reads as one, nor an overloaded one; nor does a
    # throughput limit
    window = _error_body("Upstream error: context window exceeded")
    assert detect_overflow(504, window, wire_format="openai") is None
    assert detect_overflow(503, window, wire_format="openai") == Overflow(None, None)
    # ... unless anything in it speaks of waiting, load, queues, memory or readiness
    said = b'"message":"context window exceeded"'
    for busy in (
        _error_body("context window exceeded, please retry later"),
        _error_body("Context window exceeded: server at capacity"),
        _error_body("Context window exceeded: service unavailable"),
        _error_body("Model is still loading; context window exceeded"),
        _error_body("Context window exceeded; request queued too long"),
        _error_body("Request needs 12000 tokens of KV cache but only 3000 are available right now"),
        _error_body("Out of memory: the context of 32768 tokens exceeds available GPU memory"),
        _error_body("Prompt exceeds the context size of the only free slot"),
        _error_body("Context window exceeded. Consider retrying in a few seconds."),
        _error_body("上下文超出限制，請稍後再試"),
        _error_body("上下文长度超出限制，服务暂不可用"),
        b"Service Unavailable: context window exceeded",
        b'{"error":{%s,"code":"service_unavailable"}}' % said,
        b'{"error":{%s,"type":"overloaded_error"}}' % said,
        b'{"error":{%s,"code":"model_not_ready"}}' % said,
        b'{"error":{%s,"error_code":"SERVICE_UNAVAILABLE"}}' % said,
        b'{"error":{%s,"retryable":true}}' % said,
        b'{"error":{%s,"retry_after":30}}' % said,
        b'{"error":{%s,"code":504}}' % said,
        b'{"code":503,%s,"status":"UNAVAILABLE"}' % said,
    ):
        for other in (503, 507):
            assert detect_overflow(other, busy, wire_format="openai") is None, (other, busy)
    rate = _error_body("The request exceeds the maximum tokens per second")
    assert detect_overflow(status, rate, wire_format="openai") is None
    # nor do quotas and retry-later answers in Chinese (jiekou.ai's TOKEN_LIMIT_EXCEEDED)
    for quota in (
        "upstream error: Token 数超限，请稍后重试",
        "今日token用量已超过限制",
        "本月token使用量超出限制",
    ):
        assert detect_overflow(status, _error_body(quota), wire_format="openai") is None, quota


# --------------------------------------------------------------------------- stream heads


def test_stream_normal_first_chunk_then_error_is_not_read() -> None:
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    error = b'data: {"error":{"message":"prompt is too long: 5 tokens > 4 maximum"}}\n\n'
    assert detect_stream_overflow(chunk + error, wire_format="openai") is None
    assert detect_stream_overflow(error + chunk, wire_format="openai") == Overflow(5, 4)


def test_stream_skips_comments_keepalives_and_pings() -> None:
    head = (
        b": keepalive\n\n"
        b'event: ping\ndata: {"type": "ping"}\n\n'
        b"event: error\r\n"
        b'data: {"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"prompt is too long: 210000 tokens > 200000 maximum"}}\r\n\r\n'
    )
    assert detect_stream_overflow(head, wire_format="anthropic") == Overflow(210000, 200000)


def test_stream_done_or_blank_events() -> None:
    assert detect_stream_overflow(b"data: [DONE]\n\n", wire_format="openai") is None
    assert detect_stream_overflow(b"data: \n\n: token\n\n", wire_format="openai") is None
    assert detect_stream_overflow(b"data: not json, context\n\n", wire_format="openai") is None


def test_stream_multiline_data_is_joined() -> None:
    head = (
        b"event: error\n"
        b'data: {"error": {"code": 400,\n'
        b'data: "message": "The input token count (5) exceeds the maximum number of tokens '
        b'allowed (4)."}}\n\n'
    )
    assert detect_stream_overflow(head, wire_format="gemini") == Overflow(5, 4)


# --------------------------------------------------------------------------- the module


def test_overflow_is_frozen_and_slotted() -> None:
    found = Overflow(10, 5)
    assert not hasattr(found, "__dict__")
    with pytest.raises(AttributeError):
        found.real = 3  # type: ignore[misc]


def test_no_regex_is_compiled_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> re.Pattern[str]:
        raise AssertionError("re.compile called at detection time")

    patterns = overflow.compile_patterns([r"kv budget (?P<real>\d+)/(?P<max>\d+) spent"])
    monkeypatch.setattr(re, "compile", refuse)
    monkeypatch.setattr(re, "search", refuse)
    monkeypatch.setattr(re, "match", refuse)
    for entry in CORPUS:
        body = entry["body"].encode()
        if entry["stream"]:
            detect_stream_overflow(body, wire_format=entry["format"], patterns=patterns)
        else:
            detect_overflow(entry["status"], body, wire_format=entry["format"], patterns=patterns)
    assert all(isinstance(p, re.Pattern) for p in overflow_wordings._PATTERNS)


# --------------------------------------------------------------------------- later events


ROLE_CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
)
TEXT_CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
ERROR_EVENT = (
    b'data: {"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum",'
    b'"type":"invalid_request_error"}}\n\n'
)


def test_error_after_an_empty_opener_is_read() -> None:
    head = ROLE_CHUNK + ERROR_EVENT
    assert detect_stream_overflow(head, wire_format="openai") == Overflow(210000, 200000)
    assert overflow.stream_head_decided(ROLE_CHUNK) is False
    assert overflow.stream_head_decided(head) is True
    # After output, an error is no longer the stream's first word.
    assert (
        detect_stream_overflow(ROLE_CHUNK + TEXT_CHUNK + ERROR_EVENT, wire_format="openai") is None
    )
    anthropic_head = (
        b"event: message_start\n"
        b'data: {"type":"message_start","message":{"id":"m","content":[]}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error",'
        b'"message":"prompt is too long: 5 tokens > 4 maximum"}}\n\n'
    )
    assert detect_stream_overflow(anthropic_head, wire_format="anthropic") == Overflow(5, 4)


def test_per_event_detection_for_the_relay() -> None:
    started = False
    found: Overflow | None = None
    for block in (ROLE_CHUNK, b": keep-alive\n\n", ERROR_EVENT):
        found = found or overflow.detect_stream_event_overflow(
            block, output_started=started, wire_format="openai"
        )
        started = started or overflow.stream_event_has_output(block)
    assert found == Overflow(210000, 200000)
    assert not started
    # Once a chunk carried text, the same error event is not an overflow any more.
    assert overflow.stream_event_has_output(TEXT_CHUNK)
    assert (
        overflow.detect_stream_event_overflow(
            ERROR_EVENT, output_started=True, wire_format="openai"
        )
        is None
    )
    for quiet in (
        ROLE_CHUNK,
        b": ping\n\n",
        ERROR_EVENT,
        b'event: ping\ndata: {"type":"ping"}\n\n',
    ):
        assert not overflow.stream_event_has_output(quiet)
    for loud in (TEXT_CHUNK, b"data: [DONE]\n\n", b"data: not json\n\n"):
        assert overflow.stream_event_has_output(loud)


# --------------------------------------------------------------------------- choice errors


def test_error_inside_a_choice_with_status_200() -> None:
    message = (
        "This model's maximum context length is 4097 tokens. However, your messages resulted in "
        "4619 tokens."
    )
    answer = {
        "id": "gen-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "error",
                "error": {"code": 400, "message": message},
            }
        ],
    }
    body = orjson.dumps(answer)
    assert detect_overflow(200, body, wire_format="openai") == Overflow(4619, 4097)
    chunk = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": {"content": ""},
                "finish_reason": "error",
                "error": {"code": 400, "message": message},
            }
        ],
    }
    head = b"data: " + orjson.dumps(chunk) + b"\n\n"
    assert detect_stream_overflow(head, wire_format="openai") == Overflow(4619, 4097)
    # A normal choice quoting the same words is an answer.
    quoted = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "error": None,
                "message": {"role": "assistant", "content": message},
            }
        ]
    }
    assert detect_overflow(200, orjson.dumps(quoted), wire_format="openai") is None


# --------------------------------------------------------------------------- generic rule


@pytest.mark.parametrize(
    "message",
    [
        "Number of tokens (2662) exceeded maximum context length (512).",  # ctransformers
        "Your prompt is longer than the model's context window",
        "Request input tokens exceed model token limit. Reduce the input size.",
        "Provider context length exceeded",
        "too many tokens: size limit exceeded by 1502 tokens. Try using shorter or fewer inputs.",
        # Chinese: iFlytek Spark 10907, and wordings of the same family
        "token数量超过上限。对话历史+问题的字数太多，需要精简输入",
        "输入长度超过模型最大上下文长度",
        "Prompt超长",
        "提示词长度超出限制：9100 > 8192",  # with an English "N > M" beside
        # a relay's "the input is over the model's per-request cap", advice naming images after
        "输入内容超过模型单次上限：上限 104.9 万 token（1,048,576），本次请求约 107.4 万 token"
        "（本地估算，仅供参考）。请新建会话、精简历史消息，或减少粘贴的文本 / 图片 / 附件后重试。",
        # a prompt-side subject "too long" or with "too many tokens" needs no stated limit
        "Prompt too long",
        "Input too long for model llama3-70b",
        "invalid_request_error: too many tokens in prompt",
        "Too many input tokens. Max input tokens: 8192, request input token count: 9000",
        # comparisons and "only supports up to"
        "prompt_tokens 9000 > max_input_tokens 8192",
        "Your prompt has 9000 tokens but the model only supports up to 8192 tokens",
        "The number of tokens in the prompt (9000) is more than the model supports (8192)",
        "Token count 9000 exceeds model capacity of 8192",
        "input tokens over limit",
        "n_ctx exceeded",
        "Tokens in request more than max tokens allowed",
        "Input Tokens Exceeded: Number of input tokens exceeds maximum length.",  # Nova (Bedrock)
        "Prompt exceeds the maximum allowed input length of 131,072 tokens",
        # a model's name with digits between the window's name and its count, a total that
        # "would take" more; a tool's input counted with the text's; "cannot exceed N"
        "The maximum context length of acme-7b-0425 is 8192. However, this request would "
        "take 9000 tokens.",
        "Max context window is 32000 tokens, but the request has about 33000 tokens (31000 "
        "of text input, 2000 of tool input).",
        "Total tokens (prompt and completion) cannot exceed 4096 - got 5000.",
        # the advice an overflow gives, beside the window's name
        "The context length of this model is 8192 tokens. Please reduce the length of the input.",
        # a count compared with n_ctx
        "Cannot keep prompt with n_keep (15028) >= n_ctx (7424)",
        # a model's name before the window named as exceeded (nvd-claude-proxy), whatever
        # else the advice names
        "Estimated input (142318 tokens) exceeds acme-7b-0425 context window (131072 "
        "tokens). Reduce messages or tool schemas.",
        # other languages: the context's name and an exceeding verb in one sentence
        "El proyecto excede el límite de contexto. Selecciona un APU para analizarlo.",
        "Este documento excede o limite de contexto desta versão (16 mil caracteres).",
        "La requête dépasse la taille de contexte du modèle",
        "Die Eingabe überschreitet das Kontextfenster des Modells",
        "Il prompt supera il limite di contesto",
        "Wiadomość przekracza limit kontekstu",
        "入力がコンテキスト長を超えています",
        "입력이 컨텍스트 길이를 초과했습니다",
        "Đầu vào vượt quá giới hạn ngữ cảnh",
        # ... or "too long" in them
        "Le prompt est trop long pour la fenêtre de contexte du modèle",
        "Die Anfrage ist zu lang für das Kontextfenster",
        "Il prompt è troppo lungo per il contesto del modello",
        # a requirement the prompt broke (mlx-vlm's compaction route)
        "Compaction input must fit within the model context window.",
        # the room left for output, derived from the window less the prompt, below zero
        "request length is 33210, max_new_tokens is -442",
        "`default_max_tokens` (-1808) must be greater than 0",
        "Requested prompt(32762 tokens) leaves no room for generated tokens",
        # a prompt-side maximum stated alone, as its only count
        "max supported input length = 512 for now",  # BLOOM's inference server, a 500
        "Request body is too large for model context window",  # GitHub Copilot
        "Maximum context length is 4096 tokens.",
        # Voyage AI: too many tokens, and "does not fit into the model's context window"
        "Request to model 'voyage-2' failed. The example at index 0 in your batch has too many"
        " tokens and does not fit into the model's context window of 4000 tokens. Please lower"
        " the number of tokens in the listed example(s) or use truncation.",
        # plain English for a prompt that does not fit: "does not fit", "over ... limit",
        # "at most", "can handle", a count in tokens compared with a bare one
        "The prompt does not fit in the context window (n_ctx=4096, n_prompt=5000)",
        "Context window full: cannot fit 9000 tokens into 8192",
        "prompt is 9000 tokens, which is over this model's 8192 token limit",
        "Your input has 140000 tokens but the model accepts at most 128000.",
        "Input is longer than the model can handle (12000 tokens > 8192).",
        "Total prompt tokens 9100 surpass the model context of 8192",
        "the request's token count is above the model's limit",
        "not enough context space for prompt (9100 tokens, 8192 available)",
        "Insufficient context window: prompt requires 9100 tokens but only 8192 are available",
        "the length of the messages exceeds the model limit",
        "Too much input: 9100 tokens, max 8192",
        "Prompt already consumes the available context window",  # gallama
        "input_ids length 9100 exceeds max_position_embeddings 8192",
        "Context limit hit (9100 of 8192 tokens used)",
        "context window limit reached",
        "Messages are too long for the selected model",
        "ContextLengthError: 9100 tokens requested but only 8192 available",
        # a relayed Gemini web account's (g4f)
        "You have reached the maximum prompt length limit. Please consider shortening your "
        "prompt and try again. Thank you.",
        # a count of messages beside tokens over the window is no cap on the messages' number
        "messages array exceeds the maximum token limit: 9000 > 8192",
        "Prompt too long (42 messages): 9000 tokens exceeds the limit of 8192 tokens",
        "Unable to compact the conversation enough to fit the model's context window",
        "Unable to compact conversation to fit in context window",
        "You have reached the maximum context limit for this model.",
        "You have reached the maximum input tokens limit.",
        # no excess named, but the advice to shorten the conversation beside the window (dasllama)
        "the rendered prompt is 9000 tokens; the model context is 8192 \u2014 shorten the "
        "conversation or raise --ctx",
        # what is left of the window named (knurlogic), the model's window filled (machboost)
        "this prompt is 33012 tokens; this model's context length is 32768, which leaves no "
        "room for an answer",
        "no candidate model fits estimated context (20440 tokens)",  # forge-gateway
        "The prompt fills the model context window; shorten or summarize it.",
    ],
)
def test_generic_rule_recognises_unlisted_wordings(message: str) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") is not None
    assert detect_overflow(200, _error_body(message), wire_format="openai") is not None
    # Under 503 too, where no word of waiting or load says the server was busy ("model
    # capacity", "try again" are such there); never on a 504 (a timed-out upstream) nor on
    # a success body.
    busy = re.search(r"capacity|try again|重试", message) is not None
    assert (detect_overflow(503, _error_body(message), wire_format="openai") is None) is busy
    assert detect_overflow(504, _error_body(message), wire_format="openai") is None
    success = {"choices": [{"index": 0, "message": {"role": "assistant", "content": message}}]}
    assert detect_overflow(200, orjson.dumps(success), wire_format="openai") is None


@pytest.mark.parametrize(
    "message",
    [
        "Prompt tokens limit exceeded: 230799 > 91442. To increase, visit "
        "https://openrouter.ai/settings/keys and create a key with a higher monthly limit",
        "The maximum tokens you requested exceeds the model limit of 32768",
        "Invalid 'messages[1].content': string too long. Expected a string with maximum length "
        "10485760, but got a string with length 10485761 instead.",
        # ... typed an overflow by a relay that lost the code (LiteLLM's mapping)
        "litellm.ContextWindowExceededError: ContextWindowExceededError: OpenAIException - "
        "Invalid 'tools[0].function.description': string too long. Expected a string with "
        "maximum length 1024, but got a string with length 1530 instead.",
        # what an output reservation leaves (mlx-vlm's compaction), a loop's count of passes
        "Output reservation leaves no room for compacted context.",
        "Compaction exceeded its summary pass limit; original context preserved.",
        "Input data may contain inappropriate content.",
        "The input token count exceeds your API key quota",
        "image exceeds 5 MB maximum: 7340032 bytes > 5242880 bytes",
        "max_tokens must be less than or equal to 16384, the maximum value for max_tokens is less "
        "than the context_window for this model",
        # Go relays' client timeouts and per-period token quotas
        'Post "https://api.openai.com/v1/chat/completions": context deadline exceeded '
        "(Client.Timeout exceeded while awaiting headers)",
        "Token limit exceeded for the day",
        "max_total_tokens (100000794) must be less than or equal to max_seq_len (32768)",
        "Too many tokens requested in a short time, please slow down",
        "system prompt exceeds the maximum of 10000 characters",
        "This endpoint only supports up to 4 images per request",
        "The model only supports up to 128 tools",
        "This model supports at most 256000 completion tokens.",
        "too many tokens: max tokens must be less than or equal to 4096, the maximum output for "
        "this model - received 8192.",
        "Input field 'user' too long",
        "metadata.user_id: input too long",
        "The input JSON is too large; maximum size 10MB",
        "stop token length too long.",  # LightLLM: a stop sequence, not the prompt
        "Please reduce the length of the prompt template (max 200 characters)",
        "The tool input exceeds 4096 tokens",
        # a count compared with another setting
        "n_keep (15028) >= n_batch (512)",
        "max_tokens (9000) exceeds acme-7b-0425 context window (8192 tokens)",
        # a lower bound (MindIE's empty prompt), a cap on the messages' number, a quota
        "Length of Prompt text should be greater than 0 and less than or equal to 41943040, "
        "but got 0",
        # a character limit beside the prompt's tokens (only jitllm's own sentence is listed)
        "the prompt is 2100 tokens (8000 characters), which exceeds the 4000-character limit of "
        "this endpoint",
        "Your message is about 1500 tokens (9000 characters), which exceeds the per-message "
        "character limit.",
        "Input should be greater than 0",
        "messages array too large (300 messages); maximum is 256 messages",
        # an operating system's command line, which a CLI bridge passes the prompt on
        "Windows command line exceeds the configured limit even without a prompt; shorten "
        "workspace path, model id, or CURSOR_BRIDGE_WIN_CMDLINE_MAX.",
        "You have reached the maximum requests limit for today.",
        "You have reached the maximum prompt limit of 50 prompts per project.",
        "You have reached the maximum prompt size of 50 prompts per project.",
        "Prompt exceeds the command-line length limit of 32768",
        # other languages: a limit with no context named, the context with no excess, an
        # output setting beside the context
        "Límite de solicitudes excedido, inténtelo más tarde",
        "Превышен лимит запросов",
        "Le contexte de la requête est invalide",
        "max_tokens excede el límite de contexto",
        "The n 256 exceeds the maximum supported choices (128).",
        # -1 is a client's own "no limit" setting, refused as it is
        "max_tokens must be at least 1, got -1.",
        "max_tokens must be at least 0, got -1.",
        "max_tokens leaves no room for the prompt",
        # a maximum stated beside another count (a setting against the window), or of
        # something else than the prompt
        "The request maximum prompt tokens is 300000. However, the model's maximum context "
        "length is 200000 tokens.",
        "max supported batch size = 4 for now",
        "maximum input length is 4096 characters; got 5000",
        "Total tokens cannot exceed 100000 per day for your plan",
        # Chinese quota, balance, rate, concurrency, auth, safety, output and media wordings
        "授权错误：日流控超限。超过当日最大访问量的限制",
        "授权错误：秒级流控超限。秒级并发超过授权路数限制",
        "该令牌额度已用尽",
        "用户额度不足, 剩余额度: ＄0.000000",
        "请求频率超过限制，请稍后再试",
        "输出内容涉及敏感信息，审核不通过",
        "图片大小超过限制",
        "输出长度超过模型限制",
        "文件大小超过限制",
        # a field's name that holds the words, not a sentence that says them
        "Unrecognized request argument supplied: context_length_exceeded_behavior",
        "Invalid context_overflow_policy: must be one of fail, truncate",
        # "does not fit" said of an image or of the output setting
        "The image does not fit in the context window",
        # an output's, a medium's or a tool's tokens that do not fit (the reviews')
        "The requested max output tokens (32000) do not fit into the model's context window",
        "Maximum completion tokens cannot fit within the context window.",
        "The image has too many tokens and does not fit into the model's context window",
        "The tool definitions have too many tokens and cannot fit into the context window",
        "max_tokens does not fit the context window",
        "The image must fit within the context window",
        "max_tokens must fit within the context window",
        "Token ids must fit within the vocabulary size (151936)",
        # a retrieval that found too little, a chat app's cap on one message
        "Insufficient context to answer the question",
        "Bad Request: message is too long",
        "max_tokens consumes the entire context window",
        # the output's or an image's count against what is left, generation that ran out
        "Output tokens: 9100 requested but only 8192 available",
        "image tokens 9100 but only 8192 available",
        "Generation stopped: context limit reached while generating",
        # the messages by their number, not their length; a disk's space
        "Too many messages: 120 exceeds the limit of 100",
        "messages exceed the limit of 100",
        "Insufficient disk space to store the input, limit reached",
        # a nesting depth, not a length (a proxy's token estimator, copilot-api)
        "Responses token estimate exceeds the maximum depth of 128",
        # a machine's memory for a context it cannot allocate (node-llama-cpp)
        "A context size of 24 is too large for the available RAM (including swap)",
    ],
)
def test_generic_rule_never_fires_on_look_alikes(message: str) -> None:
    for status in (200, 400, 413):
        assert detect_overflow(status, _error_body(message), wire_format="openai") is None


def test_a_failovers_preface_names_no_auth_error() -> None:
    # api-farm tries every key and shows the last error: "All API keys failed." says what
    # was tried, not why; the last error decides, auth words in it included
    said = (
        "All API keys failed. Last error: Error code: 400 - This model's maximum context"
        " length is 128000 tokens. However, your messages resulted in 131245 tokens."
    )
    read = detect_overflow(502, orjson.dumps({"detail": said}), wire_format="openai")
    assert read == Overflow(131245, 128000, whole=True)
    for other in (
        "All API keys failed. Last error: Error code: 429 - Rate limit reached for gpt-4o on"
        " tokens per min (TPM): Limit 30000, Used 29000, Requested 131245.",
        "All providers failed. Last error: No API keys available: the context window of"
        " 128000 tokens was exceeded",
        "Invalid API key: the context window of 128000 tokens was exceeded",
    ):
        body = orjson.dumps({"detail": other})
        assert detect_overflow(502, body, wire_format="openai") is None, other


def test_the_gemini_clis_startup_log_names_no_auth_error() -> None:
    # bridges over the Gemini CLI relay its whole stderr: the startup profiler's phase
    # "authenticate" is a log line, not an auth error; a real one still is
    startup = "[STARTUP] Recording metric for phase: authenticate duration: 71.9\n"
    refusal = (
        '[API Error: {"error":{"code":400,"message":"The input token count (1187331) exceeds'
        ' the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]'
    )
    said = _error_body("Gemini CLI execution failed (exit code: 1): " + startup + refusal)
    assert detect_overflow(502, said, wire_format="openai") == Overflow(1187331, 1048576)
    failed = _error_body(startup + "Error: authentication failed, invalid API key. " + refusal)
    assert detect_overflow(502, failed, wire_format="openai") is None
    # only the profiler's whole metric line: other words after "phase:" still count
    limited = _error_body("[STARTUP] Recording metric for phase: rate limit exceeded\n" + refusal)
    assert detect_overflow(502, limited, wire_format="openai") is None


def test_a_nesting_depth_is_no_length() -> None:
    # a proxy's token estimator guarding its JSON nesting (copilot-api), read by no rule and
    # not probed; a model named for depth is still a model
    depth = _error_body("Responses token estimate exceeds the maximum depth of 128")
    assert detect_suspect(400, depth) is None
    named = _error_body("Input is too long for acme-depth-7b: 9000 tokens exceeds the limit 8192")
    assert detect_overflow(400, named, wire_format="openai") is not None


def test_anthropics_context_reduction_wording_is_an_overflow() -> None:
    # Anthropic's other wording of a prompt over the window, as a desktop agent's error
    # reports captured it: no counts, read as the wording; the words elsewhere are not it
    body = orjson.dumps(
        {
            "type": "error",
            "error": {
                "details": None,
                "type": "invalid_request_error",
                "message": "context reduction is suggested",
            },
            "request_id": "req_011Ca9jSXf7cx5H8ssiZnmJ2",
        }
    )
    assert detect_overflow(400, body, wire_format="anthropic") == Overflow(None, None)
    # the words within another message, or with more after them, are not it
    for said in (
        "Retrieval failed; context reduction is suggested for the index",
        "context reduction is suggested: image exceeds 5 MB maximum",
    ):
        assert detect_overflow(400, _error_body(said), wire_format="openai") is None, said


def test_a_pictures_size_is_no_length() -> None:
    # ModelScope's limit on a screenshot's pixels, in the words of a window's: not read, not
    # probed; a mixture's "8x7b" is still a model's name
    for said in (
        "input size exceed limit 2048x2048,current input:(1080,2376)",
        "input exceeds the limit of 1568 pixels",
    ):
        assert detect_overflow(400, _error_body(said), wire_format="openai") is None, said
        assert detect_suspect(400, _error_body(said)) is None, said
    # a model's name, a one-digit product, arithmetic with spaces: still the window's words
    for said, expected in (
        ("input too long for mixtral-8x7b: 40000 tokens exceed the limit 32768", None),
        ("input too long for the 8x7 experts: 40000 tokens exceed the limit 32768", None),
        ("input of 40000 tokens exceeds the limit 32768 (32 x 1024)", Overflow(40000, 32768)),
    ):
        found = detect_overflow(400, _error_body(said), wire_format="openai")
        assert found is not None, said
        assert expected is None or found == expected, said


# --------------------------------------------------------------------------- counts


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "length of prompt_tokens (147509) must be less than max_seq_len (65536).",
            Overflow(147509, 65536),
        ),
        ("Input length 203743 exceeds the maximum length 202752", Overflow(203743, 202752)),
        (
            "The maximum context length of DeepSeek-V3-0324 is 32768. However, answering your "
            "request will take 39732 tokens.",
            Overflow(39732, 32768),
        ),
        (
            "<400> InternalError.Algo.InvalidParameter: Range of input length should be "
            "[1, 204800]",
            Overflow(None, 204800),
        ),
        ("invalid params, context window exceeds limit (2013)", Overflow(None, None)),
        (
            "Requested token count exceeds the model's maximum context length of 262144 tokens. "
            "You requested a total of 262462 tokens: 230462 tokens from the input messages and "
            "32000 tokens for the completion.",
            Overflow(230462, 230144),
        ),
        ("Input length 1581 exceeds context length 1500", Overflow(1581, 1500)),  # LM Studio
        (  # TabbyAPI
            "Prompt length 4097 exceeds the available context size of 4096 tokens",
            Overflow(4097, 4096),
        ),
        ("Prompt length 9 is greater than max_seq_len 8", Overflow(9, 8)),  # TabbyAPI
        (  # TensorRT-LLM: counts printed as floats
            "The sum of prompt length (72417.0), query length (0) should not exceed "
            "max_num_tokens (69632)",
            Overflow(72417, 69632),
        ),
        (  # Triton's TensorRT-LLM backend
            "Cannot process new request: Prompt length (5056) exceeds maximum sequence length "
            "(2048)",
            Overflow(5056, 2048),
        ),
        ("Requested tokens (5136) exceed context window of 4096", Overflow(5136, 4096)),
        (  # Vespa's LLM searcher over llama.cpp: the prompt and completion in brackets
            "Context size per request (4096 tokens) is too small to fit the prompt (3871) and "
            "completion (512) tokens.",
            Overflow(3871, 3584),
        ),
        (  # Cloudflare Workers AI: the estimate includes the output reservation, so no count
            "AiError: The estimated number of input and maximum output tokens (139467) exceeded "
            "this model context window limit (24000).",
            Overflow(None, None),
        ),
        (  # ms-swift's engines, SGLang's speculative draft tokens held off the window
            "Input length (9000) leaves no room for generation with max_model_len (8192) and "
            "max_tokens_offset (-4). Please shorten the input or increase max_model_len.",
            Overflow(9000, 8188),
        ),
        (
            "Input length (9000) leaves no room for generation with max_model_len (8192) and "
            "max_tokens_offset (0). Please shorten the input or increase max_model_len.",
            Overflow(9000, 8192),
        ),
        (  # prime-rl's character check: the window, never the characters, as a count
            "You passed 4500000 input characters. However, the model's context length is only "
            "32768 tokens (at most 4194304 characters). Please reduce the length of the input "
            "prompt. (parameter=input_text, value=4500000)",
            Overflow(None, 32768, whole=True),
        ),
        (  # tinker-cookbook's capture proxy: the prompt's count, the window unstated
            "prompt is too long: 67984 prompt tokens plus 4096 max_tokens exceed the model's "
            "context window",
            Overflow(67984, None),
        ),
        (  # vLLM's character check with the parameter's value it echoes (in characters)
            "This model's maximum context length is 8192 tokens. However, your prompt contains "
            "200000 characters (more than 131072 characters, which is the upper bound for 8192 "
            "input tokens). Please reduce the length of the input prompt. (parameter=input_text,"
            " value=200000)",
            Overflow(None, 8192, whole=True),
        ),
        (  # JamePeng's llama-cpp-python, where its backend cannot shift the context
            "Llama.eval: Context Shift is explicitly disabled by the C++ backend (n_pos_per_embd"
            " > 1 or incompatible M-RoPE). You MUST increase n_ctx (currently 8192) to fit the "
            "dialogue.",
            Overflow(None, 8192),
        ),
        (
            "Qwen3VLChatHandler(__call__): Context Shift is explicitly disabled by the C++ "
            "backend (n_pos_per_embd > 1 or incompatible M-RoPE). Multimodal chunk exceeded "
            "context limit(currently n_ctx=8192), You MUST increase n_ctx to fit the dialogue.",
            Overflow(None, 8192),
        ),
        (  # Rapid-MLX, the prompt and the completion itemised
            "This model's maximum context length is 32768 tokens. However, you requested 33410 "
            "tokens (32410 prompt + 1000 completion). Please reduce the length of the messages "
            "or completion.",
            Overflow(32410, 31768),
        ),
        (  # mlx-bun's admission by memory
            "request needs 24576 tokens of context (prompt 22528 + max_tokens 2048) but the "
            "memory budget caps safe context at 20480 — shorten the prompt or lower max_tokens",
            Overflow(22528, 18432),
        ),
        (  # a validation error's input value is a count (only vLLM's echo in characters is not)
            "1 validation error: context length exceeded: must be less than or equal to 8192 "
            "[type=less_than_equal, input_value=20000, input_type=int]",
            Overflow(20000, 8192),
        ),
        (  # GopherLLM, as plain text: a prompt at or over the window
            "prompt (9412 tokens) leaves no room to generate within the model's context length "
            "(8192)",
            Overflow(9412, 8192),
        ),
        (  # jitllm: the prompt's characters beside its tokens, its counts by their names
            "prompt is about 9000 tokens (36000 characters), which does not fit a context of "
            "8192 tokens.",
            Overflow(9000, 8192),
        ),
        (
            "prompt is about 7000 tokens (28000 characters), which does not fit a context of "
            "8192 tokens.",
            Overflow(7000, 8192),
        ),
        (  # TCQ-shim: the prompt and max_tokens itemised, or the prompt alone
            "Requested 2762 (prompt) + 1024 (max_tokens) = 3786 tokens exceeds the context "
            "window of 2048 tokens. Reduce max_tokens, shorten the prompt, or restart the "
            "server with a larger --ctx-size.",
            Overflow(2762, 1024),
        ),
        (
            "Requested 3000 (prompt) tokens exceeds the context window of 2048 tokens.",
            Overflow(3000, 2048),
        ),
        (  # vllm-rust's character check: the window less max_tokens, the prompt in characters
            "prompt too long: 61234 characters exceeds the maximum of 49152 characters "
            "(max_model_len=4096, max_tokens=1024)",
            Overflow(None, 3072),
        ),
        (  # ExecuTorch's llm_server worker: no counts
            "Generation failed: prompt fills the context window; no room to generate",
            Overflow(None, None),
        ),
        (  # MindIE-LLM's input cap after the chat template
            "Messages token length must be in (0, 1048576], but got 1100000. This could be "
            "caused by invalid input format or empty content.",
            Overflow(1100000, 1048576),
        ),
        (  # a FastAPI server over llama-cpp-python, the prompt and max_tokens itemised
            "\u274c Token limit exceeded: 4214 > 4096 (prompt: 4086 + max: 128)",
            Overflow(4086, 3968),
        ),
        (  # jitllm, its prompt and reservation against the window
            "prompt (about 7500 tokens) plus max_tokens 1024 exceeds the context of 8192 tokens.",
            Overflow(7500, 7168),
        ),
    ],
)
def test_counts_of_new_wordings(message: str, expected: Overflow) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") == expected


@pytest.mark.parametrize(
    "message",
    [
        # the completion alone over the window (Rapid-MLX), or over mlx-bun's memory budget
        "This model's maximum context length is 32768 tokens. However, you requested 40212 "
        "tokens (212 prompt + 40000 completion). Please reduce the length of the messages or "
        "completion.",
        "request needs 65836 tokens of context (prompt 300 + max_tokens 65536) but the memory "
        "budget caps safe context at 20480 — shorten the prompt or lower max_tokens",
        # Plexus, a reservation over the window
        "This model's context window is 8192 tokens. Your request is estimated at ~14 input "
        "tokens with 16384 reserved for the response, which exceeds the limit. Please "
        "shorten the prompt or lower max_tokens.",
        # onnx-genai-server, max_tokens equal to the window
        "What: request admission exceeded the model context limit. Why: final prefill length "
        "(57) after placeholder expansion plus max_tokens (4096) is 4153, above 4096. How: "
        "reduce the prompt, image count/expansion size, or max_tokens.",
        # runNburn, no prompt count stated
        "This model's maximum context length is 32768 tokens, but the request allows 32768 "
        "completion tokens",
        # gmlx, max generation tokens equal to the window (its sum read alone would not say)
        "prompt is too long: 32799 tokens > 32768 maximum. The request needs 31 prompt +"
        " 32768 max generation tokens, which exceeds the context window (max_kv_size).",
    ],
)
def test_an_itemised_completion_alone_over_the_window_is_unfixable(message: str) -> None:
    body = _error_body(message)
    assert detect_overflow(400, body, wire_format="openai") is None
    assert detect_unfixable(400, body)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Number of tokens (2662) exceeded maximum context length (512).", Overflow(2662, 512)),
        (
            "Your prompt has 9000 tokens but the model only supports up to 8192 tokens",
            Overflow(9000, 8192),
        ),
        (
            "Too many input tokens. Max input tokens: 8192, request input token count: 9000",
            Overflow(9000, 8192),
        ),
        ("Token count 9,000 exceeds model capacity of 8,192", Overflow(9000, 8192)),
        # the same counts twice (message and details) and the error's own code
        (
            'Prompt exceeds context: 9000 > 8192 tokens. {"code": 400, "detail": "9000 > 8192"}',
            Overflow(9000, 8192),
        ),
        # a limit and a larger count in one sentence, whatever else it states
        ("Input 9000 tokens exceeds context window 8192 by 808 tokens", Overflow(9000, 8192)),
        (
            "The model's max context length is 8192; however, you sent 9000 tokens in 12 parts",
            Overflow(9000, 8192),
        ),
        # three counts without that shape, or an output named beside a total: never guessed
        ("Context exceeded: 9000, 8192 and 808 tokens", Overflow(None, None)),
        ("Input and output tokens (9000) exceed the context window (8192)", Overflow(None, None)),
        # ids, sizes and decimals are no counts
        (
            "Prompt exceeds context window 8192 (request req_9000abc, 10MB, v1.5000)",
            Overflow(None, None),
        ),
        # a prompt over 64 times the number beside it: that number is no window
        ("Prompt exceeds the context window: 900000 tokens, see section 120", Overflow(None, None)),
    ],
)
def test_two_counts_of_an_unlisted_wording(message: str, expected: Overflow) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # the limit first, then the larger count
        (
            "This model's maximum prompt size is 32768 but the request holds 40000 tokens",
            Overflow(40000, 32768),
        ),
        ("Context limit: 8,192 tokens; your conversation has 9,310 tokens", Overflow(9310, 8192)),
        # the count first, then the limit
        (
            "The request's 140000 tokens exceed the model's maximum window of 131072",
            Overflow(140000, 131072),
        ),
        # a count no larger than the limit, an output named, or no tokens: not this rule
        ("maximum context length is 8192 tokens, you sent 4000 tokens", None),
        ("Limit 8192 tokens; the request has 9000 tokens with 2000 output tokens", None),
        ("Payload limit is 20000000 but the request has 20054016", None),
        # advice after the claim does not count; the sentence before it does
        (
            "The prompt (length 10127) is longer than the maximum model length of 8192. "
            "For image inputs, the number of image tokens depends on the images.",
            Overflow(10127, 8192),
        ),
        ("Too many tokens in batch. Max is 16384 got 17555", None),
        # the input length named instead of tokens
        ("Requested input length 99009 exceeds maximum input length 8192", Overflow(99009, 8192)),
    ],
)
def test_a_limit_and_a_larger_count_in_unlisted_wordings(
    message: str, expected: Overflow | None
) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # the prompt's count over a server setting named as an identifier (OpenRLHF's agent
        # executor, AReaL's gateways)
        ("Prompt (9000) exceeds max_length (8192)", Overflow(9000, 8192)),
        ("len of prompt tokens 33000 exceeds max_total_tokens 32768", Overflow(33000, 32768)),
        ("len of prompt tokens 40960 exceeds engine_max_tokens 32768", Overflow(40960, 32768)),
        ("input length 9000 is larger than max_seq_len (8192)", Overflow(9000, 8192)),
        # a setting that is not the window: the output, a rate, a budget, a message's or a
        # medium's cap, a KV pool; an output's count
        ("Prompt (9000) exceeds max_new_tokens (8192)", None),
        ("Prompt (9000) exceeds max_tokens (8192)", None),
        ("Prompt (9000) exceeds max_response_tokens (8192)", None),
        ("Prompt (9000) exceeds max_images_per_request (8192)", None),
        ("input tokens 150000 exceeds input_tokens_per_minute 100000", None),
        ("input tokens 120000 exceeds max_session_tokens 100000", None),
        ("Token budget exceeded: input tokens 120000 exceeds max_total_tokens 100000", None),
        ("input tokens 9000 exceeds max_message_tokens 8192", None),
        ("input tokens 9000 exceeds max_image_tokens 8192", None),
        ("prompt tokens 9000 exceeds free_kv_cache_tokens 8192", None),
        ("max_new_tokens (9000) exceeds max_length (8192)", None),
        # an output, bytes or media named beside it, or a count no larger than the setting
        ("Prompt (9000) exceeds max_length (8192) with the completion", None),
        ("Input (9000) exceeds max_length (8192) bytes", None),
        ("Prompt (4000) exceeds max_length (8192)", None),
    ],
)
def test_a_prompt_over_a_named_setting(message: str, expected: Overflow | None) -> None:
    for status in (400, 500):
        body = orjson.dumps({"detail": message})
        assert detect_overflow(status, body, wire_format="openai") == expected, status
    # AReaL's gateway relays it into its open stream, with the status it was given
    event = {"error": {"detail": message}, "status_code": 500}
    assert detect_stream_overflow(_sse(event), wire_format="openai") == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Context window 8192 exceeded: 7000 input tokens + 2000 output tokens",
            Overflow(7000, 6192),
        ),
        (  # the prompt's parts add up; the reservation comes off the window
            "Request over the context window of 10000 tokens: 9000 of text input, 2000 of "
            "image input, 500 in the output",
            Overflow(11000, 9500),
        ),
        (  # any order, decimals read as integers
            "sum of prompt length (9351.0) and max_tokens (1024) must be <= max_seq_len (8192)",
            Overflow(9351, 7168),
        ),
        # a sum compared with the window, with no window word: LightLLM, and Tinker's
        # "N max_tokens" after the count
        (
            "the input prompt token len 3500 + max_new_tokens 1024 > 4096",
            Overflow(3500, 3072),
        ),
        (
            "Prompt length plus max_tokens exceeds the model's context window: 33000 prompt "
            "tokens + 1 max_tokens > 32768.",
            Overflow(33000, 32767),
        ),
        (  # ms-swift: "prompt has P", "set the `max_tokens` to C"
            "Your prompt has 7843 tokens, and you have set the `max_tokens` to 1024, but the "
            "maximum model length supported is 8192.",
            Overflow(7843, 7168),
        ),
        (  # vllm-lite: "prompt_tokens (P) + max_tokens (C) = T"; its reservation alone over
            "prompt_tokens (32700) + max_tokens (100) = 32800 exceeds the model's context "
            "length (32768)",
            Overflow(32700, 32668),
        ),
        (
            "prompt_tokens (10) + max_tokens (9000) = 9010 exceeds the model's context "
            "length (8192)",
            None,
        ),
        (  # mivi: "prompt uses P", "output reserves C", "context limit is L"
            "Context length exceeded: prompt uses 31000 tokens and requested output reserves "
            "2048, but model context limit is 32768",
            Overflow(31000, 30720),
        ),
        (
            "Context length exceeded: prompt uses 12 tokens and requested output reserves "
            "8192, but model context limit is 4096",
            None,
        ),
        (  # the window as "should be less than or equal to L"
            "Input tokens length is 29618. Output tokens length is 8192. The total length "
            "should be less than or equal to 32768",
            Overflow(29618, 24576),
        ),
        (  # onnx-genai-server: the prefill length, max_tokens and the window "above" them
            "What: request admission exceeded the model context limit. Why: final prefill "
            "length (7350) after placeholder expansion plus max_tokens (1024) is 8374, above "
            "8192. How: reduce the prompt, image count/expansion size, or max_tokens.",
            Overflow(7350, 7168),
        ),
        (  # Plexus's own window check: an estimate, and the output "reserved for the response"
            "This model's context window is 200000 tokens. Your request is estimated at "
            "~181523 input tokens with 32000 reserved for the response, which exceeds the "
            "limit. Please shorten the prompt or lower max_tokens.",
            Overflow(181523, 168000),
        ),
        (
            "This model's context window is 8192 tokens. Your request is estimated at ~7000"
            " input tokens with 2000 tokens reserved for the response.",
            Overflow(7000, 6192),
        ),
        # an engine's chunk or its own prefill cap is no prompt or window
        ("kv cache: chunked prefill length (4096) with max_tokens (512), above 2048.", None),
        (
            "KV cache exhausted: prefill length (9000) with max_tokens (512) is 9512, above 8192"
            " free blocks",
            None,
        ),
        (
            "max context 8192; final prefill length (9000), above max_prefill_tokens 4096;"
            " max_tokens (256)",
            None,
        ),
        # a cap on the prompt is no part of it (max_input_tokens=, max prompt length)
        (
            "context length 8192: prompt_tokens=9000 exceeds max_input_tokens=8191;"
            " max_tokens (512)",
            Overflow(9000, 7680),
        ),
        (
            "context length 8192: max prompt length (4096) exceeded, prompt tokens: 9000,"
            " max_tokens (512)",
            Overflow(9000, 7680),
        ),
        (  # ... while a count of the prompt keeps its own prefix
            "context length 8192 exceeded: n_prompt_tokens=9000, max_tokens (512)",
            Overflow(9000, 7680),
        ),
        (  # local-lattice's estimate, "≈" for "="
            "Context budget exceeded: prompt_tokens≈7900, max_tokens=1024, context_window=8192."
            " Set MLX_CONTEXT_OVER_BUDGET=trim to drop oldest turns, or reduce messages /"
            " max_tokens.",
            Overflow(7900, 7168),
        ),
        # a size in bytes or characters is no count of tokens
        ("prompt has 70000 bytes and max_tokens 1000; the context limit is 65536", None),
        # it fits: some other error
        ("context length 8192; 3000 input tokens and 1000 output tokens", None),
        # two reservations: not unambiguous
        ("context window 8192: 7000 input tokens, 2000 output tokens, 1000 output tokens", None),
    ],
)
def test_itemised_counts_in_unlisted_wordings(message: str, expected: Overflow | None) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") == expected


def test_a_truncation_setting_over_its_budget_is_no_unfixable_overflow() -> None:
    # vLLM's truncate_prompt_tokens is the client's own setting, not a prompt count: the
    # answer is a plain client error, not an output reservation that fills the window
    said = (
        "truncate_prompt_tokens=9000 cannot be greater than max_model_len - max_tokens = 7168."
        " Please request a smaller truncation size. (parameter=truncate_prompt_tokens,"
        " value=9000)"
    )
    error = {"message": said, "type": "BadRequestError", "param": "truncate_prompt_tokens"}
    body = orjson.dumps({"error": {**error, "code": 400}})
    assert detect_overflow(400, body, wire_format="openai") is None
    assert not detect_unfixable(400, body)


def test_the_window_less_max_tokens_is_no_reservation() -> None:
    # "max_model_len - max_tokens = N" states what is left for the prompt, not an output
    # reservation of N: a prompt over it is an overflow a trim fixes, never unfixable
    said = "prompt tokens: 9000 exceed the context length: max_model_len - max_tokens = 7168"
    body = _error_body(said)
    assert detect_overflow(400, body, wire_format="openai") is not None
    assert not detect_unfixable(400, body)


def test_an_unlisted_wording_whose_reservation_fills_the_window_is_unfixable() -> None:
    body = _error_body("context length 4096 exceeded: prompt tokens: 100, max_tokens: 5000")
    assert detect_overflow(400, body, wire_format="openai") is None
    assert detect_unfixable(400, body)


def test_a_500_reads_as_a_400_but_for_a_pool_or_batch_running_out() -> None:
    # servers answer every exception a too-long prompt raises with 500; a shared KV pool
    # or a physical batch running out is no window, whatever its words
    for message, expected in (
        ("Your prompt has 9000 tokens but the model only supports up to 8192 tokens", (9000, 8192)),
        ("the request exceeds the available context size; context shift is disabled", None),
        ("internal error: 输入内容超长，请缩短后重试", None),  # "the input is too long"
        ("上下文长度超出模型限制", None),  # "the context length is over the model's limit"
        ("Prompt too long", None),
    ):
        found = detect_overflow(500, _error_body(message), wire_format="openai")
        assert found is not None and (found.real, found.maximum) == (expected or (None, None))
    for message in (
        "input (4002 tokens) is too large to process. increase the physical batch size",
        "Input prompt is too big compared to KV size. Please try increasing KV size.",
    ):
        assert detect_overflow(500, _error_body(message), wire_format="openai") is None, message


def test_a_pair_stated_bare_gives_the_counts_but_never_a_sums_part() -> None:
    # SGLang's multimodal check states the prompt after expansion against the window
    expanded = (
        "Multimodal prompt is too long after expanding multimodal tokens. After expanding "
        "len(req.origin_input_ids_unpadded)=5192 => 6153 >= 5489."
    )
    assert detect_overflow(400, _error_body(expanded), wire_format="openai") == Overflow(6153, 5489)
    summed = "prompt is too long: 3500 + 1024 > 4096"
    assert detect_overflow(400, _error_body(summed), wire_format="openai") == Overflow(None, None)
    # nor a product's (tabbyAPI counts its cache in pages of 256 tokens)
    paged = (
        "Job requires 33 pages (only 32 available) and cannot be enqueued. Total cache allocated"
        " is 32 * 256 = 8192 tokens. The request exceeds the available context size."
    )
    assert detect_overflow(400, _error_body(paged), wire_format="openai") == Overflow(None, None)


def test_envelopes_that_nest_or_set_the_message_aside() -> None:
    # ChatGPT-to-API puts an object where the message goes
    nested = orjson.dumps(
        {
            "error": {
                "code": "error",
                "message": {
                    "code": "message_length_exceeds_limit",
                    "message": "The message you submitted was too long, please reload the "
                    "conversation and submit something shorter.",
                },
                "type": "413 Request Entity Too Large",
            }
        }
    )
    assert detect_overflow(413, nested, wire_format="openai") is not None
    # a generic message, the provider's words in "details" (openai-to-cloudflare-ai)
    aside = orjson.dumps(
        {
            "error": {
                "message": "Chat completion failed",
                "type": "api_error",
                "details": "5021: The estimated number of input and maximum output tokens "
                "(155740) exceeded this model context window limit (128000).",
            }
        }
    )
    assert detect_overflow(500, aside, wire_format="openai") == Overflow(None, None)


def test_an_output_setting_in_a_printed_envelope_is_still_an_output_setting() -> None:
    # gpt3dev-api wraps a 400's dict, printed by Python, in a 500: its 'message' key is no
    # prompt-side word, so max_tokens is what exceeds the window
    printed = (
        "Generation error: 400: {'message': 'Requested max_tokens exceeds context window for "
        "this model.', 'type': 'invalid_request_error', 'param': 'max_tokens', 'code': None}"
    )
    assert detect_overflow(500, _error_body(printed), wire_format="openai") is None
    # an output reservation itemised as "N in max_tokens" (poe-api-wrapper)
    itemised = (
        "This model's maximum context length is 16000 tokens. However your request exceeds "
        "this limit (4096 in max_tokens, 13500 in messages)."
    )
    assert detect_overflow(400, _error_body(itemised), wire_format="openai") == Overflow(
        13500, 11904
    )


def test_readings_a_second_review_found_too_wide() -> None:
    def read(message: str, status: int = 400) -> Overflow | None:
        return detect_overflow(status, _error_body(message), wire_format="openai")

    # a model's name is no negative limit, nor is a -1 that means unlimited
    qwen = (
        "This model's maximum context length is 32768 tokens. However, your messages resulted "
        "in 40000 tokens. Received Model Group=qwen3-max-2025-09-23"
    )
    assert read(qwen) == Overflow(40000, 32768)
    assert read("prompt too long (token limit: -1 means unlimited)") == Overflow(None, None)
    # a bare pair's limit is never cut short, never part of a sum, never a status
    assert read("context length exceeded (5000 > 4096 - 512)") == Overflow(None, None)
    assert read("context length exceeded: 1024 + 9000 > 8192") == Overflow(None, None)
    assert read("context length exceeded: status 500 > 400") == Overflow(None, None)
    # a possessive is still a prompt-side word
    possessive = "max_tokens (4096) plus the prompt's tokens exceed the model's context window"
    assert read(possessive) == Overflow(None, None)
    # a success body relayed whole in "details" says nothing
    relayed = {"choices": [{"message": {"content": "Your prompt is too long: context exceeded"}}]}
    body = orjson.dumps(
        {"error": {"message": "upstream error", "details": orjson.dumps(relayed).decode()}}
    )
    assert detect_overflow(500, body, wire_format="openai") is None


def test_a_thinking_budget_is_an_output_setting_not_a_suspect() -> None:
    # pydantic's "Input should be ..." about Anthropic's budget_tokens: no probe for it
    for message in (
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        "The thinking budget (52428) is larger than the limit",
    ):
        body = _error_body(message)
        assert detect_overflow(400, body, wire_format="openai") is None
        assert overflow.detect_suspect(400, body) is None, message


@pytest.mark.parametrize(
    "message",
    [
        "Prompt + generated tokens exceeds max context length of 8192",
        "Total number of tokens (prompt+generation) exceeded the service limit of 2048 tokens. "
        "Please make the prompt shorter or reduce the number of tokens to generate.",
        "AiError: Ai: The estimated number of input and maximum output tokens (208453) exceeded "
        "this model context window limit (65536).",
    ],
)
def test_a_prompt_and_its_reservation_over_the_window_is_an_overflow(message: str) -> None:
    # no count to aim at (the total holds the reservation): the retry aims at 2/3
    found = detect_overflow(400, _error_body(message), wire_format="openai")
    assert found == Overflow(None, None)


def test_a_prompt_and_reservation_wording_keeps_its_exclusions() -> None:
    for message in (
        "input and output tokens per minute exceeded the rate limit",  # a rate limit
        "prompt and completion images exceed the limit of 20",  # media
        "max_tokens exceeds the context window",  # the output alone
        "prompt (about 7500 tokens) plus images exceed the limit of 20",  # media
    ):
        assert detect_overflow(400, _error_body(message), wire_format="openai") is None, message


def test_a_limit_below_zero_is_unfixable() -> None:
    # MLC LLM states the window less the output reservation: below zero, no prompt fits
    body = _error_body(
        "Request prompt has 2354 tokens in total, larger than the model input length limit -80."
    )
    assert detect_overflow(400, body, wire_format="openai") is None
    assert overflow.detect_unfixable(400, body)
    fits = _error_body(
        "Request prompt has 2354 tokens in total, larger than the model input length limit 2000."
    )
    assert detect_overflow(400, fits, wire_format="openai") == Overflow(2354, 2000)
    assert not overflow.detect_unfixable(400, fits)
    # vLLM 0.10.2-0.13 states the window less max_tokens as the window itself
    for window in ("-7232", "-1"):
        vllm = _error_body(
            f"This model's maximum context length is {window} tokens. However, your request has"
            " 12 input tokens. Please reduce the length of the input messages."
        )
        assert detect_overflow(400, vllm, wire_format="openai") is None, window
        assert overflow.detect_unfixable(400, vllm), window
    # EasyDeL's eSurge states the room the prompt leaves; one the output alone overfills
    # is unfixable, else the prompt aims at the window less the reserve and the output
    esurge = "Requested max_new_tokens={} exceeds allowed=1200 for prompt_len=6736."
    fixable = _error_body(esurge.format(4096))
    assert detect_overflow(400, fixable, wire_format="openai") == Overflow(6736, 3840)
    alone = _error_body(esurge.format(200000))
    assert detect_overflow(400, alone, wire_format="openai") is None
    assert overflow.detect_unfixable(400, alone)


def test_an_error_body_written_raw_after_a_preface_is_read() -> None:
    # llm-to-anthropic writes "event: error" and "data: <provider> API returned status 400:
    # {", the upstream's pretty-printed body on the lines below, unprefixed
    upstream = {"error": {"message": _OPENAI_SAID, "code": "context_length_exceeded"}}
    pretty = json.dumps(upstream, indent=4).encode()
    block = b"event: error\ndata: OpenAI API returned status 400: " + pretty + b"\n\n"
    read = detect_stream_overflow(block, wire_format="anthropic")
    assert read == Overflow(130512, 128000, whole=True)
    # a preface with no JSON after it, or JSON that is no error, stays as it was
    answer = json.dumps({"answer": _OPENAI_SAID}, indent=4).encode()
    for other in (b"not json at all", answer):
        text = b"event: error\ndata: OpenAI API returned status 400: " + other + b"\n\n"
        assert detect_stream_overflow(text, wire_format="anthropic") is None, other


def test_a_request_body_over_the_smallest_window_known_is_read() -> None:
    # one-api-java checks the body's bytes against the smallest window it knows
    said = "request body (612384 bytes) exceeds smallest known context window (131072 tokens)"
    body = orjson.dumps({"error": {"message": said, "type": "relay_error", "code": 413}})
    assert detect_overflow(413, body, wire_format="openai") == Overflow(None, 131072)


def test_a_servers_slot_for_the_next_token_is_itemised() -> None:
    # hipEngine itemises its own slot for the next token beside the prompt and max_tokens
    said = (
        "request requires 9004 context tokens (prompt {} + max_tokens {} + 1), exceeding this"
        " server's preallocated max_context_tokens=8192"
    )
    read = detect_overflow(400, _error_body(said.format(7003, 2000)), wire_format="openai")
    assert read == Overflow(7003, 6192)
    alone = _error_body(said.format(6, 100000))
    assert detect_overflow(400, alone, wire_format="openai") is None
    assert overflow.detect_unfixable(400, alone)


def test_a_servers_setting_over_the_window_is_unfixable() -> None:
    # rapid-mlx refuses every request alike when its --context-length exceeds the model's
    # window, with the overflow's code: no trim helps
    said = (
        "--context-length 262144 exceeds this model's declared 131072-token context window."
        " Restart the server without --context-length, or pass a value of 131072 tokens or less."
    )
    error = {"message": said, "type": "invalid_request_error", "code": "context_length_exceeded"}
    body = orjson.dumps({"error": error})
    assert detect_overflow(400, body, wire_format="openai") is None
    assert overflow.detect_unfixable(400, body)
    # a prompt over the window it names stays one ("--" as a dash, not a flag)
    prompt = _error_body(
        "This model's maximum context length is 32768 tokens. However, your prompt contains"
        " 33120 tokens, leaving no room for generation."
    )
    assert detect_overflow(400, prompt, wire_format="openai") == Overflow(33120, 32768, whole=True)
    dash = _error_body("Prompt -- 9000 tokens -- exceeds the context window of 8192 tokens.")
    assert detect_overflow(400, dash, wire_format="openai") == Overflow(9000, 8192)


def test_a_raw_bedrock_answer_stopped_at_the_window_is_read() -> None:
    # a router that relays Bedrock's Converse answer raw on a Messages route
    usage = {"inputTokens": 199903, "outputTokens": 0, "totalTokens": 199903}
    converse = {"output": {"message": {"content": [], "role": "assistant"}}, "usage": usage}
    converse["stopReason"] = "model_context_window_exceeded"
    read = detect_overflow(200, orjson.dumps(converse), wire_format="anthropic")
    assert read == Overflow(None, None)
    said = {"content": [{"text": "Partial answer"}], "role": "assistant"}
    truncated = {**converse, "output": {"message": said}}
    assert detect_overflow(200, orjson.dumps(truncated), wire_format="anthropic") is None


def test_a_limit_of_zero_is_never_an_overflow() -> None:
    # no prompt fits a window of 0: dropping turns would throw context away for nothing
    body = orjson.dumps(
        {
            "error": {
                "message": "prompt token count of 1083 exceeds the limit of 0",
                "code": "model_max_prompt_tokens_exceeded",
            }
        }
    )
    assert detect_overflow(400, body, wire_format="openai") is None


def test_a_context_size_of_zero_is_a_limit_of_zero_but_not_a_zero_after_the_word() -> None:
    def read(message: str) -> Overflow | None:
        return detect_overflow(413, _error_body(message), wire_format="openai")

    # LocalAI's budget once its output reservation is taken: no prompt fits
    assert read("compressed request (850 tokens) exceeds context size (0)") is None
    # a 0 after the word "context" in another clause is no window
    for message in (
        "Prompt exceeds the model's context. 0 tokens remain for output.",
        "The input is too long for the context, 0 tokens left for the reply.",
    ):
        assert read(message) == Overflow(None, None), message


def test_the_prompt_alone_is_kept_through_a_pair_that_confirms_the_window() -> None:
    # vLLM's character pre-check reads the window only; the retry still reserves the output
    message = (
        "This model's maximum context length is 8192 tokens. However, your prompt contains "
        "1200000 characters (more than 393216 characters, which is the upper bound for 8192 "
        "input tokens). Please reduce the length of the input prompt."
    )
    got = detect_overflow(400, _error_body(message), wire_format="openai")
    assert got is not None and got.whole
    assert got == Overflow(None, 8192)


def test_chinese_wordings_read_raw_or_escaped() -> None:
    message = "token数量超过上限。对话历史+问题的字数太多，需要精简输入"
    raw = orjson.dumps({"error": {"message": message, "code": "10907"}})
    escaped = json.dumps({"error": {"message": message, "code": "10907"}}).encode()
    assert b"\\u" in escaped and "超".encode() not in escaped
    for body in (raw, escaped):
        assert detect_overflow(400, body, wire_format="openai") == Overflow(None, None)
        assert detect_overflow(504, body, wire_format="openai") is None
    busy = _error_body("token数量超过上限，服务繁忙，请稍后重试")
    assert detect_overflow(503, busy, wire_format="openai") is None


def test_english_words_glued_to_chinese_text_keep_their_boundaries() -> None:
    def read(message: str, status: int = 400) -> Overflow | None:
        return detect_overflow(status, _error_body(message), wire_format="openai")

    # counts beside Chinese text are read; a TPM or RPM limit is a rate limit
    assert read("输入token数超过上限4096，当前5000") == Overflow(5000, 4096)
    assert read("输入token超过TPM限制") is None
    assert read("请求token数超过RPM限制，请稍后重试") is None
    # coze-discord-proxy's 500: the prompt over its limit; at 503 no more than a suspect
    coze = _error_body("prompt已超过限制,请分段发送 [131842]")
    assert detect_overflow(500, coze, wire_format="openai") is not None
    assert overflow.detect_suspect(503, coze) is None
    # the window named in English beside Chinese, even where only that sentence counts
    assert detect_overflow(403, _error_body("模型context window exceeded"), wire_format="openai")
    # a suspect's key keeps the counts beside Chinese text, and blanks only them
    suspect = overflow.detect_suspect(400, _error_body("文本内容12000字超过限制8000字"))
    assert suspect is not None and suspect.numbers == (12000, 8000)
    assert suspect.wording == "400 文本内容N字超过限制N字"
    glued = _error_body("request已超过限制")  # a request over a limit: worth a probe
    assert detect_overflow(400, glued, wire_format="openai") is None
    assert overflow.detect_suspect(400, glued) is not None


@pytest.mark.parametrize(
    "message",
    [
        "Input token length too long",
        "token数量超过上限。对话历史+问题的字数太多，需要精简输入",
        "Prompt length 4097 exceeds the available context size of 4096 tokens",
        "The sum of prompt length (9351.0), query length (0) should not exceed "
        "max_num_tokens (8192)",
    ],
)
def test_new_wordings_in_every_stream_shape(message: str) -> None:
    error = {"message": message, "type": "invalid_request_error"}
    openai_later = ROLE_CHUNK + b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    anthropic = (
        b"event: message_start\n"
        b'data: {"type":"message_start","message":{"id":"m","content":[]}}\n\n'
        b"event: error\ndata: " + orjson.dumps({"type": "error", "error": error}) + b"\n\n"
    )
    responses = (
        b"event: response.created\n"
        b'data: {"type":"response.created","response":{"id":"r","status":"in_progress"}}\n\n'
        b"event: response.failed\ndata: "
        + orjson.dumps({"type": "response.failed", "response": {"id": "r", "error": error}})
        + b"\n\n"
    )
    gemini = b"data: " + orjson.dumps({"error": {"code": 400, "message": message}}) + b"\n\n"
    choice = {"choices": [{"index": 0, "finish_reason": "error", "error": error}]}
    for head in (openai_later, anthropic, responses, gemini):
        found = detect_stream_overflow(head, wire_format="openai")
        assert found is not None, head
    assert detect_overflow(200, orjson.dumps(choice), wire_format="openai") is not None
    # The same words after output has started are not read.
    assert (
        detect_stream_overflow(ROLE_CHUNK + TEXT_CHUNK + openai_later, wire_format="openai") is None
    )


# --------------------------------------------------------------------------- own patterns


def test_operator_patterns() -> None:
    patterns = overflow.compile_patterns([r"kv budget (?P<real>\d+)/(?P<max>\d+) spent"])
    body = _error_body("KV budget 9000/8192 spent")
    assert detect_overflow(400, body, wire_format="openai") is None
    assert detect_overflow(400, body, wire_format="openai", patterns=patterns) == Overflow(
        9000, 8192
    )
    event = b"event: error\ndata: " + body + b"\n\n"
    assert detect_stream_overflow(event, wire_format="openai", patterns=patterns) == Overflow(
        9000, 8192
    )
    # Error messages only: never a success body, and a rate limit still wins.
    answer = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "KV budget 1/1 spent"}}
        ]
    }
    assert (
        detect_overflow(200, orjson.dumps(answer), wire_format="openai", patterns=patterns) is None
    )
    assert detect_overflow(429, body, wire_format="openai", patterns=patterns) is None
    bare = overflow.compile_patterns(["budget spent"])
    assert detect_overflow(
        400, _error_body("budget spent"), wire_format="openai", patterns=bare
    ) == (Overflow(None, None))


@pytest.mark.parametrize(
    "sources",
    [["("], [""], ["x" * (overflow.MAX_PATTERN_LENGTH + 1)], ["x"] * (overflow.MAX_PATTERNS + 1)],
)
def test_operator_patterns_are_bounded(sources: list[str]) -> None:
    with pytest.raises(ValueError):
        overflow.compile_patterns(sources)


# --------------------------------------------------------------------------- held out


def test_heldout_figures(capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_entries(HELDOUT_PATH)
    overflows = [e for e in loaded if e["overflow"]]
    others = [e for e in loaded if not e["overflow"]]
    assert {e["id"] for e in loaded}.isdisjoint({e["id"] for e in CORPUS})
    assert len(overflows) >= 40 and len(others) >= 40
    missed: list[str] = []
    false_positives: list[str] = []
    wrong_counts: list[str] = []
    probed: dict[bool, list[str]] = {True: [], False: []}  # suspects a probe resends
    for entry in loaded:
        body = entry["body"].encode()
        if entry["stream"]:  # a stream that ends after these bytes, as the relay reads it
            got = detect_stream_overflow(body, wire_format=entry["format"])
            got = got or detect_bare_stream_overflow(body, wire_format=entry["format"])
        else:
            got = detect_overflow(entry["status"], body, wire_format=entry["format"])
            if (
                got is None
                and not detect_unfixable(entry["status"], body)
                and detect_suspect(entry["status"], body) is not None
            ):
                probed[entry["overflow"]].append(entry["id"])
        if entry["overflow"] and got is None:
            missed.append(entry["id"])
        if not entry["overflow"] and got is not None:
            false_positives.append(entry["id"])
        stated = "real" in entry or "maximum" in entry
        if got is not None and stated and got != _expected(entry) and entry["id"] not in _UNREAD:
            wrong_counts.append(entry["id"])
    with capsys.disabled():
        print(
            f"\nheld-out: {len(overflows) - len(missed)}/{len(overflows)} overflows recognised, "
            f"{len(false_positives)}/{len(others)} false positives; missed={missed} "
            f"false_positives={false_positives} wrong_counts={wrong_counts}; "
            f"probed: {len(probed[True])} of the misses {probed[True]}, "
            f"{len(probed[False])}/{len(others)} look-alikes {probed[False]}"
        )
    assert not false_positives
    assert not wrong_counts
    # Every miss is one left on purpose, with its reason: a reader that stops recognising
    # an overflow, or a new batch's miss, fails here until it is fixed or written into
    # _LEFT_MISSES with why; one read now leaves the ledger.
    assert sorted(missed) == sorted(_LEFT_MISSES)
    # a probe costs a look-alike one or two more upstream calls: suspects stay rare among
    # them, byte-size limits aside (probed on purpose: a trimmed body may well pass them)
    sizes = {e["id"] for e in others if _BODY_LIMIT_RE.search(e["body"]) or e["status"] == 413}
    assert len(set(probed[False]) - sizes) <= 0.03 * len(others)
    # for a request that set no output limit the relay reads an answer stopped at "length"
    # (or a response left incomplete for max_output_tokens) before any output
    # (detect_unspent_stop): the usage-less streams the ledger leaves, and of the
    # look-alikes only a stream's last chunk cut by its request's max_tokens, a test
    # fixture's Responses stream so left, its request unknown, and alcf-proxy's answer
    # to a request that set max_output_tokens 1024 (which the relay relays as it came)
    unspent = {e["id"] for e in loaded if unspent_stop(e)}
    relayed = ("a stream finished length, no usage", _INCOMPLETE)
    left = {i for i in missed if _LEFT_MISSES[i] in relayed}
    assert left <= unspent
    assert unspent & {e["id"] for e in others} == {
        "hb7-openai-stream-finish-length",
        "hb454-meai-responses-stream-incomplete-max-output",
        "hb745-alcf-resp-incomplete-before-output",
    }


# Held-out overflows no reader recognises, and why they are left so. The first three kinds
# are choices: a 404 or 503 never reads as an overflow (a missing model, an overloaded
# upstream: trimming would lose context for nothing), nor does a cap in characters (the
# look-alikes hold as many: text-to-speech inputs, single fields, a message's length).
_CHARACTERS: Final = "a cap in characters, which look-alikes share"
_NOT_TRIMMED: Final = "an API whose requests are not chats trimgate trims"
# read by the relay for a Responses request with no max_output_tokens
_INCOMPLETE: Final = "a response left incomplete for max_output_tokens, no text produced"
_LEFT_MISSES: Final = {
    "hb12-clova-40003-textlong": '"Text too long" alone: a suspect, recovered by a probe',
    "hb13-gigachat-413-payload-too-large-context": "a 413 with no words: a suspect, probed",
    "hb14-chatanywhere-free-prompt-limit": "a free plan's prompt cap, sent as a 403",
    "hb21-petals-chat-max-length": _NOT_TRIMMED + " (a traceback under {ok: false})",
    "hb30-mlx-swap-proxy-404-context-limit": "a 404",
    "hb35-bitnet-fastapi-prompt-too-long-chars": _CHARACTERS,
    "hb41-pollinations-input-text-character-cap": _CHARACTERS,
    "hb57-llm-gw-no-suitable-variant": "a routing failure that states a size, no limit",
    "hb58-freeroute-vi-combo-context-overflow-200-choice": "a reply whose text is the error",
    "hb66-fastflowlm-max-length-200": '"Max length reached": sent for other failures too',
    "hb73-runpod-sglang-runsync-input-too-long": _NOT_TRIMMED + " (RunPod's /runsync job)",
    "hb73-runpod-sglang-runsync-total-too-long": _NOT_TRIMMED + " (RunPod's /runsync job)",
    "hb73-runpod-trtllm-runsync-max-seq-len": _NOT_TRIMMED + " (RunPod's /runsync job)",
    "hb83-geminilive-close-input-request-contains": "a Gemini Live close reason (relayed)",
    "hb83-geminilive-close-system-instruction-sum": "a Gemini Live close reason (relayed)",
    "hb91-lightrag-ollama-chat-ndjson-provider-error": _NOT_TRIMMED + " (Ollama's NDJSON)",
    "hb95-llamago-prompt-chars": _CHARACTERS,
    "hb98-lightspeed-chatbot-stream-prompt-too-long": _NOT_TRIMMED + " (road-core's query)",
    "hb105-vllmspyre-warmup-shape": "no window stated, and said when only the output is over",
    "hb106-yuan2-megatron-server-seq-length": _NOT_TRIMMED + " (Yuan 2.0's PUT /yuan)",
    "hb113-letta-ctx-stream-internal-error": _NOT_TRIMMED + " (Letta's agent messages)",
    "hb113-letta-system-prompt-overflow-stream": _NOT_TRIMMED + " (Letta's agent messages)",
    "hb115-agent-cli-to-api-prompt-too-large": _CHARACTERS,
    "hb118-lemonade-fastflowlm-npu-max-length-reached": '"Max length reached!": a plain suspect',
    "hb120-agnes-analyzer-prompt-token-cap": "a safety scanner's cap: its words rule a trim out",
    # TeleChat2's demo server caps the last message at the request's own max_length
    "hb121-telechat2-chatweb-input-over-maxlength": "the newest message over max_length",
    "hb121-telechat2-chatweb-input-over-maxlength-sse": "the newest message over max_length",
    "hb122-ollama-runner-entire-prompt-truncated": "said once Ollama's own truncation is done",
    "hb123-sillytavern-textgen-relay-aphrodite": _NOT_TRIMMED + " (SillyTavern's backend API)",
    "hb126-kibana-actions-execute-gen-ai-ctx": _NOT_TRIMMED + " (Kibana's connector _execute)",
    "hb132-duck2api-err-input-limit-429-relay": "a 429 (DuckDuckGo's ERR_INPUT_LIMIT, relayed)",
    # (these five labelled look-alikes until the set's rule for embeddings was written down)
    "hb14-vllm-mlx-embedding-too-long": _NOT_TRIMMED + " (vllm-mlx's embeddings)",
    "hb15-vllm-mlx-embedding-too-long": _NOT_TRIMMED + " (vllm-mlx's embeddings)",
    "hb22-vllm-rs-embedding-too-long-500": _NOT_TRIMMED + " (vllm.rs's embeddings)",
    "hb65-ovms-embeddings-input-longer-than-allowed": _NOT_TRIMMED + " (OVMS's embeddings)",
    "hb423-ragapi-01315-embeddings-prompt-too-long": _NOT_TRIMMED + " (LlamaEdge's embeddings)",
    "hb145-ovms-embeddings-input-longer-than-allowed": _NOT_TRIMMED + " (OVMS's embeddings)",
    "hb155-tei-openai-embeddings-character-limit": _NOT_TRIMMED + " (TEI's embeddings)",
    "hb160-ollama-064-v1-chat-entire-prompt-removed-by-truncation": "as hb122, on /v1",
    "hb196-ollama-0140-v1-messages-entire-prompt-removed": "as hb122, on /v1/messages",
    "hb197-llamacpp-embeddings-input-too-large-physical-batch-counted": _NOT_TRIMMED
    + " (a physical batch: embeddings)",
    # vllm-spyre's warmup shapes: as hb105 (said when only the output is over too)
    "hb201-vllm-spyre-sb-no-warmup-shape-prompt": "as hb105",
    "hb202-aaaronmiller-ccp-per-request-token-budget-429": "a 429 (a proxy's token budget)",
    "hb203-gemini-cachedcontents-too-large-video": _NOT_TRIMMED + " (Gemini's cachedContents)",
    "hb206-bag-embeddings-titan-maxlength-chars": _NOT_TRIMMED + " (embeddings, in characters)",
    "hb203-llamacpp-embeddings-input-over-physical-batch": _NOT_TRIMMED
    + " (a physical batch: embeddings)",
    "hb164-tei-183-openai-embeddings-input-characters-413": _NOT_TRIMMED + " (TEI's embeddings)",
    "hb168-llama-box-v0123-embeddings-prefill-exceed-n-ubatch": _NOT_TRIMMED + " (embeddings)",
    # ERNIE's 336003 caps the newest question, which a trim always keeps
    "hb171-higress-v200-baidu-200-error-to-500-text": "the newest message over its own cap",
    "hb177-ovms-2024-raw-envelope-embeddings-longer-than-allowed": _NOT_TRIMMED + " (embeddings)",
    # codex2api's close reasons come after its error frame, which is read (batch 195)
    "hb195-codex2api-responses-ws-close-1008-context-error-event": "a close after a read error",
    "hb195-codex2api-responses-ws-close-1008-context-response-failed": "as the one above",
    # freellmapi's guardrail counts the output with the input: a suspect, recovered by a probe
    "hb304-freellmapi-token-budget-guardrail": "a proxy's budget of input and output together",
    "hb304-sqr-free-llm-gateway-422-no-capable-model-tokens": "capabilities or size: not said",
    # ClawRouter's estimate adds max_tokens to the prompt, against no window it names
    "hb309-clawrouter-context-capacity-exceeded": "a router's capacity for input and output",
    "hb309-clawrouter-context-capacity-exceeded-sse": "as the one above, in its stream",
    # headroom's compressor refuses a request too large, or too slow, to compress
    "hb311-headroom-responses-compression-refused-timeout": "a compressor's limit: probed",
    "hb311-headroom-responses-compression-refused-oversize": "a compressor's limit: probed",
    "hb312-ninja-toapi-413-payload-too-large": "a 413 that names no tokens: a suspect, probed",
    "hb312-orchids2api-warp-context-window-text": "a reply whose text is the error, output counted",
    "hb312-danyapi-deepseek-input-exceeds-429": "a 429 (a web account's answer, relayed)",
    # gatewayz keeps the upstream's words as the value of a parameter it calls invalid,
    # where a validation error echoes the request: never read
    "hb313-gatewayz-deepseek-overflow-as-invalid-parameter": "an invalid parameter's value",
    "hb313-gatewayz-openrouter-overflow-as-invalid-parameter": "an invalid parameter's value",
    "hb313-gatewayz-anthropic-native-overflow-as-invalid-parameter": "as the two above",
    "hb314-simongpt-router-char-cap-422": _CHARACTERS,
    "hb324-bodhi-embeddings-local-llama-ubatch": _NOT_TRIMMED + " (a physical batch: embeddings)",
    # npu-bridge's system text alone over its 32,000-character ceiling: a trim keeps it
    "hb330-npubridge-native-system-text-char-ceiling": "the system text alone, in characters",
    "hb331-dfastllm-prompt-too-long-characters": _CHARACTERS,
    "hb336-edgen-image-prompt-too-long-clip": _NOT_TRIMMED + " (an image model's text encoder)",
    # a slot's share of llama.cpp's window, worded as a budget: a suspect, probed
    "hb336-hypernetix-llamacpp-server-slot-budget": "a slot's budget: a suspect, probed",
    "hb342-siliconflow-embeddings-413-input-under-8192": _NOT_TRIMMED + " (embeddings)",
    # a toy server's KV pool in blocks, for the prompt and its max_tokens together
    "hb356-nanoserve-pjdurden-request-exceeds-kv-pool": "a pool of blocks for input and output",
    # Rapid-MLX's cap on the image tokens one prefill batch takes, not the window
    "hb368-rapid-mlx-vision-per-batch-prefill-cap": "a prefill batch's cap on image tokens",
    "hb368-olmlx-chat-kv-preflight-prompt-too-long": "a 503",
    "hb368-olmlx-messages-kv-preflight-prompt-too-long": "a 503",
    # GopherLLM's "recent" mode: the newest turn alone over the window less the output
    "hb379-gopherllm-recent-latest-turn-too-big": "the newest turn over a budget, output named",
    # rustformers' "the context window is full" as a completion's text: words a model writes
    "hb382-localai-tauri-completions-context-full-sse": "a reply whose text is the error",
    "hb387-jqzhang03-nanovllm-prompt-kv-blocks": "a KV pool's capacity in blocks",
    # Kuwa's DALL-E executor: an image prompt's cap in characters, the newest message alone
    "hb397-kuwa-api-dalle-prompt-too-long": "an image model's prompt, in characters",
    "hb409-magic-embeddings-input-too-large": _NOT_TRIMMED + " (embeddings)",
    "hb416-rp-wsglang-stream-input-too-long": _NOT_TRIMMED + " (RunPod's /runsync job)",
    "hb416-rp-wsglang-openai-route-stream-total-tokens": _NOT_TRIMMED + " (RunPod's /runsync)",
    "hb416-rp-wsglang-generate-wrapped-input-too-long": _NOT_TRIMMED + " (RunPod's /runsync)",
    "hb416-rp-wsglang-generate-wrapped-total-tokens": _NOT_TRIMMED + " (RunPod's /runsync)",
    # EvalScope's bridge streams the provider's message as the reply in 48-character pieces
    "hb420-evalscope-bridge-openai-stream-length-vllm": "a reply whose text is the error, streamed",
    "hb420-evalscope-bridge-anthropic-stream-input-plus-max-tokens": "as the one above",
    # ... and whole, but in words that state no prompt count: zeros some servers write always
    "hb420-evalscope-bridge-openai-200-length-dashscope-range": "a reply that states no counts",
    "hb426-exportdeploy-hf-ray-vllm-prompt-too-long": "a reply that is the error, output counted",
    "hb427-opennotebook-source-chat-stream-content-too-large": _NOT_TRIMMED + " (Open Notebook)",
    "hb427-qanything-relayed-openai-context-length-stream": _NOT_TRIMMED + " (QAnything's)",
    "hb427-privategpt-system-alone-exceeds-condense": "the system messages alone, kept by a trim",
    "hb427-privategpt-last-user-message-too-long": "the newest message over its own cap",
    "hb428-qiayue-relay-context-length": _NOT_TRIMMED + " (a web UI's own relay stream)",
    "hb433-chatanywhere-free-prompt-4096": "a free plan's prompt cap, sent as a 403",
    "hb440-buildingai-custom-vllm-overflow": _NOT_TRIMMED + " (an app's AI SDK UI stream)",
    "hb440-buildingai-deepseek-overflow": _NOT_TRIMMED + " (an app's AI SDK UI stream)",
    "hb440-buildingai-anthropic-overflow": _NOT_TRIMMED + " (an app's AI SDK UI stream)",
    "hb440-jeecgboot-openai-overflow-error-object": _NOT_TRIMMED + " (JeecgBoot's app chat)",
    # ONNX Runtime GenAI's "max_length (T) cannot be greater than model context_length (L)":
    # onnx-genai's T is the prompt with max_tokens, other servers' T the output alone (the
    # corpus's hb245 look-alikes): the same words, either way
    "hb441-onnxgenai-phi3-4k-default-max-tokens": "ORT GenAI's max_length, either side",
    "hb441-onnxgenai-qwen-32k-prompt-over-window": "ORT GenAI's max_length, either side",
    "hb441-onnxgenai-phi35-128k-long-history": "ORT GenAI's max_length, either side",
    "hb443-llmgateway-redis-openai-overflow-sse": _NOT_TRIMMED + " (llm-gateway's named prompts)",
    # an Assistants API run's last_error: the thread is the server's, no request to trim
    "hb446-oaa-run-openai-overflow": _NOT_TRIMMED + " (an Assistants API run)",
    "hb446-oaa-run-vllm-overflow": _NOT_TRIMMED + " (an Assistants API run)",
    "hb446-openopenai-run-overflow": _NOT_TRIMMED + " (an Assistants API run)",
    # Moodle's AJAX services and its plugins' endpoints: a web app's own API
    "hb450-moodle-core-openai-overflow-debug": _NOT_TRIMMED + " (Moodle's AJAX services)",
    "hb450-moodle-core-azureai-input-tokens-limit-debug": _NOT_TRIMMED + " (Moodle's AJAX)",
    "hb450-moodle-core-openai-overflow-minimal": _NOT_TRIMMED + " (Moodle's AJAX services)",
    "hb450-block-openai-chat-overflow-debug": _NOT_TRIMMED + " (a Moodle block's endpoint)",
    "hb450-local-ai-manager-chatgpt-overflow-generic": _NOT_TRIMMED + " (Moodle's AJAX)",
    # Anthropic's gate on the 1M window for a credential without extra usage, sent as a 429
    # rate_limit_error: billing never reads as an overflow (a trim to 200k would drop most
    # of a session its user chose a long window for)
    "hb475-anthropic-429-extra-usage-long-context": "a billing gate, sent as a 429",
    "hb477-moondream-proxy-combined-text-16000": _CHARACTERS,
    # praxis's cap on the history it stores for previous_response_id: the request carries
    # none of it, so there is nothing to trim
    "hb479-praxis-rehydrate-history-bytes": "a stored history the request does not carry",
    "hb479-praxis-rehydrate-history-bytes-sse": "a stored history the request does not carry",
    # onnx-genai-server's "invalid image input: prompt exceeds the declared context budget":
    # an image's expansion, which dropping text turns may not make fit
    "hb485-onnxgenai-image-prompt-context-budget": "an image's own budget, no count",
    # a Kiro bridge's content threshold, "separate from the model context window", whose
    # remedy names documents and images beside tool results
    "hb488-kirors2ue-content-length-threshold": "a cap said to be apart from the window",
    "hb488-uniapi-tpr-request-too-long": "a 413 in a body-size limit's words",
    "hb489-swift-mossvl-truncation": "a truncation that cut media tokens: media the excess",
    "hb491-synthetic-inference-backend-400-no-body": "a 400 that says nothing of the window",
    # relays whose own words replace the provider's: Noveum's gateway rewrites the error as
    # an empty completion (a 429 gets the same body), speaches a generic failure
    "hb496-noveum-anthropic-overflow-rewritten": "the provider's words dropped by a relay",
    "hb496-noveum-bedrock-overflow-rewritten": "the provider's words dropped by a relay",
    "hb497-speaches-proxied-overflow-debug": "the provider's words dropped by a relay",
    "hb497-speaches-proxied-overflow-plain": "the provider's words dropped by a relay",
    # claude-code-hub's rewording of a provider plan without the long-context tier: a
    # billing gate, as Anthropic's extra usage above
    "hb503-claude-code-hub-long-context-plan-zh": "a plan's long-context gate (billing)",
    "hb509-nexa-py-embeddings-batch": _NOT_TRIMMED + " (Nexa's embeddings, a batch size)",
    # codex-lb's /responses/compact "exceeds the upstream size limit after preparing the
    # final wire payload": a byte cap's words
    "hb511-codexlb-compact-input-wire-budget": "a size limit on the wire payload",
    "hb512-vllm-mlx-embeddings-input-over-max-length": _NOT_TRIMMED + " (vllm-mlx's embeddings)",
    # uzu's server writes its engine's "Error: Backend error: Context overflow" as a whole
    # reply finished "stop": what a model's own answer may say, and reading a 200 as an
    # overflow would drop a real answer
    "hb521-uzu-mirai-200-backend-error-context-overflow": "an error as a reply finished stop",
    # a Gemini web adapter's own budget, "even after dropping adapter-added file context"
    "hb525-youyi666-gemini-web-adapter-budget": "an adapter's budget, in words of files",
    # g4f's relay of ChatGPT web's 413, its detail written as a Python dict
    "hb526-g4f-api-openaichat-413": "a Python dict's words: a suspect, probed",
    # xinference over an old vLLM ends a prompt past the window as a stream finished
    # "length" with no text and no usage, as a model whose hidden reasoning spent a small
    # max_tokens ends one too
    "hb551-xinference-vllm-stream-length-no-output": "a stream finished length, no usage",
    "hb553-fastflowlm-max-length-reached-prefill": '"Max length reached!": as hb66\'s',
    # pagedllm answers a prompt past its KV pool with an empty answer finished "length": a
    # chat stream with no usage (as xinference's), and on the legacy completions endpoint
    "hb562-pagedllm-chat-stream-refused-length-no-delta": "a stream finished length, no usage",
    "hb562-pagedllm-completions-nonstream-refused-length-empty": _NOT_TRIMMED
    + " (legacy completions)",
    "hb562-pagedllm-completions-stream-refused-length": _NOT_TRIMMED + " (legacy completions)",
    # mittwald's documentation shows its overflow as a template, "maximum context length is X
    # tokens. However, you requested Y tokens ...": the counts a server writes are its words
    "hb568-mittwald-dedicated-doc-placeholder": "a doc's template, X and Y for the counts",
    # RunPod's job API (/runsync) answers a worker's output list, here SGLang's error JSON as
    # a string in it, with status COMPLETED: not a chat endpoint
    "hb570-runpod-worker-sglang-runsync-input-longer": _NOT_TRIMMED + " (a job's output)",
    "hb570-runpod-worker-sglang-runsync-openai-route-total": _NOT_TRIMMED + " (a job's output)",
    # a test fixture's fragment of YandexGPT's refusal ("...: text length is N, which is
    # outside the range (0, 100000]...")
    "hb592-alc-yandexgpt-text-length-range": "a range of characters, in a fixture's fragment",
    # GigaChat's documented overflow is a 413 "Payload Too Large", the words of a body-size
    # limit; gpt2giga relays it in a stream as the exception's name alone
    "hb592-ru-app-gigachat-413-payload-too-large": "a 413 with no words: a suspect, probed",
    "hb592-gpt2giga-stream-413-upstream": "an exception's name, RequestEntityTooLargeError",
    # LlamaEdge's one chunk: a role, no content, finished "length", no usage, and no [DONE]
    "hb597-llamaedge-stream-length-no-output-15706-tokens": "a stream finished length, no usage",
    # mlx-omnia, InfiniLM and an RKLLM server give a prompt that fills the window an empty
    # answer finished "length": streamed with no usage (as xinference's), and whole with
    # one output token counted (the server's floor), as a single token's answer is
    "hb603-mlx-omnia-prompt-fills-window-stream-length": "a stream finished length, no usage",
    "hb604-infinilm-static-cache-empty-length-sse": "a stream finished length, no usage",
    "hb606-rkllm-api-server-stream-runtime-overflow-length": "a stream finished length, no usage",
    "hb610-infinilm-static-cache-prompt-over-max-cache-len-stream-length": "as hb604's",
    # a text-to-PPL model behind SageMaker's InvokeEndpoint: "Input token limit exceeded.
    # The model only supports schemas with less than 1000-1500 fields"
    "hb608-sagemaker-ppl-model-input-token-limit-exceeded": _NOT_TRIMMED + " (a PPL model's)",
    "hb614-olmlx-503-kv-preflight-openai": "a 503",  # olmlx's KV pre-flight, as hb368's
    "hb614-olmlx-503-kv-preflight-anthropic-overloaded": "a 503",
    # HostAI's LiteRT-LM refusal as a whole reply "Error: ..." finished "stop", words counted
    "hb616-hostai-litertlm-input-token-ids-too-long-200": "a reply that is the error, stop",
    # one-api's stored conversation ("hydrated transcript bytes N exceeds limit M")
    "hb620-laisky-oneapi-hydrated-transcript-bytes": "a stored history the request does not carry",
    # a Claude-Code proxy's "prompt is too long: 0 tokens > 0 maximum" (no usage upstream)
    "hb621-ccm-codex-overflow-no-usage-zero-counts": "counts of 0 > 0: a suspect, probed",
    # llm-interactive-proxy's "All weighted branches exceeded max_context constraints"
    "hb624-lip-gemini-routing-all-branches-max-context": "a 503",
    # the Codex backend's Responses stream ends incomplete at max_output_tokens after 31
    # tokens of hidden reasoning and no text: a reasoning model that spent a small limit
    # writes the same
    "hb638-codex-stream-incomplete-empty-reasoning": "a stop after hidden reasoning only",
    # text-generation-webui's answers when its llama.cpp server refused the prompt: empty,
    # finished "length"
    "hb643-textgen-llamacpp-ctx-overflow-stream-empty-length": (
        "a stream finished length, no usage"
    ),
    "hb643-textgen-completions-ctx-overflow-empty-length": "legacy completions, 0 output counted",
    "hb643-textgen-completions-stream-ctx-overflow": "legacy completions, 0 output counted",
    "hb643-textgen-completions-stream-usage-ctx-overflow": "legacy completions, 0 output counted",
    # Ollama's empty answer when the prompt filled its default window, counting 1 output
    # token, in its native /api/chat shape
    "hb654-ollama-native-api-chat-empty-length-window-full": "an empty answer, 1 token",
    "hb660-reachd-input-too-large-chars": _CHARACTERS,
    # NeMo Gym answers a vLLM overflow with an empty reply and no usage in every format
    # (Messages: max_tokens, 0 and 0 counted), as a reasoning model that spent max_tokens
    "hb664-nemogym-chat-empty-length-after-vllm-overflow": "an empty answer, no usage",
    "hb664-nemogym-chat-sse-empty-length-after-vllm-overflow": (
        "a stream finished length, no usage"
    ),
    "hb664-nemogym-responses-incomplete-empty-after-vllm-overflow": "an empty answer, no usage",
    "hb664-nemogym-responses-sse-incomplete-empty-after-vllm-overflow": (
        "an empty answer, no usage"
    ),
    "hb664-nemogym-messages-empty-max-tokens-after-vllm-overflow": "a stop, 0 output counted",
    "hb664-nemogym-messages-sse-empty-max-tokens-after-vllm-overflow": "a stop, 0 output counted",
    # Inspect AI's bridge writes OpenAI's three sentences as the reply: a reply that says
    # more than one sentence may be a model's
    "hb664-inspect-bridge-chat-200-length-openai-overflow-text": "a reply of three sentences",
    # LMDeploy (0.2 to 0.10) streams a prompt that leaves no room as one empty chunk
    # finished "length", with no usage
    "hb679-lmdeploy-0102-run-out-of-tokens-stream": "a stream finished length, no usage",
    "hb679-lmdeploy-026-run-out-of-tokens-stream": "a stream finished length, no usage",
    "hb679-lmdeploy-064-run-out-of-tokens-stream": "a stream finished length, no usage",
    "hb679-lmdeploy-064-run-out-of-tokens-completions-stream": _NOT_TRIMMED
    + " (legacy completions)",
    # llama.cpp (2024) streams a decode that found no KV slot as an "error:" line, code 500:
    # the shared pool, which another request may have filled
    "hb682-llamacpp-0b3bf966-stream-kv-size-error-then-done": "a KV pool's 500",
    # Zhipu's code 1261 (prompt too long) beside "Bad request" alone: a numeric code
    "hb684-zhipu-coding-1261-generic-message": "a numeric code, its message generic",
    # Xinference 0.8 (over vLLM) and LMDeploy 0.1 to 0.5 stream the same empty stop
    "hb686-xinference-v080-vllm-empty-length-stream": "a stream finished length, no usage",
    "hb686-lmdeploy-v010-empty-length-stream": "a stream finished length, no usage",
    "hb686-lmdeploy-v040-empty-length-stream-logprobs": "a stream finished length, no usage",
    "hb686-lmdeploy-v050-empty-length-stream-single-chunk": "a stream finished length, no usage",
    # GPT4All 3.4 words its refusal as a model would ("Your message was too long and could
    # not be processed. Please try again with something shorter."), finished "stop"
    "hb687-gpt4all-v3.4.0-chat-message-too-long-200": "a reply in a model's words",
    "hb687-gpt4all-v3.4.0-completions-message-too-long-200": "a reply in a model's words",
    # codex-proxy writes "[Error] <code>: <message>" in a Gemini candidate finished "OTHER"
    # (its chat chunk so, its finish in the next, is read as a tagged frame since batch 955)
    "hb688-codexproxy-v1024-gemini-stream-error-candidate": "a frame in a Gemini candidate",
    # an exo fork's "Prefill would require ~38.42 GiB peak ... but the prefill ceiling is
    # 34.00 GiB": memory, no count of tokens
    "hb689-exo-fork-prefill-memory-nonstream": "a memory ceiling in GiB, no token count",
    "hb689-exo-fork-prefill-memory-stream": "a memory ceiling in GiB, no token count",
    "hb690-llamabox-v0061-kv-size-period-please-500": "a KV pool's 500",
    # go-llm-proxy translates Claude's window stop into "length" with content null
    "hb692-gollmproxy-anthropic-window-stop-empty": "an empty answer, content null",
    # oMLX's streamed memory guard: "Prefill context too large for available memory
    # (... kv_len=N): predicted peak would exceed prefill safety cap 77.8GB ..."
    "hb701-omlx-stream-prefill-memory-guard-kvlen": "a memory ceiling in GB",
    # local-lattice's own trim left the system messages alone, still over the window
    "hb703-lattice-cannot-trim-enough": "the system messages alone, kept by a trim",
    "hb703-spyre-no-warmup-shape": "as hb105",
    # LiteLLM's Responses over Claude's window stop: incomplete for max_output_tokens with
    # nothing shown, 13 output tokens counted (a stand-in's usage); whole, the response
    # says the request set no max_output_tokens, streamed it does not
    "hb709-litellm-anthropic-stream-window-stop": _INCOMPLETE,
    # freewhirr's 402 "FreeModelsExhausted", every attempt over its model's window
    "hb715-freewhirr-free-exhausted-ctx-chat": "a 402, its attempts each an overflow",
    "hb715-freewhirr-free-exhausted-ctx-messages": "a 402, its attempts each an overflow",
    "hb715-freewhirr-paid-fallback-exhausted-ctx-responses": (
        "a 402, its attempts each an overflow"
    ),
    # Responses bridges over a server that stopped at "length" before any output
    "hb717-ds4codex-stream-incomplete-no-output-rkllm": _INCOMPLETE,
    "hb717-codex-router-stream-incomplete-no-output-rkllm": _INCOMPLETE,
    "hb717-codex-router-incomplete-no-output-rkllm-json": _INCOMPLETE,
    "hb717-codex-rosetta-stream-incomplete-no-output-rkllm": _INCOMPLETE,
    # ... and left incomplete with no reason at all (codex-router-proxy, rosetta-llm)
    "hb717-codex-router-anthropic-stream-window-stop-incomplete": "incomplete, no reason",
    "hb717-codex-router-anthropic-window-stop-incomplete-json": "incomplete, no reason",
    "hb717-rosetta-llm-stream-incomplete-no-output-rkllm": "incomplete, no reason",
    "hb717-rosetta-llm-anthropic-stream-window-stop-incomplete": "incomplete, no reason",
    # a bridge over Claude Code: its "API Error: 400 {...}" split over two chunks, its finish
    # in a third
    "hb719-cli2api-api400-stream": "a frame without its finish reason",
    # coderouter's 502 joining every provider's error: a TPM 429 beside the overflow
    "hb721-coderouter-oai-502-tpm-then-ctx": "an aggregate beside a rate limit",
    "hb721-coderouter-oai-sse-tpm-then-ctx": "an aggregate beside a rate limit",
    # the Gemini CLI's stderr around Vertex's refusal, whose advice names billing
    "hb726-gcliproxy-vertex-input-token-count": "a CLI's stderr, the advice naming billing",
    "hb726-gcliproxy-vertex-input-token-count-stream": (
        "a CLI's stderr, the advice naming billing"
    ),
    # iflow2api's own guess as a stream's reply: "the upstream returned nothing, the
    # context probably exceeded"
    "hb729-iflow2api-stream-empty-fallback": "a reply in a model's words",
    # clodxy maps an empty "length" stop to a Messages max_tokens stop counting 0 output
    "hb731-clodxy-length-no-text-max-tokens": "a stop, 0 output counted",
    # dasllama: the system prompt, tools and latest turn alone over the context
    "hb732-dasllama-auto-truncation-latest-turn-too-big": (
        "the newest turn over a budget, output named"
    ),
    # empty "length" streams an Ollama proxy or an AI SDK proxy passes on
    "hb736-toolrails-tools-length-empty-sse": "a stream finished length, no usage",
    "hb736-ollaguard-length-empty-sse": "a stream finished length, no usage",
    "hb737-aisdktool-stream-length-empty": "a stream finished length, no usage",
    # knurlogic's memory guard (503 insufficient_memory): the prompt's cache in GiB
    "hb741-knurlogic-memory-guard-refusal": "a memory guard in GiB, a 503",
    # vandamme-proxy's Anthropic passthrough frames every line again as data
    # ("data: event: message_start", "data: data: {...}"): one event, no SDK reads it
    "hb742-vdma-an-stream-ctxstop-stream": "a stream framed twice",
    "hb745-vdm2-msg-context-window-stop-double-data": "a stream framed twice",
    # alcf-proxy and deepseek2responses leave an uncapped response incomplete for
    # max_output_tokens with nothing shown but 8 output tokens counted
    "hb747-alcf-incomplete-window-nonstream": _INCOMPLETE,
    "hb747-alcf-incomplete-window-stream": _INCOMPLETE,
    "hb747-d2r-incomplete-window-nonstream": _INCOMPLETE,
    "hb747-d2r-incomplete-window-stream": _INCOMPLETE,
    # pythinker-ai's answer "Error: {'message': ...}" in nanobot's shape, whose look-alikes
    # (hb605: the server keeps the session) are labelled the other way
    "hb752-pt-ds-ctx-200-answer": "a reply that is the error, nanobot's shape",
    "hb752-pt-kimi-ctx-200-answer": "a reply that is the error, nanobot's shape",
    # Proxy_api answers 202 with a summarization job of its own
    "hb753-proxyapi-202-context-condense": "a 202 job the proxy started",
    # localab-circuit-breaker writes the upstream's error raw, then its own budget event
    "hb755-acb-stream-overflow-then-budget": "a raw error then a budget event",
    # coder2api returns the Claude Code CLI's output as the reply, its usage counting the
    # text ("Prompt is too long"; "API Error: 400 {...}" with output tokens counted)
    "hb756-c2a-cc-ptl": "a reply in a model's words",
    "hb756-c2a-cc-ctxlimit": "a reply that is the error, output counted",
    # opencode-cursor-auth: Cursor's "Your conversation is too long" as a 401, or the reply
    "hb757-cursorauth-401-conversation-too-long": "a 401",
    "hb757-cursorauth-stream-conversation-too-long": "a reply in a model's words",
    # mlx-vlm's compaction: "needs more context headroom" names no excess
    "hb764-mlxvlm-compact-summary-headroom": "no excess named (headroom)",
    # the Vercel AI SDK's and TanStack AI's streams to a browser (their own protocols)
    "hb770-aisdk-ctx": _NOT_TRIMMED + " (a UI stream protocol)",
    "hb770-aisdk-resp-ctx": _NOT_TRIMMED + " (a UI stream protocol)",
    "hb770-aisdk-claude-ctx": _NOT_TRIMMED + " (a UI stream protocol)",
    "hb770-tanstack-ctx": _NOT_TRIMMED + " (AG-UI's RUN_ERROR)",
    "hb770-tanstack-resp-ctx": _NOT_TRIMMED + " (AG-UI's RUN_ERROR)",
    # Messages stops at max_tokens before any output whose usage counts no prompt
    "hb776-ur-llamacpp-msgs-lenstop-stream": "a stop, 0 output counted",
    # CopilotKit's runtime speaks AG-UI to the browser
    "hb778-copilotkit-openai-ctx": _NOT_TRIMMED + " (AG-UI's RUN_ERROR)",
    "hb778-copilotkit-gemini-input-token-count": _NOT_TRIMMED + " (AG-UI's RUN_ERROR)",
    "hb778-copilotkit-anthropic-prompt-too-long": _NOT_TRIMMED + " (AG-UI's RUN_ERROR)",
    # cliffcompaction's own context budget, worded as a budget
    "hb782-cliff-strict-over-budget": "a proxy's own budget",
    # agentrelay-cli and agnos-proxy write the refusal as the reply's text
    "hb784-agentrelay-resp-stream-prompt-too-long": "a reply in a model's words",
    "hb787-agnos-anth-stream-ovf-as-content": "a reply in a model's words",
    # Baidu Qianfan's 336007: "the max input characters is 20000"
    "hb789-qianfan-v1-336007-max-input-characters": _CHARACTERS,
    # flexrouter's bucket: 503 provider_unavailable, the overflow only in an attempt's log
    "hb790-flexrouter-bucket-oai-ctx": "a 503",
    "hb790-flexrouter-bucket-vllm-ctx": "a 503",
    # zeta-mlx's "GenerationError(reason='Token limit exceeded: T > L')": a sum of the
    # prompt and max_tokens that its twin, max_tokens filling the window, states alike; the
    # engine's class names generation, which reads as an output's limit
    "hb796-zeta-ovf-default-maxtok": "a sum with max_tokens, as its look-alike twin",
    "hb796-zeta-ovf-long": "a sum with max_tokens, as its look-alike twin",
    # foveance relays gpt-oss's reasoning events, then the window's incomplete stop: the
    # reasoning has gone to the client before the stop arrives
    "hb802-foveance-stream-incomplete-window": "a window stop after reasoning streamed",
    # tokenpak's spend guard: a 402 whose message is its cost block's, the window only in
    # its reason code ("projected_exceeds_context_window_hard_stop")
    "hb812-tokenpak-guard-window-hardstop-gpt4": "a spend guard's 402",
    "hb812-tokenpak-guard-window-hardstop-gpt4-b": "a spend guard's 402",
    "hb812-tokenpak-guard-window-hardstop-claude-stream": "a spend guard's 402",
    # llmbuffet's "all providers exhausted (...)": one provider's overflow beside another's
    # tokens-per-minute limit, whose words veto (labelled unsure)
    "hb815-llmbuffet-overflow-then-tpm": "an overflow beside a rate limit",
    "hb815-llmbuffet-tpm-then-overflow": "an overflow beside a rate limit",
    "hb815-llmbuffet-cooldown-reorder": "an overflow beside a rate limit",
    # lm-proxy drops the usage of Ollama's window stop (read by the relay, the request
    # uncapped)
    "hb817-lmproxy-ollama-window-stop-empty": "an empty answer, no usage",
    # llm-rosetta's Responses stream over a window stop: response.completed, its status
    # incomplete, 0 output counted (read by the relay, the request uncapped)
    "hb824-llmrosetta-responses-window-stop-stream": _INCOMPLETE,
    # ai2-sera-cli answers every error as a Messages reply ("[sera-cli] Context exhausted:
    # ...", "[sera-cli] {...}"), its output counted
    "hb825-sera-context-exhausted-over": "a reply that is the error, output counted",
    "hb825-sera-context-exhausted-near-window": "a reply that is the error, output counted",
    "hb825-sera-raw-vllm-requested-tokens": "a reply that is the error, output counted",
    # gemini-antiblock proxies retry a cut stream and write the retry's overflow after the
    # text the client already has
    "hb828-antiblockgo-stream-retry-overflow": "an overflow after output streamed",
    "hb828-spectre-antiblock-retry-overflow": "an overflow after output streamed",
    # LiteLLM forks' Responses streams over a window stop: response.incomplete, 0 output
    # counted (read by the relay, the request uncapped)
    "hb838-hanzo-resp-incomplete-no-output-window": _INCOMPLETE,
    "hb838-sitellm-resp-incomplete-no-output-window": _INCOMPLETE,
    # distributed-llama's dllama-api cuts the prompt at its window and answers nothing, no
    # finish reason, its usage the whole prompt's count
    "hb852-dllama-api-prompt-over-seqlen-empty": "an empty answer, the prompt counted",
    # ClaudeMCP's Gemini route: Claude Code's refusal streamed as a candidate's text, its
    # finish in the next chunk; LM Studio's stop at the window as MAX_TOKENS, the prompt
    # counted, no output
    "hb861-claudemcp-claude-prompt-too-long-sse": "a Gemini stream's text, finished apart",
    "hb861-claudemcp-lmstudio-length-no-output": "a Gemini stop at MAX_TOKENS, no output",
    "hb861-claudemcp-lmstudio-length-no-output-sse": "a Gemini stop at MAX_TOKENS, no output",
    # openrun's "Error: Model generation failed - Requested tokens (P) exceed context window
    # of L" as the reply, finished "stop", its usage counting output; a Claude Code wrapper's
    # "Prompt is too long" beside an estimate's counts
    "hb864-openrun-llamacpp-window-in-200-content": "a reply that is the error, output counted",
    "hb867-skycc-prompt-too-long": "a reply in a model's words",
    # vscode-cp-proxy writes the editor API's error, serialised with its stack, as the one
    # chunk's text (its finish reason outside the choice), and ends the stream there
    "hb886-cpproxy-token-limit-stream": "a JavaScript Error serialised as the reply",
    "hb886-cpproxy-copilot-prompt-cap-stream": "a JavaScript Error serialised as the reply",
    # home-made transformers servers: torch's index errors past the position table or a
    # static cache, which any bug raises too
    "hb887-hfserve-wpe-index-out-of-range": "a tensor library's index error",
    "hb887-hfserve-cuda-device-side-assert": "a tensor library's index error",
    "hb887-calunvier-static-cache-index-copy-32": "a tensor library's index error",
    "hb887-calunvier-static-cache-index-copy-256": "a tensor library's index error",
    # agent runtimes: a2a-bridge's "The agent could not answer (JSON-RPC error -32603:
    # ...)." as the reply; DevUI's error after a trace event; hermes-agent's "Context length
    # exceeded (N tokens). Cannot compress further." as a completed response's text
    "hb890-a2abridge-rpc-overflow-inchat": "an agent's sentence around the error",
    "hb890-a2abridge-rpc-overflow-stream": "an agent's sentence around the error",
    "hb890-a2abridge-rpc-anthropic-prompt-too-long-inchat": "an agent's sentence around the error",
    "hb890-a2abridge-rpc-anthropic-prompt-too-long-stream": "an agent's sentence around the error",
    "hb890-devuiext-responses-stream-midstream-overflow": "an error after a trace event",
    "hb890-hermes-responses-context-exceeded-completed": "a reply in an agent's words",
    "hb890-hermes-responses-stream-context-exceeded": "a reply in an agent's words",
    # Responses bridges' window stops: incomplete for max_output_tokens before any output
    # (read by the relay, the request uncapped), and one whose stream counts nothing
    "hb891-sy-window-stop-stream": _INCOMPLETE,
    "hb891-sy-window-stop": _INCOMPLETE,
    "hb891-zj-window-stop-stream": _INCOMPLETE,
    "hb891-pc-window-stop": _INCOMPLETE,
    "hb891-pc-window-stop-stream": "incomplete, nothing counted",
    # codex-responses-bridge's window stop (the prompt filled an 8192 window, no output
    # limit asked), incomplete for max_output_tokens: read by the relay
    "hb911-crbts-incomplete-window": _INCOMPLETE,
    "hb911-crbts-incomplete-window-stream": _INCOMPLETE,
    # exhub writes an upstream's error as a Messages answer finished end_turn, counting
    # no input and its text's output, as a server that counts so writes every answer
    "hb912-exhub-messages-ctx-as-answer": "a reply finished as a model's, no prompt counted",
    # LiteLLM's fork names OpenAI's 10485760-character string cap a window overflow
    # (labelled with doubt: a character cap)
    "hb913-mishikallm-oa-string-too-long": "a character cap named a window overflow",
    # vLLM 0.5's ignored prompt as one chunk finished "length", the role alone, nothing
    # counted, after a request for 4096 tokens (a thinking model hidden so ends the same)
    "hb915-cerebrium-llama-chat-prompt-ignored": "a stop at length, no output, nothing counted",
    # old vLLM's ignored prompt streamed as one chunk finished "length", nothing counted,
    # the request uncapped (Xinference 0.8.5, GLM-4's demo server): read by the relay
    "hb928-xinference085-vllm-ignored-length-stream": "a stream finished length, no usage",
    "hb941-glm4-demo-stream-ignored-prompt": "a stream finished length, no usage",
    # llm-failover-proxy streams its attempts as the reply's text, line by line
    "hb930-lfp-stream-notice-openai-window": "a failover's attempts written as the reply",
    # modelrelay's stop at a 131072 window, 172 reasoning tokens counted after a
    # 130900-token prompt (a server's default cap after reasoning looks the same)
    "hb948-mrelay-window-stop-reasoning": "a stop at length, reasoning counted",
    # the OPEA agent's own answer, {"id", "text": "Error code: 400 - {...}", "prompt"}: an
    # app's shape, none of the four formats
    "hb954-opea-agent-vllm-overflow": "an app's own answer shape",
}


# Held-out overflows whose stated count no reader takes, by design: a bare "[131842]" after
# coze-discord-proxy's "prompt已超过限制" names nothing (the retry aims at 2/3 of the estimate)
_UNREAD: Final = frozenset(
    {
        # a budget or a reserve beside the prompt ("prompt is 3600 tokens and the budget is
        # 1024, which is over the model's context of 4096"; "requires 131200 prompt tokens
        # plus a 1-token generation reserve, but ... allows 131072 context tokens"): a sum
        "hb674-rkmodel-prompt-plus-budget-over-context",
        "hb674-rkmodel-responses-prompt-plus-budget",
        "hb674-tensorsharp-attached-document-window",
        "hb674-tensorsharp-responses-attached-document-window",
        # forge-gateway's "no candidate model fits estimated context (20440 tokens)": the
        # estimate, and no window beside it
        "hb748-forge-oai-nofit",
        "hb748-forge-an-nofit",
        # llmmllab's bridge counts the prompt in message_start, then stops at max_tokens
        # counting no output: read as a stop, the start's count not as the prompt's size
        "hb640-llmmllab-api-anthropic-stream-empty-max-tokens-after-overflow",
        # hebo-gateway passes Claude's window stop on as max_tokens, its usage counting the
        # prompt: read as a stop, the usage's prompt count not as the prompt's size
        "hb737-hebo-messages-window-stop-stream",
        # LMDeploy's empty answers and INPUT_LENGTH_ERROR choices: the usage's prompt count
        # is not read as the prompt's size
        "hb676-lmdeploy-qwen25vl-base64-image-empty-length",
        "hb679-lmdeploy-0102-input-length-error-choice",
        "hb679-lmdeploy-0102-input-length-error-completions",
        "hb679-lmdeploy-064-run-out-of-tokens-stream-usage",
        "hb679-lmdeploy-glm4-negative-completion",
        "hb679-lmdeploy-0102-run-out-of-tokens-nonstream",
        # one-api relaying Moonshot's "exceeded model token limit: 8192" (no prompt count)
        "hb683-oneapi0510-moonshot-exceeded-model-token-limit",
        # empty "length" answers (Xinference over vLLM, LMDeploy, LlamaEdge): as above
        "hb686-xinference-v080-vllm-empty-length-200",
        "hb686-xinference-v0100-vllm-empty-length-stream-usage",
        "hb686-xinference-v0120-vllm-empty-length-stream-include-usage",
        "hb686-lmdeploy-v010-empty-length-200",
        "hb686-lmdeploy-v040-empty-length-logprobs-200",
        "hb690-llamaedge-0110-prompt-too-long-empty-length-200",
        # llamaR: "P tokens + C requested exceed the context window of W", a sum; and its
        # refusal beside advice that names another count ("N_CTX=131072")
        "hb692-llamar-prompt-plus-max-tokens",
        "hb692-llamar-anthropic-overflow-200-json",
        "hb692-llamar-anthropic-overflow-as-message-stream",
        # sparkpipe's "the prompt has P tokens and this deployment serves W positions, so
        # no output fits" and opencodex's "Estimated input (~P tokens) plus C tokens of
        # requested output headroom cannot fit the context window of M (W tokens)": counts
        # beside an output are never guessed at; nor are a new-api fork's "prompt
        # (estimated at P tokens) plus max_tokens (C)"
        "hb702-sparkpipe-model-api-no-output-fits",
        "hb709-opencodex-input-admission-headroom",
        "hb718-newapi-fork-claude-spec-prompt-over-window",
        "hb718-newapi-fork-claude-spec-prompt-plus-max-tokens",
        # ccgw's streamed window stop: message_start's input count is no stated prompt
        "hb716-ccgw-stream-model-context-window-exceeded-no-output",
        # a Rust server's "messages came to P tokens and decoding reserves K more
        # positions": the reserve is not taken out of the window
        "hb718-rustqwen-messages-over-max-seq-len",
        "hb718-rustqwen-messages-plus-decode-reserve",
        # coderouter's aggregate of a 503 and llama.cpp's overflow, cut at 200 characters,
        # and cmp-gateway's Chinese-prefixed relays of Kimi's and llama.cpp's: read, their
        # counts not
        "hb721-coderouter-oai-502-503-then-llamacpp",
        "hb721-coderouter-oai-sse-503-then-llamacpp",
        "hb724-cmp-gateway-kimi-ctx-plain",
        "hb724-cmp-gateway-kimi-ctx-stream",
        "hb724-cmp-gateway-lcpp-ctx-plain",
        "hb724-cmp-gateway-lcpp-ctx-stream",
        # kimi-code's relays: a stand-in's Zhipu count below its window (read the other way
        # round), a Cohere total the label leaves out; contextpaw's "budget" beside its
        # window (the label's maximum is the budget)
        "hb734-kimi-code-zhipu-ctx",
        "hb734-kimi-code-cohere-ctx",
        "hb736-contextpaw-strict-413",
        "hb736-contextpaw-strict-413-stream-request",
        "hb736-contextpaw-strict-413-num-ctx-option",
        # hf-llm-api's "Prompt exceeded token limit: 2031 > 2048" (a hidden 20-token reserve):
        # a pair that is false as arithmetic states no deficit
        "hb442-hfllmapi-zephyr-reserve-edge",
        # PrivateGPT's "The message length M and system prompt length S exceed the maximum
        # token limit L": two parts and no output reservation, which no reader sums
        "hb427-privategpt-message-and-system-exceed-limit",
        "hb35-coze-discord-proxy-prompt-token-limit",
        # TensorSharp's long advice names the output setting ("maxTokens/reply-length"),
        # and counts beside an output are never guessed at
        "hb111-tensorsharp-attached-document-exceeds-limit",
        "hb111-tensorsharp-attached-document-plus-reserve",
        # PrivateGPT's "message length M and system prompt length S exceed the maximum
        # token limit L": three counts, the prompt in two parts
        "hb113-privategpt-request-too-large-combined",
        # tabbyAPI's "Total cache allocated is 32 * 256 = 8192 tokens": a product, whose
        # factors are neither a prompt nor a window
        "hb144-tabbyapi-oai-stream-job-cannot-be-enqueued",
        # "exceeds the context window of every available model (1210000 tokens)": the
        # request's count, where the words put a window's
        "hb150-py-gateway-openai-every-available-model",
        # "exceeds max tokens per model (8192), estimated tokens: 9120": "max tokens" names
        # an output elsewhere, and counts beside an output are never guessed at
        "hb155-aibrix-embeddings-input-exceeds-max-tokens",
        # FastDeploy's "input_ids_len (P) + min_dec_len (1) >= max_model_len": a sum, and P
        # the count after the server's own cut
        "hb178-fastdeploy-20-completions-input-text-too-long",
        "hb192-paddlenlp-llm-server-input-text-too-long",  # the same sum, from PaddleNLP
        # Cloudflare's "input and maximum output tokens (T) exceeded ... limit (L)": a total
        # that holds the output reservation, never split into a prompt and a window
        "hb179-cloudflare-workers-ai-5021-context-window-request-id",
        "hb179-openrouter-relays-cloudflare-5021",
        # Lemonade 8.1's 500 prints llama.cpp's body as a Python dict ('n_prompt_tokens':
        # 6012, 'n_ctx': 4096): fields of a printed dict are not read as a body's fields
        "hb186-lemonade-v8112-python-chat-completion-error",
        # AIBrix's embeddings checks: "exceeds max tokens per model (L), actual tokens: P",
        # as AIBrix's earlier wording above
        "hb193-aibrix-embeddings-token-array-exceeds",
        "hb193-aibrix-embeddings-input-index-exceeds",
        # Workers AI's 5021 total holds the output reservation, as Cloudflare's above
        "hb200-openai-cf-workers-ai-binding-5021-context-window",
        "hb200-cf-worker-ai-openai-api-binding-5021-500",
        # mesh-llm's "requested prompt plus completion tokens (T) exceed context window
        # (L)": a total that holds the output reservation, as Cloudflare's above
        "hb273-mesh-llm-skippy-prompt-plus-completion-exceed-context-window",
        # furiosa-llm's prompt equal to the window ("leaving no room to generate"): both
        # counts are read, the retry takes the output limit out of the window
        "hb201-furiosa-llm-no-room-to-generate",
        # Perplexity's "User input tokens exceeds 200000 tokens.": a lone count after an
        # excess word, not after a limit's, is not read as the window
        "hb213-perplexity-sonar-user-input-tokens-exceeds-200000",
        # Overfit's "Prefill of P tokens would exceed ContextLength L (current position X)":
        # the window it names is not what P exceeds (its session cache is), so none is read
        "hb379-overfit-prefill-exceeds-context",
        # Cloudflare's 5021 total relayed by free-llm-hub, as Cloudflare's above
        "hb398-free-llm-hub-relay-cloudflare-context-window",
        # ... and by an Anthropic-format worker proxy
        "hb406-sinescode-anthropic-worker-proxy-workers-ai-5021-413",
        "hb475-cloudflare-5021-estimated-input-and-output-exceeded",  # Cloudflare's again
        # an unmerged vLLM pull request's "P input tokens plus C 'max_tokens'": read with
        # the window whole (the retry takes the request's max_tokens out of it)
        "hb476-vllm-pr33425-input-plus-max-tokens",
        # vLLM's "The engine prompt length 32768 exceeds the max_model_len 32768": two equal
        # counts state no excess to size a retry by
        "hb478-vllm-ws-responses-engine-prompt-length",
        # TabbyAPI's exllamav3 pages count the output reservation too, which it does not state
        "hb499-tabbyapi-exl3-job-pages-cannot-be-enqueued",
        "hb499-tabbyapi-exl3-job-pages-stream",
        # a Kiro gateway's counts under bare "actual" and "limit" fields
        "hb515-kiro-gateway-go-xnet-preflight-context",
        # coze-discord-proxy's bare "[N]", as above
        "hb526-cozediscord-prompt-over-limit",
        # 1bit's vision server names the window as "(max_seq_len=1024)" after it
        "hb535-1bit-vision-server-kv-overflow",
        # Cloudflare's 5021 total relayed by Portkey, as Cloudflare's above
        "hb547-portkey-workers-ai-5021-context-window",
        # a proxy's own estimate ("estimated input tokens N"), inferred from repeated 502s,
        # beside no window
        "hb550-ocp-chat-inferred-after-identical-502s",
        # Inception's "maximum context length for this model of 128000": the model between
        # the window's name and its count
        "hb558-inception-mercury-context-length",
        # PaddleNLP's "input_ids_len (P) + min_dec_len (1) >= max_seq_len", as hb192's
        "hb565-paddlenlp-openai-input-text-too-long",
        "hb565-paddlenlp-native-input-text-too-long-200",
        "hb565-paddlenlp-native-stream-input-text-too-long",
        # ExLlamaV3's "Job requires 130 pages (only 128 available) ... 128 * 256 = 32768
        # tokens": a product, from which no count is taken
        "hb577-tabbyapi-exl3-job-cannot-be-enqueued",
        # yals's "Prompt + generated tokens exceeds max context length of L": a total that
        # names the output, whose window is never read alone
        "hb586-yals-ctx-exceeded-nonstream",
        # Zhipu's "Request 66248 input tokens exceeds the model's maximum context length
        # 131072": a count said to exceed a larger one; the larger is taken as the prompt
        "hb605-qwenpaw-dingtalk-zhipu-1210-input-tokens",
        "hb609-privategpt-messages-413-combined-limit",  # PrivateGPT's three, as hb113's
        # Codex-Manager's "Input exceeds the maximum length of 1048576 characters": a
        # count of characters is never read as tokens
        "hb618-codex-manager-input-too-large-1048576-chars",
        # Kimi's "Your request exceeded model token limit: 131072": a lone count after
        # "limit", relayed in a gateway's text, is not read as the window
        "hb619-llmgw-kimi-upstream-token-limit-wrapped",
        # llm-interactive-proxy's details: "limit" and "measured" are read as no counts;
        # input_tokens beside context_window is read with the window whole (the retry
        # takes the request's max_tokens, or the model's own output, out of it)
        "hb624-lip-gemini-frontend-input-limit",
        "hb624-lip-anthropic-frontend-input-limit",
        "hb624-lip-gemini-frontend-input-plus-max-tokens",
        "hb624-lip-openai-frontend-input-plus-max-tokens",
        "hb624-lip-anthropic-frontend-model-capacity",
        # tabbyAPI's "Job requires N pages (only M available) and cannot be enqueued": pages,
        # not tokens, read as no counts
        "hb625-tabbyapi-stream-job-not-enqueued",
        # Workers AI's "estimated number of input and maximum output tokens (N) exceeded
        # this model context window limit (M)": a sum with the output limit, read as no
        # counts (the window beside it is the whole one, read neither)
        "hb631-workers-ai-binding-error-json-42481",
        "hb631-workers-ai-gemma4-500064-over-256000",
        "hb631-workers-ai-24092-over-24000-with-id",
        "hb631-workers-ai-172924-over-65536",
        "hb631-workers-ai-image-745945-over-65536",
        # NEBULA's "max_tokens (C) plus the prompt (at least P tokens) exceeds the context
        # window (L)": read by its code, no counts
        "hb635-nebula-max-tokens-plus-prompt-exceeds-window",
        # antigravity2api's Chinese pre-check names the window only, read as no counts
        "hb639-a2a-gemini-route-precheck",
        "hb639-a2a-gemini-route-external-channel-overflow",
        "hb639-a2a-gemini-route-stream-precheck-sse",
        # Moonshot's and Kimi Code's "exceeded model token limit: L" relayed by veloera:
        # a lone count after "limit", not read as the window (as hb619's)
        "hb641-veloera-claude-relays-kimi-code-token-limit",
        "hb641-veloera-relays-moonshot-8k-token-limit",
        # Cohere's "size limit exceeded by E tokens ... The limit for this model is L": read
        # as a prompt of E + L, the label states the limit alone (the same deficit)
        "hb648-cohere-713295-288000",
        # a total with the output reservation in it, against the whole window: the same
        # deficit as the prompt against the window less the reservation
        "hb649-summarizing-proxy-reject",
        "hb653-tabbyapi-initial-allocation",
        # AFM's fallback "has 0 tokens" when its parser found no count: read as 0 (the retry
        # takes no deficit from it); its stream's window stated as advice, unread
        "hb656-afm-foundation-context-window-unparsed-count",
        "hb656-afm-stream-context-window-generic-4096",
        # an empty stop whose usage counts the prompt: a usage's count is not the overflow's
        "hb656-llamaedge-prompt-too-long-empty-length-nonstream",
        "hb656-llamaedge-stream-prompt-too-long-usage-done",
        "hb656-llamaedge-tool-stream-prompt-too-long-empty",
        # "Prompt length (32768 tokens) exceeds context window (32768 tokens)": equal counts
        "hb660-truellm-openai-prompt-length-equals-context-window",
        # reachd's "prompt exceeds 32000 tokens (approx)": a lone count after "exceeds"
        "hb660-reachd-prompt-exceeds-approx-tokens",
        # Workers AI's "input and maximum output tokens (N) exceeded ... limit (L)": a sum
        # with the output, never guessed at
        "hb661-cloudflare-3010-aierror-35000-over-24000",
        "hb661-workers-ai-rest-5021-900047-over-32000",
        "hb661-workers-ai-rest-5021-155740-over-128000",
        "hb661-workers-ai-binding-5021-49534-over-32000",
        # "... the prompt is too long: N tokens (prompt + generation budget)": a total with
        # the output in it, never guessed at
        "hb668-freetoken-fork-preflight-max-context-and-prompt-too-long",
        # Moonshot's "exceeded model token limit: L (requested: R)" through tingly-box: R
        # holds max_tokens too, read as the prompt (the same deficit against L)
        "hb672-tingly-chat-moonshot-token-limit",
        # llm-rosetta's window stops over GLM: the usage counts the prompt, no window
        # beside it, read with no counts (the retry takes 2/3)
        "hb824-llmrosetta-responses-window-stop-nonstream",
        "hb824-llmrosetta-messages-window-stop-stream",
        "hb824-llmrosetta-messages-window-stop-nonstream",
        # ... and the LiteLLM forks' window stops as Messages answers (their usage the
        # prompt's count alone)
        "hb838-hanzo-msg-model-context-window-exceeded-stop",
        "hb838-hanzo-msg-vllm-length-no-output",
        "hb838-hanzo-msg-responses-incomplete-no-output",
        "hb838-sitellm-msg-vllm-length-no-output",
        "hb838-sitellm-msg-responses-incomplete-no-output",
        "hb838-unclecode-litellm-msg-vllm-length-no-output",
        # hipEngine's own slot for the next token: the batch took it out of the window, the
        # reader leaves it (L - C against L - C - 1)
        "hb873-hipengine-400-preallocated-max-context-tokens",
        "hb873-hipengine-400-prompt-plus-max-tokens",
        "hb873-hipengine-sse-context-overflow-chunk",
        # a window stop relayed raw, its usage the prompt's count alone
        "hb876-universalproxy-anthropic-window-stop",
        # hermes-agent's "Context length exceeded (16,398 tokens)": its own estimate, no
        # window beside it
        "hb890-hermes-chat-context-exceeded-cannot-compress",
        "hb890-hermes-chat-stream-context-exceeded",
        # window stops whose usage counts the prompt (an old vLLM's ignored prompt, a tiny
        # server's full window), no window beside it
        "hb928-openllm-vllm027-ignored-length",
        "hb928-openllm-vllm027-ignored-length-stream",
        "hb928-xinference085-vllm-ignored-length",
        "hb935-tinyoai-window-stop-empty",
        "hb935-tinyoai-window-stop-stream",
    }
)


# A body-size limit, whatever its status ("request too large", "Request body exceeds the
# 64 MiB limit")
_BODY_LIMIT_RE = re.compile(
    r"\b(?:request|body|payload|entity)\b.{0,24}?\b(?:too large|exceeds?)\b", re.IGNORECASE
)


# --------------------------------------------------------------------------- unfixable

_RESERVATION = (
    "This model's maximum context length is 4097 tokens. However, you requested 14097 tokens "
    "(4097 in the messages, 10000 in the completion). Please reduce the length of the "
    "messages or completion."
)


def test_an_output_reservation_filling_the_window_is_unfixable_not_an_overflow() -> None:
    body = _error_body(_RESERVATION)
    assert detect_overflow(400, body, wire_format="openai") is None
    assert overflow.detect_unfixable(400, body)
    event = b"data: " + body + b"\n\n"
    assert overflow.detect_unfixable(200, event)
    fixable = _error_body(_RESERVATION.replace("10000 in the completion", "10 in the completion"))
    assert not overflow.detect_unfixable(400, fixable)
    assert not overflow.detect_unfixable(429, body)  # a rate-limit status never is
    assert not overflow.detect_unfixable(200, b'{"choices": []}')
    assert not overflow.detect_unfixable(400, b"{" * 5000)  # malformed: never guessed

    # llm_gateway's count fields: the output asked for fills the window, or leaves room
    def gateway(window: int) -> bytes:
        details = {"estimated_input_tokens": 12, "requested_output_tokens": 32768}
        error = {"code": "context_length_exceeded", "message": "Request exceeds model"}
        return orjson.dumps(
            {"detail": {"error": {**error, "details": {**details, "context_window": window}}}}
        )

    assert detect_overflow(400, gateway(32768), wire_format="openai") is None
    assert overflow.detect_unfixable(400, gateway(32768))
    assert not overflow.detect_unfixable(400, gateway(40000))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (  # Modular MAX, two tokenizers' wordings (the window counts the prompt alone)
            "Prompt length of 9000 is greater or equal to configured max model context length "
            "of 8192.",
            Overflow(9000, 8192),
        ),
        (
            "Prompt length of 9000 is greater than the configured max model context length of 8192",
            Overflow(9000, 8192),
        ),
        (  # vLLM's character pre-check: no token count, the window less the reservation
            "You passed 90001 input characters and requested 0 output tokens. However, the "
            "model's context length is only 8192 tokens, resulting in a maximum input length of "
            "8192 tokens (at most 90000 characters).",
            Overflow(None, 8192),
        ),
    ],
)
def test_counts_of_inference_server_wordings(message: str, expected: Overflow) -> None:
    assert detect_overflow(400, _error_body(message), wire_format="openai") == expected


def test_a_403_is_an_overflow_only_when_it_says_the_window_is_exceeded() -> None:
    # Zed's cloud answers an overflow with 403; otherwise 403 is a refused credential
    zed = b"Context window exceeded: 120002 tokens exceeds the limit of 120000 tokens"
    assert detect_overflow(403, zed, wire_format="openai") == Overflow(120002, 120000)
    words_only = b'{"error":{"message":"Context window exceeded for this model"}}'
    assert detect_overflow(403, words_only, wire_format="openai") == Overflow(None, None)
    coded_403 = b'{"error":{"message":"Request failed","code":"prompt_tokens_exceeded"}}'
    assert detect_overflow(403, coded_403, wire_format="openai") == Overflow(None, None)
    for refused in (
        b'{"error":{"message":"This key may not use a context window over 32k"}}',
        b'{"error":{"message":"Prompt is too long for a free account"}}',
        b'{"error":{"message":"Forbidden: token has expired"}}',
    ):
        assert detect_overflow(403, refused, wire_format="openai") is None, refused
    quota = orjson.dumps(
        {"error": {"message": zed.decode() + " Your quota for this key is exhausted."}}
    )
    assert detect_overflow(403, quota, wire_format="openai") is None
    coded = orjson.dumps({"error": {"message": zed.decode(), "code": 403}})
    assert detect_overflow(400, coded, wire_format="openai") is None  # a 403 in the body


def test_a_token_allowance_that_resets_is_no_window() -> None:
    # mod_intebchat's per-user allowance states its counts as a window would, then says when
    # it refills: a budget, whatever the status
    said = (
        "You have reached your token limit (50213/50000 tokens). Your limit will reset at"
        " Monday, 8 December 2025, 12:00 AM."
    )
    body = orjson.dumps({"error": {"type": "token_limit_exceeded", "message": said}})
    for status in (200, 400):
        assert detect_overflow(status, body, wire_format="openai") is None
    window = said.split(" Your limit")[0]  # (without the refill: a limit stated as a window)
    body = orjson.dumps({"error": {"type": "token_limit_exceeded", "message": window}})
    assert detect_overflow(400, body, wire_format="openai") is not None
    # an overflow's note on presets or on a conversation that resets is no refill
    stated = "This model's maximum context length is 8192 tokens. However, your messages"
    for note in (
        " resulted in 9000 tokens. You can change the context length presets in Settings.",
        " resulted in 9000 tokens. The conversation will reset when you start a new chat.",
    ):
        body = orjson.dumps({"error": {"message": stated + note}})
        assert detect_overflow(400, body, wire_format="openai") == Overflow(9000, 8192), note


def test_a_429_is_an_overflow_only_in_a_listed_wording_with_both_counts() -> None:
    # CodeGate answers llama-cpp-python's refusal with 429; otherwise 429 is a rate limit
    said = "Requested tokens (33410) exceed context window of 32768"
    codegate = orjson.dumps({"detail": said})
    assert detect_overflow(429, codegate, wire_format="openai") == Overflow(33410, 32768)
    assert detect_overflow(400, codegate, wire_format="openai") == Overflow(33410, 32768)
    for limited in (
        # words alone, a code alone, a per-minute or quota word beside the counts, a sum
        # (a limiter's "used + requested > limit"), a word of waiting or load, a rate code
        {"error": {"message": "Context window exceeded for this model"}},
        {"error": {"message": "Token budget exceeded: tokens 98000 + 3000 > 100000"}},
        {"error": {"message": said + ". Server busy, retry in 5 seconds."}},
        {"error": {"message": said, "code": "tpm_limit_exceeded"}},
        {"error": {"message": said + ". Rate&nbsp;limit reached."}},
        {"error": {"message": said + ". Rate\xa0limit reached."}},
        {"error": {"message": said, "details": "Retry after 30 seconds."}},
        {"error": {"message": "Request failed", "code": "context_length_exceeded"}},
        {"error": {"message": said + ". Rate limit reached, try again in 20s."}},
        {"error": {"message": said + ". Your quota for this key is exhausted."}},
        {
            "error": {
                "message": "Request too large for gpt-4o on tokens per min (TPM): Limit 30000,"
                " Requested 33410.",
                "code": "rate_limit_exceeded",
            }
        },
    ):
        body = orjson.dumps(limited)
        assert detect_overflow(429, body, wire_format="openai") is None, limited


# --- suspects: errors worth one probe ---------------------------------------------------


def _error(message: str, **extra: str) -> bytes:
    return orjson.dumps({"error": {"message": message, **extra}})


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, b'{"status": {"code": "40003", "message": "Text too long"}, "result": null}'),
        (400, _error("Sequence holds 9000 units, which is over the limit of 8000 units")),
        (413, _error("Request exceeds the maximum size")),  # bytes: a trim may well fix it
        (413, b'{"status": 413, "message": "Payload too large"}'),  # GigaChat
        (
            500,
            '{"type":"api_error","message":"internal error: 输入内容超长"}'.encode(),
        ),
        (422, _error("conversation history is too long for this deployment")),
    ],
    ids=["clova-text", "units", "request-size", "payload-413", "zh-500", "history"],
)
def test_an_error_whose_words_point_at_the_prompts_size_is_a_suspect(
    status: int, body: bytes
) -> None:
    assert detect_suspect(status, body) is not None


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (429, _error("Text too long")),  # a status no overflow has
        (502, _error("Text too long")),  # a gateway's: a resend may pass anyway
        (400, _error("Text too long", code="insufficient_quota")),
        (400, _error("Rate limit exceeded: too many tokens per minute, request too long")),
        (400, _error("max_tokens is too long for this model")),  # an output
        (400, _error("Image too large: the image exceeds 5 MB")),  # media, bytes
        (400, _error("messages[0].content: string too long")),  # a field's own limit
        (400, _error("Payload too large")),  # bytes, and not a 413
        (400, _error("context deadline exceeded")),  # time
        (400, _error("Unknown parameter: temperature2")),  # no size word at all
        (400, b"<html><body>Text too long</body></html>"),
        (200, _error("Text too long")),
        (400, b'data: {"error": {"message": "Text too long"}}\n\n'),
    ],
    ids=[
        "429", "502", "quota", "rate", "output", "image", "field", "payload-400", "time",
        "unrelated",
        "html", "200", "stream",
    ],
)  # fmt: skip
def test_no_suspect_where_a_trim_cannot_be_the_answer(status: int, body: bytes) -> None:
    assert detect_suspect(status, body) is None


def test_a_suspects_wording_blanks_ids_and_numbers() -> None:
    one = detect_suspect(400, _error("req a81b2c3d4e9f: prompt of 12,000 units too long (8000)"))
    two = detect_suspect(400, _error("req 77e1c0ffee42: prompt of 9100 units too long (8000)"))
    assert one is not None and two is not None
    assert one.wording == two.wording == "400 req #: prompt of N units too long (N)"
    assert (one.numbers, two.numbers) == ((12000, 8000), (9100, 8000))


def _units(real: int, limit: int, request: str = "r1") -> Suspect:
    found = detect_suspect(400, _error(f"{request}: input of {real} units is more than {limit}"))
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("first", "again", "shrink", "expected"),
    [
        # the count moved with the trim, the limit stayed: both read
        (_units(12000, 8000), _units(8100, 8000), 0.67, Overflow(8100, 8000)),
        # still moved with the trim, but now under the limit it states: the limit is not
        # the window (a reservation is in it), only the prompt is read
        (_units(12000, 9000), _units(8000, 9000), 0.67, Overflow(8000, None)),
        # the same answer again: nothing moved
        (_units(12000, 8000), _units(12000, 8000), 0.67, None),
        # moved, but far from the trim's own ratio: not the prompt's count
        (_units(12000, 8000), _units(11900, 8000), 0.67, None),
        # another wording
        (_units(12000, 8000), detect_suspect(400, _error("Text too long")), 0.67, None),
    ],
    ids=["counts", "prompt-only", "same", "unrelated-move", "other-wording"],
)
def test_a_probe_confirms_an_overflow_when_the_prompts_count_moves_with_the_trim(
    first: Suspect, again: Suspect | None, shrink: float, expected: Overflow | None
) -> None:
    assert again is not None
    assert confirm_suspect(first, again, shrink) == expected


def test_the_generic_readers_leave_a_sum_whose_output_fills_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Anthropic's wording as LmDotnetTools mocks it, read with the listed wordings off
    if trimgate.compiled():
        pytest.skip("compiled: the tables are constants the readers inline")
    monkeypatch.setattr(overflow_read, "_PATTERNS", ())

    def read(sum_: str) -> Overflow | None:
        message = (
            f"input length and `max_tokens` exceed context limit: {sum_}, decrease input"
            " length or `max_tokens` and try again"
        )
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        return detect_overflow(400, orjson.dumps(body), wire_format="anthropic")

    assert read("1200 + 200000 > 200000") is None
    assert read("1,200 + 250,000 > 200,000") is None
    assert read("190000 + 20000 > 200000") is not None


def test_the_generic_readers_alone_read_no_look_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the listed wordings switched off, as for a server nobody has listed, the
    generic readers (vocabulary, counts, itemised sums, codes) read no look-alike of the
    corpus and held-out sets as an overflow, and still read most of their overflows."""
    if trimgate.compiled():
        pytest.skip("compiled: the tables are constants the readers inline")
    monkeypatch.setattr(overflow_read, "_PATTERNS", ())
    heldout = load_entries(HELDOUT_PATH)
    read: dict[bool, list[str]] = {True: [], False: []}
    for entry in [*CORPUS, *heldout]:
        body = entry["body"].encode()
        if entry["stream"]:
            got = detect_stream_overflow(body, wire_format=entry["format"])
            got = got or detect_bare_stream_overflow(body, wire_format=entry["format"])
        else:
            got = detect_overflow(entry["status"], body, wire_format=entry["format"])
        if got is not None:
            read[entry["overflow"]].append(entry["id"])
    assert read[False] == []
    overflows = sum(1 for entry in [*CORPUS, *heldout] if entry["overflow"])
    # 1,099 of 1,168 when this was written; 3,077 of 3,336 after batch 413, 3,568 of 3,894
    # (91.6%) after batch 498, 3,822 of 4,172 (91.6%) after batch 540 and 4,167 of 4,530
    # (92.0%) after batch 569, 4,496 of 4,881 (92.1%) after batch 602 and 4,696 of 5,099
    # (92.1%) after batch 624 (4,704, 92.3%, once 503s were read), 4,819 of 5,224 (92.2%)
    # after batch 632, 4,904 of 5,319 (92.2%) after batch 640, 4,956 of 5,381 (92.1%)
    # after batch 647, 5,234 of 5,687 (92.0%) after batch 673, 5,379 of 5,843 (92.1%)
    # after batch 685, 5,445 of 5,922 (91.9%) after batch 691, 5,479 of 5,962 (91.9%)
    # after batch 694, 6,038 of 6,574 (91.8%) after batch 739, 6,184 of 6,730 (91.9%)
    # after batch 755, 6,451 of 7,026 (91.8%) after batch 794, 6,575 of 7,154 (91.9%)
    # after batch 809, 6,645 of 7,231 (91.9%) after batch 820, 6,724 of 7,316 (91.9%)
    # after batch 832, 6,792 of 7,388 (91.9%) after batch 842, 6,822 of 7,418 (92.0%)
    # after batch 846, 7,184 of 7,814 (91.9%) after batch 903, 7,517 of 8,166 (92.1%)
    # after batch 943, 7,653 of 8,307 (92.1%) after batch 958 and 7,659 of 8,317 (92.1%)
    # after batch 961, whose collectors went
    # after servers' own wordings and packages' own envelopes (release by release, server
    # by server), which only a listing reads: the floor guards the generic readers against
    # narrowing, not the data's mix against
    # drifting
    assert len(read[True]) >= 0.91 * overflows
