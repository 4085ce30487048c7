"""The wordings of "context window exceeded" answers, and of the errors that are not.

Data for overflow.py (which says how they are used): the cheap substring gates, the
codes and statuses that rule an overflow in or out, the per-provider message patterns
with their named groups, the generic rule's vocabulary, the never-an-overflow words,
and where error bodies and SSE events put what is read. Every regex is compiled here,
once, at import.
"""

from __future__ import annotations

import re
from typing import Final

# --------------------------------------------------------------------------- cheap gates

# An overflow body contains at least one of these (lower-cased) fragments.
_HINTS: Final = (
    b"context",
    b"token",
    b"too long",
    b"too_long",  # codes: characters_too_long, prompt_too_long
    b"toolong",  # codes: InputTooLong
    b"toolarge",
    b"too large",
    b"exceed",
    b"maximum",
    b"length",
    b"not fit",  # does not fit, cannot fit
    b"n't fit",
    b"surpass",
    b"above",  # "above the model's limit"
    b"max_tokens",
    b"too big",
    b"greater than",
    b"longer than",
    b"cannot truncate",
    b"n_ctx",
    b"seq_len",  # "P > max_seq_len(L)" (rtp-llm)
    b"model_len",  # max_model_len
    b"text bytes",  # Bedrock's "too many total text bytes"
    b"characters limit",  # Qianfan v2: "input characters limit is N"
    # Chinese wordings: "超" (exceed, as in 超过/超出/超长/超限), "过长"/"太长" (too long),
    # raw UTF-8 or as the JSON escapes an ASCII-only encoder writes.
    "超".encode(),
    "контекст".encode(),  # Russian: context
    # other languages' words for the context (Spanish, Portuguese and French ones hold
    # "context"): German, Italian, Polish, Japanese, Korean, Vietnamese
    b"kontext",
    b"contesto",
    b"kontekst",
    "コンテキスト".encode(),
    "컨텍스트".encode(),
    "ngữ cảnh".encode(),
    # Russian, Japanese and Korean ones as an ASCII-only JSON encoder escapes them
    b"\\u043a\\u043e\\u043d\\u0442\\u0435\\u043a\\u0441\\u0442",
    b"\\u30b3\\u30f3\\u30c6\\u30ad\\u30b9\\u30c8",
    b"\\ucee8\\ud14d\\uc2a4\\ud2b8",
    "过长".encode(),
    "太长".encode(),
    b"\\u8d85",
    b"\\u8fc7\\u957f",
    b"\\u592a\\u957f",
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
        # OpenAI's cap on one string's characters (a message, a tool's description, an
        # id), however a relay classes it (LobeHub: "ExceededContextWindow")
        "string_above_max_length",
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
        "too_many_prompt_tokens",  # Perplexity: "The total length of all messages is too long."
        "characters_too_long",  # Baidu Qianfan: "the max input characters is N"
        "token_limit_exceeded",  # Glean (RFC 7807 problem details, 413)
    }
)

# The generic rule for codes no table lists (``type``, ``code``, ``reason``... values, and
# RFC 7807 ``type`` URLs), read as substrings of the lower-cased code with ``-``, ``.`` and
# spaces as ``_``: a prompt-side subject and an excess, and no output, rate, quota, byte or
# media word ("tokens_too_long", "model_max_prompt_tokens_exceeded", "ContextLengthExceeded",
# ".../errors/token-limit-exceeded"; never "max_tokens_per_request" or "token_quota_exceeded").
_CODE_SUBJECTS: Final = ("context", "prompt", "input", "token", "length", "character", "window")
_CODE_EXCESSES: Final = (
    "exceed",
    "too_long",
    "toolong",
    "too_large",
    "toolarge",
    "too_big",
    "overflow",
    "limit_reached",
    "limitreached",
    "over_limit",
)
_CODE_EXCLUDES: Final = (
    "output",
    "completion",
    "max_new",
    "max_token",  # an output limit ("max_tokens_exceeded", "MaxTokensExceededError")
    "generat",
    "rate",
    "quota",
    "minute",
    "hour",
    "daily",
    "month",
    "request",
    "body",
    "payload",
    "byte",
    "image",
    "file",
    "string",
    "batch",
    "embed",
    "tool",
    "function",
    "schema",
    "item",
    "field",
    "time",
    "response",
    "usage",
    "budget",
    "balance",
    "credit",
)
_MAX_CODE_LENGTH: Final = 80  # longer "codes" are sentences, read as messages only
_RATE_RE: Final = re.compile(
    r"rate[ _-]?limit|(?:tokens?|requests?) per (?:sec|second|min|minute|hour|day)\b"
    # the same as an exception class names them: "TokensPerMinuteExceededError"
    r"|(?:tokens?|requests?)per(?:second|minute|hour|day)"
    r"|\b(?:tpm|rpm|tpd|rpd|itpm|otpm)\b|quota|too ?many ?requests|throttl"
    r"|resource[ _]exhausted|insufficient[ _](?:quota|balance|credits?)",
    re.IGNORECASE | re.ASCII,  # "超过TPM限制": ASCII boundaries, as ``_p``'s
)

# --------------------------------------------------------------------------- messages

# 4097, 200000, 5,958,968 (never swallows a trailing comma). From a run's first digit only,
# and possessive: a count tried at every digit of a long run, each scanning the rest, costs
# the square of its length.
_N: Final = r"(?<!\d)\d++(?:,\d{3})*+"


def _p(pattern: str) -> re.Pattern[str]:
    """A wording's pattern, case-insensitive. Its word classes and boundaries are ASCII
    (words in other scripts scope Unicode in, ``(?u:...)``): an English word glued to
    Chinese text ("prompt已超过限制", "token数超过") is still a word, as it is not when every
    CJK character is one too."""
    return re.compile(pattern.replace("{N}", _N), re.IGNORECASE | re.ASCII)


# Itemised parts of a "you requested T tokens (...)" message.
_PART_RE: Final = _p(
    r"(?P<n>{N})\s++(?:in|of|for)\s++(?:(?:the|your)\s++)?"
    r"(?P<what>messages|prompt|functions|tools?|(?:text|tool|image|audio|file) input"
    # ("400 in the completion_limit": a vLLM build's)
    r"|(?:completion|output)(?:_limit)?)\b"
)
_PROMPT_PARTS: Final = frozenset({"messages", "prompt", "functions", "tool", "tools"})
_PROMPT_PARTS_2: Final = frozenset(
    {"text input", "tool input", "image input", "audio input", "file input"}
)


# A pattern's named groups: real (prompt tokens), max (window), comp (output reservation),
# total (everything requested), parts (an itemised breadcrumb), over (the excess over max,
# so real = max + over), withres (prompt and output reservation, not itemised: over twice
# max, no trim can help), whole (empty: real is the prompt alone, against a window that
# must hold the request's output limit too, which the provider checks next: a retry takes
# that limit out of max), padded (empty: prompts are padded to 64-token blocks, so a room
# under 64 beside the output fits none). Order: specific first.
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
    # vLLM (2026): "You passed P input tokens and requested C output tokens. However, the
    # model's context length is only L tokens, resulting in a maximum input length of ..."
    _p(
        r"you passed (?P<real>{N}) input tokens and requested (?P<comp>{N}) output tokens\.?"
        r" however,? the model.?s context length is only (?P<max>{N}) tokens"
    ),
    # NVIDIA Dynamo's frontend (1.6; also behind hosts that run it): "This model configuration
    # accepts at most L combined input and output tokens. However, your request has P input
    # tokens and asks for C output tokens (T tokens total)."
    _p(
        r"accepts at most (?P<max>{N}) combined input and output tokens\.? however,? your"
        r" request has (?P<real>{N}) input tokens and asks for (?P<comp>{N}) output tokens"
    ),
    # furiosa-llm (2026): "maximum context length is L tokens, but the request totals T
    # tokens (P input + C completion)", "... but the input is P tokens[, leaving no room to
    # generate | , leaving room for R generated tokens where min_tokens=M are required]"
    _p(
        r"maximum context length is (?P<max>{N}) tokens, but the request totals (?P<total>{N})"
        r" tokens \((?P<real>{N}) input \+ (?P<comp>{N}) completion\)"
    ),
    _p(
        r"maximum context length is (?P<max>{N}) tokens, but the input is (?P<real>{N}) tokens"
        r"(?:, leaving room for {N} generated tokens where min_tokens=(?P<comp>{N}) are"
        r" required)?(?P<whole>)"
    ),
    # Perplexity (type requested_too_many_tokens, also relayed by OpenRouter): "Requested C
    # to generate tokens, following a prompt of length P, which exceeds the max limit of L
    # tokens."
    _p(
        r"requested (?P<comp>{N}) to generate tokens, following a prompt of length (?P<real>{N}),"
        r" which exceeds the max limit of (?P<max>{N}) tokens"
    ),
    # SambaNova: "The maximum context length of M is L. However, answering your request
    # will take T tokens." (T counts the completion it asked for)
    _p(
        r"maximum context length of .{1,160}? is (?P<max>{N})(?: tokens)?\.? however,? answering"
        r" your request will take (?P<real>{N}) tokens"
    ),
    # OpenAI / Azure / vLLM / FastChat / DeepSeek
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? your"
        r" (?:messages|prompt) resulted in (?:over )?(?P<real>{N}) tokens(?P<whole>)"
        # (itemised by some that copy it: FakeAI's "(30720 in the messages, 4096 in the
        # completion)", shepherd's TensorRT backend's "plus 1024 max generation tokens")
        r"(?: \((?P<parts>[^)]*)\)| plus (?P<comp>{N}) max generation tokens)?"
    ),
    # shepherd's llama.cpp backend, which keeps a tenth of the window for the output: "This
    # model's maximum context length is L tokens. Your conversation used P tokens, leaving
    # R for generation (minimum M required)."
    _p(
        r"maximum context length is (?P<max>{N}) tokens\. your conversation used (?P<real>{N})"
        r" tokens, leaving -?{N} for generation \(minimum (?P<comp>{N}) required\)"
    ),
    # vmlx: "tokenized prompt has P tokens; the model has a declared context of W tokens
    # including input and output. At least one output token must remain (maximum input L)."
    _p(
        r"\bprompt has (?P<real>{N}) tokens; the model has a declared context of {N} tokens"
        r" including input and output\. at least one output token must remain \(maximum input"
        r" (?P<max>{N})\)"
    ),
    # rvllm: "prompt has P tokens, max_model_len is L"
    _p(r"\bprompt has (?P<real>{N}) tokens, max_model_len is (?P<max>{N})\b"),
    # Rapid-MLX: "... maximum context length is L tokens. However, you requested T tokens
    # (P prompt + C completion)."
    _p(
        r"maximum context length is (?P<max>{N}) tokens?\. however, you requested {N} tokens"
        r" \((?P<real>{N}) prompt \+ (?P<comp>{N}) completion\)"
    ),
    # OpenAI / Azure / vLLM / DeepSeek / OpenRouter (itemised or not)
    _p(
        r"maximum context length is (?P<max>{N})(?: tokens?)?[.,]? however,? you requested"
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
    # Codex CLI's own, as the bridges that run it relay it: "Codex ran out of room in the
    # model's context window. Start a new thread or clear earlier history before retrying."
    _p(r"\bran out of room in the model'?s context window\b"),
    # gmlx's budget, the sum first and then its parts: "prompt is too long: T tokens > L
    # maximum. The request needs P prompt + C max generation tokens, which exceeds the
    # context window (max_kv_size)."
    _p(
        r"prompt is too long: {N} tokens > (?P<max>{N}) maximum\. the request needs"
        r" (?P<real>{N}) prompt \+ (?P<comp>{N}) max generation tokens\b"
    ),
    # Anthropic (also through Bedrock, Vertex, OpenRouter, LiteLLM)
    # (a Tinker proxy's: "... > M context window")
    _p(
        r"prompt is too long: (?P<real>{N}) tokens > (?P<max>{N})"
        r" (?:maximum|context window)(?P<whole>)"
    ),
    # Ollama (newer)
    _p(r"prompt is too long: (?P<real>{N}), model maximum context length: (?P<max>{N})"),
    _p(
        r"input length and `?max_tokens`? exceed context limit: (?P<real>{N}) \+ (?P<comp>{N})"
        r" > (?P<max>{N})"
    ),
    # Claude Code's refusal with its later versions' details: "Prompt is too long · the
    # request is ~P tokens (limit L) but this conversation is only ~C tokens — ..."
    _p(r"prompt is too long \u00b7 the request is ~(?P<real>{N}) tokens \(limit (?P<max>{N})\)"),
    _p(r"\bprompt is too long\b"),
    # Anthropic's other wording of it, with no counts (seen in a desktop agent's error
    # reports), as the whole message: beside other words it was never seen
    _p(r"^context reduction is suggested\.?\s*$"),
    # Gemini / Vertex
    _p(
        r"input token count(?: \((?P<real>{N})?\))? exceeds the maximum number of tokens"
        r" allowed(?: \(?(?P<max>{N})\)?)?"
    ),
    # xAI
    _p(r"maximum prompt length is (?P<max>{N}) but the request contains (?P<real>{N}) tokens"),
    # llama.cpp server
    _p(
        r"request \((?P<real>{N}) tokens\) exceeds the available context size"
        r" \((?P<max>{N}) tokens\)"
    ),
    # (not llama-box's "decoding exceeds ...": its full KV cache, ``_KV_SIZE_RE``)
    _p(r"(?<!decoding )exceeds the available context size"),
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
    # Bedrock; and Claude on Bedrock's cap on the prompt's text, in bytes (a trim that
    # drops turns drops their text)
    _p(r"input is too long for requested model"),
    _p(r"too many total text bytes"),
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
    # mlx-serve's guard on the prompt's attention memory: "Prompt (P tokens) requires ~NMB
    # GPU memory but only ~MMB available. Reduce prompt size or use a smaller model."
    _p(r"\bprompt \((?P<real>{N}) tokens\) requires ~?{N} ?[mg]b gpu memory but only ~?{N} ?[mg]b"),
    # Huawei Cloud MaaS (ModelArts.81001): "Inference failed: [Prompt length exceeds: ]the
    # prompt length P must less than the maximum input length L"
    _p(
        r"\bprompt length (?P<real>{N}) must (?:be )?less than the maximum input length"
        r" (?P<max>{N})"
    ),
    # gemini-proxy-key-rotation-rust's own cap (RFC 7807 "detail"): "Request body too large:
    # P tokens (max: L)", tokens where the words are a byte limit's
    _p(r"\brequest body too large: (?P<real>{N}) tokens \(max: (?P<max>{N})\)"),
    # oMLX
    _p(r"prompt too long: (?P<real>{N}) tokens exceeds max context window of (?P<max>{N}) tokens"),
    # ollama-compaction-proxy's own budget, set under the model's window
    _p(r"\bprompt is too long for the configured (?P<max>{N}) input-token budget\b"),
    # kronk ("the context window is full"), kiro.rs ("Context window is full. Reduce
    # conversation history, system prompt, or tools.")
    _p(r"\bcontext window is full\b"),
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
    # Magnitude's icn-server: "prompt (P tokens) leaves no generation capacity in the
    # effective per-sequence context (L)"
    _p(
        r"prompt \((?P<real>{N}) tokens\) leaves no generation capacity in the effective"
        r" per-sequence context \((?P<max>{N})\)"
    ),
    # LobeHub's pre-flight: "Prompt tokens (P) leave less than C tokens for completion
    # within the model context window (L) for model ..."
    _p(
        r"prompt tokens \((?P<real>{N})\) leave less than (?P<comp>{N}) tokens for completion"
        r" within the model context window \((?P<max>{N})\)"
    ),
    # Google's LiteRT-LM, as the Android servers that run it relay it (OlliteRT, HostAI,
    # temuxllm): "Input token ids are too long. Exceeding the maximum number of tokens
    # allowed: P >= L", with their advice after it
    _p(
        r"input token ids are too long\.? exceeding the maximum number of tokens allowed:?"
        r" (?P<real>{N}) >= (?P<max>{N})"
    ),
    # Zhipu GLM (code 1261) / MLX servers; not after "system" (nvd-claude-proxy's cap on the
    # system prompt, which no trim shortens, is left to the generic readers' judgement)
    _p(
        r"(?<!system[\s_-])\bprompt exceeds (?:the )?(?:model'?s )?max(?:imum)?"
        r" (?:context )?length\b"
    ),
    # MiniMax: the number in parentheses is an error code, not a count
    _p(r"context window exceeds limit"),
    # Baidu Qianfan / ERNIE
    _p(r"\bprompt tokens too long\b"),
    # its v2 API's cap on the whole input, in characters (its code says as much in v1,
    # ``characters_too_long``), as the whole message: a count in characters is no window
    _p(r"^input characters limit is {N}\.?\s*$"),
    # GitHub Models / Azure AI model inference (code tokens_limit_reached, HTTP 413): the
    # tier's per-request input limit, which a shorter prompt meets
    _p(r"request body too large for (?:.{0,120}? )?model\. max size: (?P<max>{N}) tokens"),
    # Cohere (the total counts the prompt and the prediction)
    _p(
        r"too many tokens: total number of tokens(?: \(prompt and prediction\)| in the prompt)?"
        r" cannot exceed (?P<max>{N}) - received (?P<total>{N})"
    ),
    # Volcengine Ark (Doubao and hosted models): images and text together
    _p(r"total tokens of image and text exceed max message tokens"),
    # vLLM: "... maximum context length is L tokens. However, your request has P input tokens."
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? your request has"
        r" (?P<real>{N}) input tokens(?P<whole>)"
    ),
    # vLLM (2026, renderers/params.py): "... maximum context length is L tokens. However, your
    # prompt contains (at least) P input tokens, which exceeds this limit even without any
    # output tokens."; before tokenising, a prompt stated in characters over the most that L
    # tokens can hold ("your prompt contains C characters (more than M characters, which is
    # the upper bound for L input tokens)")
    # (rapid-mlx: "... However, your prompt contains P tokens, leaving no room for
    # generation."; its operator's cap, no whole window: "This server's maximum admitted
    # prompt length is L tokens. However, your prompt contains P tokens.")
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? your prompt contains"
        r" (?:at least )?(?P<real>{N}) (?:input )?tokens,"
        r" (?:which exceeds this limit|leaving no room for generation)(?P<whole>)"
    ),
    _p(
        r"maximum admitted prompt length is (?P<max>{N}) tokens?[.,]? however,? your prompt"
        r" contains (?P<real>{N}) tokens\b"
    ),
    _p(
        r"maximum context length is (?P<max>{N}) tokens?[.,]? however,? your prompt contains"
        r" {N} characters \(more than {N} characters, which is the upper bound for {N} input"
        r" tokens\)(?P<whole>)"
    ),
    # one-api-java's own check, in bytes against the smallest window it knows for the model:
    # "request body (612384 bytes) exceeds smallest known context window (131072 tokens)"
    _p(
        r"request body \({N} bytes\) exceeds smallest known context window"
        r" \((?P<max>{N}) tokens\)"
    ),
    # hipEngine: "request requires T context tokens (prompt P + max_tokens C + 1), exceeding
    # this server's preallocated max_context_tokens=L" (its own slot for the next token
    # aside: the prompt aims at L - C, unfixable where C alone fills L)
    _p(
        r"request requires {N} context tokens \(prompt (?P<real>{N}) \+ max_tokens (?P<comp>{N})"
        r" \+ 1\), exceeding this server's preallocated max_context_tokens=(?P<max>{N})"
    ),
    # mlx-bun's admission by memory: "request needs T tokens of context (prompt P +
    # max_tokens C) but the memory budget caps safe context at L"
    _p(
        r"request needs {N} tokens of context \(prompt (?P<real>{N}) \+ max_tokens (?P<comp>{N})\)"
        r" but the memory budget caps safe context at (?P<max>{N})"
    ),
    # prime-rl's patch of that check: "You passed C input characters. However, the model's
    # context length is only L tokens (at most M characters)."
    _p(
        r"you passed {N} input characters\. however, the model's context length is only"
        r" (?P<max>{N}) tokens \(at most {N} characters\)(?P<whole>)"
    ),
    # tinker-cookbook's capture proxy: "prompt is too long: P prompt tokens plus C max_tokens
    # exceed the model's context window" (the window not stated)
    _p(
        r"prompt is too long: (?P<real>{N}) prompt tokens plus (?P<comp>{N}) max_tokens exceed"
        r" the model's context window"
    ),
    # EasyDeL's eSurge: the output setting over the room the prompt leaves (the window less
    # the prompt and a reserve), so the window less the reserve is that room plus the prompt
    _p(
        r"requested max_new_tokens=(?P<comp>{N}) exceeds allowed=(?P<room>{N}) for"
        r" prompt_len=(?P<real>{N})"
    ),
    # LMDeploy (0.10 to 0.15): its engine's status, as the reply of a completion of its own
    _p(r"status code responsetype\.input_length_error\b"),
    # mistral.rs >= 0.9.1: "Sequence 12 with P tokens exceeds the available KV cache capacity."
    # ("... the total KV cache capacity of L tokens."); Krasis: "Prompt too long: P tokens
    # exceeds KV cache capacity of L tokens"
    _p(
        r"(?:sequence {N} with|prompt too long:) (?P<real>{N}) tokens exceeds"
        r" (?:the (?:available|total) )?kv cache capacity(?: of (?P<max>{N}) tokens)?"
    ),
    # ONNX Runtime GenAI (Foundry Local's engine, and servers on it): "input sequence_length
    # (P) is >= max_length (L)", max_length the whole sequence's (the model's context length
    # unless the request set it), so the request's own output limit is taken out of it
    _p(r"input sequence_length \((?P<real>{N})\) is >= max_length \((?P<max>{N})\)(?P<whole>)"),
    # GPUStack's llama-box (0.0.123 on): "Illegal param: prefill P tokens exceed n_ctx_per_seq"
    _p(r"\bprefill (?P<real>{N}) tokens exceed n_ctx_per_seq\b"),
    # ZhiLight: "Input tokens are too long: P"
    _p(r"input tokens are too long: (?P<real>{N})"),
    # hf2q: "Request can never fit the physical KV cache budget (needed_bytes=..., ...):
    # prompt + max_tokens exceeds what a slot can ever hold" (its 429 for the budget the
    # slots share, "Shared physical KV cache budget exceeded", clears by waiting)
    _p(r"\brequest can never fit the physical kv cache budget\b"),
    # SGLang >= 0.5.21: a prompt over the whole KV cache
    _p(r"request prompt exceeds the kv memory budget(?:: input_len=(?P<real>{N}))?"),
    # Xinference 4.1: "Prompt has P tokens, but context_length is L; at least one output token
    # is required." (MLX), "Prompt length P reaches or exceeds context_length L, leaving no
    # output capacity." (its multimodal models)
    _p(
        r"prompt has (?P<real>{N}) tokens, but context_length is (?P<max>{N}); at least one"
        r" output token is required(?P<whole>)"
    ),
    _p(r"prompt length (?P<real>{N}) reaches or exceeds context_length (?P<max>{N})(?P<whole>)"),
    # ... and its qwen-omni models, which need room for audio: "Prompt leaves 1 output
    # token(s) within context_length L; audio generation needs at least 2 thinker tokens."
    _p(r"prompt leaves {N} output token\(s\) within context_length (?P<max>{N})(?P<whole>)"),
    # LLMPlayer, its refusal as the reply: "Error: prompt too long (P tokens, max L)", a
    # prompt at the window (P = L) refused too
    _p(r"\bprompt too long \((?P<real>{N}) tokens, max (?P<max>{N})\)"),
    # vLLM (older): max_tokens defaulted to max_model_len - prompt_tokens went negative
    # (not -1: a client's own "no limit" setting, refused as it is)
    _p(r"max_tokens must be at least 1, got -(?!1\b)\d+"),
    # Vertex AI (Gemini): its own sentence for the input limit
    _p(
        r"input token count is (?P<real>{N}) but (?:the )?model only supports up to"
        r" (?P<max>{N})"
    ),
    # Cloudflare Workers AI: the estimate counts the output reservation too, so no count is read
    _p(r"exceeded this model context window limit"),
    # TabbyAPI (exllamav2/v3 backends)
    _p(r"prompt length (?P<real>{N}) exceeds the available context size of (?P<max>{N}) tokens"),
    _p(r"prompt length (?P<real>{N}) is greater than max_seq_len (?P<max>{N})"),
    # TensorRT-LLM (trtllm-serve; counts printed as floats): the per-request token budget,
    # which only the prompt fills
    _p(
        r"sum of prompt length \((?P<real>{N})(?:\.0+)?\),? query length \(\d+(?:\.0+)?\)"
        r" should not exceed max_num_tokens \((?P<max>{N})\)"
    ),
    # Triton's TensorRT-LLM backend
    _p(
        r"prompt length \((?P<real>{N})\) exceeds (?:the )?maximum (?:input|sequence) length"
        r" \((?P<max>{N})\)"
    ),
    # LMDeploy (api_server, OpenAI and Anthropic endpoints)
    _p(
        r"input length \((?P<real>{N})\) must be smaller than the model context length"
        r" \((?P<max>{N})\)"
    ),
    # mistral.rs (the window only)
    _p(r"prompt sequence length is greater than (?P<max>{N})"),
    # LM Studio (older servers)
    _p(r"input length (?P<real>{N}) exceeds (?:the )?context length (?P<max>{N})"),
    # ollamalegion's llama.cpp worker: "prompt exceeds n_ctx even with minimum n_predict
    # floor: model=M actual_tokens=P n_ctx=L min_n_predict_floor=F deficit_tokens=D ..."
    _p(r"actual_tokens=(?P<real>{N}) n_ctx=(?P<max>{N}) min_n_predict_floor=(?P<comp>{N})"),
    # Hugging Face transformers' generate(), relayed by servers built on it: "Input length
    # of input_ids is P, but `max_length` is set to L." (max_length holds the prompt too)
    _p(r"input length of input_ids is (?P<real>{N}), but `?max_length`? is set to (?P<max>{N})"),
    # llama-cpp-python (the library's ValueError, relayed by servers built on it)
    _p(r"requested tokens \((?P<real>{N})\) exceed context window of (?P<max>{N})"),
    # Google's backend behind AI Studio: "Cannot truncate to 89998, required 355220"
    _p(r"cannot truncate to (?P<max>{N}), required (?P<real>{N})"),
    # ---- self-hosted inference servers, read from their source
    # vLLM >= 0.16 (renderers/params.py): the character pre-check before tokenising states
    # no token count, only the window and the output reservation
    _p(
        r"you passed {N} input characters and requested (?P<comp>{N}) output tokens\.? however,?"
        r" the model.?s context length is only (?P<max>{N}) tokens"
    ),
    # vLLM (v0 engine): "Prompt length of P is longer than the maximum model length of L."
    _p(r"prompt length of (?P<real>{N}) is longer than the maximum model length of (?P<max>{N})"),
    # vLLM v1 (input processor): a prompt that fills the window leaves no room for one token
    _p(
        r"prompt \(length (?P<real>{N})\) plus the number of requested output tokens"
        r" \(at least (?P<comp>{N})\) (?:is longer than|exceeds) the maximum model length of"
        r" (?P<max>{N})"
    ),
    # llama.cpp server (a model that cannot split its batch: embeddings, rerankers)
    _p(
        r"input \((?P<real>{N}) tokens\) is larger than the max context size"
        r" \((?P<max>{N}) tokens\)"
    ),
    # TensorRT-LLM (TensorRT engine backend, llmapi/llm.py): prompt and max_tokens against
    # max_seq_len (the prompt printed as a float)
    _p(
        r"sum of prompt length \((?P<real>{N})(?:\.0+)?\) and query length \(\d+\) max_tokens"
        r" \((?P<comp>{N})\) should not exceed max_seq_len \((?P<max>{N})\)"
    ),
    # TensorRT-LLM (PyTorch backend, executor/base_worker.py): no room left for output
    _p(
        r"max_seq_len \((?P<max>{N})\) - `?splited_prompt_len`? \((?P<real>{N})\)"
        r"(?: - `?query_token_len`? \((?P<comp>{N})\))?"  # (not in every release)
    ),
    _p(
        r"prompt_token_ids`? length \((?P<real>{N})\) is greater than `?max_seq_len`?"
        r" \((?P<max>{N})\)"
    ),
    # Modular MAX (its tokenizers): "Prompt length of P is greater or equal to configured max
    # model context length of L."
    _p(
        r"prompt length of (?P<real>{N}) is greater (?:than|or equal to)(?: the)? configured max"
        r" model context length of (?P<max>{N})"
    ),
    # OpenVINO Model Server (src/llm/servable.cpp): the prompt, or the prompt and max_tokens,
    # against the model's max length
    _p(
        r"number of prompt tokens: (?P<real>{N})(?: \+ max tokens value: (?P<comp>{N}))? exceeds"
        r" model max length: (?P<max>{N})"
    ),
    # llamafile (v2 server): the plain-text reason of its 400 once no older message is left
    # to forget
    _p(r"\bout_of_context_due_to_long_message\b"),
    # LiteLLM proxy (router pre-call checks): "... Max Input Tokens=28672, Got=45196"
    _p(
        r"context window exceeded for given call\b[\s\S]{0,400}?max input tokens=(?P<max>{N}),"
        r" got=(?P<real>{N})"
    ),
    # Vercel AI Gateway: "Input too long: 518063 input tokens, limit is 262144 for this model"
    _p(r"input too long: (?P<real>{N}) input tokens, limit is (?P<max>{N})"),
    # io.net: "... maximum context length of 204800 tokens. You requested ~269722 tokens
    # (204186 input + 65536 output)"
    _p(
        r"maximum context length of (?P<max>{N}) tokens\.? you requested ~?(?P<total>{N}) tokens"
        r" \((?P<real>{N}) input \+ (?P<comp>{N}) output\)"
    ),
    # Cohere (2026): "size limit exceeded by E tokens. ... The limit for this model is L tokens."
    _p(
        r"too many tokens: size limit exceeded by (?P<over>{N}) tokens\.[^\n]{0,120}? the limit"
        r" for this model is (?P<max>{N}) tokens"
    ),
    # DashScope: "Input tokens length is P. Output tokens length is C. Range of total length
    # should be less than or equal to L"
    _p(
        r"input tokens length is (?P<real>{N})\.? output tokens length is (?P<comp>{N})\.?"
        r" range of total length should be less than or equal to (?P<max>{N})"
    ),
    # SiliconFlow: "number of input tokens (P) has exceeded max_prompt_tokens (L) limit."
    _p(r"number of input tokens \((?P<real>{N})\) has exceeded max_prompt_tokens \((?P<max>{N})\)"),
    # SiliconFlow: "max_total_tokens (T) must be less than or equal to max_seq_len (L)", where
    # T is the prompt plus the max_tokens asked for (``withres``: see _read_message)
    _p(
        r"max_total_tokens \((?P<withres>{N})\) must be less than or equal to max_seq_len"
        r" \((?P<max>{N})\)"
    ),
    # vllm-spyre (IBM Spyre): "prompt length is P tokens, which gets padded to PP tokens,
    # maximum number of output tokens is C tokens, but max model context length is L": the
    # padded length is what must fit beside the output
    _p(
        r"gets padded to (?P<real>{N}) tokens, maximum number of output tokens is (?P<comp>{N})"
        r" tokens, but max model context length is (?P<max>{N})(?P<padded>)"
    ),
    # NovelAI: "ModelMaxLength: model 'M' has L tokens maximum, P tokens context requested"
    _p(r"has (?P<max>{N}) tokens maximum, (?P<real>{N}) tokens context requested"),
    # Gemini (PaLM-era wording): "Input request contains (P) tokens, which is more than the
    # max tokens limit allowed: (L)"
    _p(
        r"input request contains \(?(?P<real>{N})\)? tokens,? which is more than the max tokens"
        r" limit allowed:? \(?(?P<max>{N})\)?"
    ),
    # llama.cpp (older servers, also behind LM Studio): "Cannot truncate prompt with n_keep
    # (P) >= n_ctx (L)"
    _p(r"cannot truncate prompt with n_keep \((?P<real>{N})\) >= n_ctx \((?P<max>{N})\)"),
    # TabbyAPI (older): "Request length P + C is greater than max_seq_len L"
    _p(r"request length (?P<real>{N}) \+ (?P<comp>{N}) is greater than max_seq_len (?P<max>{N})"),
    # Kilo Code's gateway: "The maximum context length is L tokens. However, about T tokens
    # were requested."
    _p(
        r"maximum context length is (?P<max>{N}) tokens?\.? however,? (?:about )?(?P<total>{N})"
        r" tokens were requested"
    ),
    # Zed's cloud (with status 403): "Context window exceeded: P tokens exceeds the limit of
    # L tokens"
    _p(r"context window exceeded: (?P<real>{N}) tokens exceeds the limit of (?P<max>{N}) tokens"),
    # LightLLM (status 417): "the input prompt token len P + max_new_tokens C > L"
    _p(
        r"\bprompt token len (?P<real>{N})\s*\+\s*max_new_tokens\s*(?P<comp>{N})\s*>\s*"
        r"(?P<max>{N})"
    ),
    # LlamaEdge (plain text, status 500): "The number of prompt tokens (P) is greater than
    # the max prompt tokens (L)" (or "than the context size (L)")
    _p(
        r"number of prompt tokens \((?P<real>{N})\) is greater than the"
        r" (?:max prompt tokens|context size) \((?P<max>{N})\)"
    ),
    # Sphnet behind ChernYIN (the limit masked): "the prompt length P must less than the
    # maximum input length ***"
    _p(r"\bprompt length (?P<real>{N}) must (?:be )?less than the maximum input length"),
    # rtp-llm (status 500, code 511_LONG_PROMPT_ERROR / 607_EXCEEDS_KV_CACHE_MAX_LEN):
    # "model max tokens is L, request length is P, max_new_tokens is -D", "input len P is
    # greater than kv cache max available tokens num L", "input len P with speculative
    # reserve_step S exceeds max seq len M, allowed max input len for speculative decoding
    # is L"
    _p(r"model max tokens is (?P<max>{N}), request length is (?P<real>{N})"),
    _p(r"input len (?P<real>{N}) is greater than kv cache max available tokens num (?P<max>{N})"),
    _p(
        r"input len (?P<real>{N}) with speculative reserve_step \d+ exceeds max seq len {N},"
        r" allowed max input len for speculative decoding is (?P<max>{N})"
    ),
    # candle-vllm (422): "Requested prompt(P tokens, ...) plus C decode budget tokens is
    # larger than available kvcache (maximum L tokens)", "Requested prompt(P tokens) leaves
    # no room for generated tokens within maximum model context L" (P is under L there: the
    # window less a safety margin is not stated, so only the prompt is read)
    _p(
        r"requested prompt\((?P<real>{N}) tokens[^)]{0,60}\) plus (?P<comp>{N}) decode budget"
        r" tokens is larger than available kvcache \(maximum (?P<max>{N}) tokens\)"
    ),
    _p(
        r"requested prompt\((?P<real>{N}) tokens\) leaves no room for generated tokens within"
        r" maximum model context"
    ),
    # iFlytek (Xunfei) MaaS, relayed: "... message: input token limit is L"
    _p(r"\binput token limit is (?P<max>{N})\b"),
    # ms-swift's deploy server: "Current length of row(P) is larger than the max_length(L)."
    _p(r"current length of row\((?P<real>{N})\) is larger than the max_length\((?P<max>{N})\)"),
    # ... and its engines' "Input length (P) leaves no room for generation with max_model_len
    # (L) and max_tokens_offset (O).", O 0 or less than 0 (SGLang's speculative draft tokens,
    # which the window must hold too)
    _p(
        r"input length \((?P<real>{N})\) leaves no room for generation with max_model_len"
        r" \((?P<max>{N})\)(?: and max_tokens_offset \((?:-(?P<comp>{N})|0)\))?"
    ),
    # node-llama-cpp (relayed by the servers built on it, status 500): its context shift
    # cannot make the history fit, the newest prompt or the system message too long
    _p(
        r"\bfailed to compress chat history for context shift due to a too long prompt or"
        r" system message\b"
    ),
    # TCQ-shim (413 context_length_exceeded): "Requested P (prompt) + C (max_tokens) = T
    # tokens exceeds the context window of L tokens."
    _p(
        r"\brequested (?P<real>{N}) \(prompt\)(?: \+ (?P<comp>{N}) \(max_tokens\) = {N})? tokens"
        r" exceeds the context window of (?P<max>{N}) tokens"
    ),
    # vllm-rust's character check, the prompt's budget the window less max_tokens: "prompt
    # too long: C characters exceeds the maximum of M characters (max_model_len=L,
    # max_tokens=T)"
    _p(
        r"\bprompt too long: {N} characters exceeds the maximum of {N} characters"
        r" \(max_model_len=(?P<max>{N}), max_tokens=(?P<comp>{N})\)"
    ),
    # jitllm: "prompt is about P tokens (C characters), which does not fit a context of L
    # tokens." and "prompt (about P tokens) plus max_tokens C exceeds the context of L tokens."
    _p(
        r"\bprompt is about (?P<real>{N}) tokens \({N} characters\), which does not fit a"
        r" context of (?P<max>{N}) tokens"
    ),
    _p(
        r"\bprompt \(about (?P<real>{N}) tokens\) plus max_tokens (?P<comp>{N}) exceeds the"
        r" context of (?P<max>{N}) tokens"
    ),
    # ExecuTorch's llm_server worker (a 500, or an error event in its stream): "Generation
    # failed: prompt fills the context window; no room to generate"
    _p(r"\bprompt fills the context window; no room to generate\b"),
    # MindIE-LLM's input cap after the chat template (422): "Messages token length must be
    # in (0, L], but got P." (P 0 is an empty prompt, no overflow)
    _p(r"\bmessages token length must be in \(0, (?P<max>{N})\], but got (?=[1-9])(?P<real>{N})"),
    # a FastAPI server over llama-cpp-python: "Token limit exceeded: T > L (prompt: P + max:
    # C)"
    _p(
        r"\btoken limit exceeded: {N} > (?P<max>{N}) \(prompt: (?P<real>{N}) \+ max:"
        r" (?P<comp>{N})\)"
    ),
    # maclocal-api (afm), Apple's counts, the prompt often under the window (which holds the
    # output too): "Your conversation has P tokens but the maximum is L."
    _p(r"\byour conversation has (?P<real>{N}) tokens but the maximum is (?P<max>{N})\b"),
    # RobAI's research proxy, its refusal as the reply (below the window, at 95% of it):
    # "Your request contains **P tokens**, which exceeds the configured limit. ... Maximum
    # allowed: L tokens (95%)"
    _p(
        r"\byour request contains \*\*(?P<real>{N}) tokens\*\*, which exceeds the configured"
        r" limit\.[^:]{0,80}?:\*\*\n- your request: {N} tokens \([\d.]+%\)\n- maximum allowed:"
        r" (?P<max>{N}) tokens"
    ),
    # GopherLLM (plain text, a prompt at or over the window): "prompt (P tokens) leaves no
    # room to generate within the model's context length (L)"
    _p(
        r"\bprompt \((?P<real>{N}) tokens\) leaves no room to generate within the model.?s"
        r" context length \((?P<max>{N})\)"
    ),
    # fast-mlx's admission (400): "Request exceeds the loaded model or KV limit" (the prompt
    # and its output reservation against the window or the KV cache's room; no counts, so
    # a reservation that alone is over reads as fixable: the ladder then spends its retries)
    _p(r"\brequest exceeds the loaded model or kv limit\b"),
    # PrivateGPT's history condensation (400): "Condensed history exceeds maximum length after
    # applying condensation strategy." (its system messages alone over, or its newest user
    # message, it words otherwise: a trim keeps both)
    _p(r"\bcondensed history exceeds maximum length\b"),
    # YALS without counts: "Prompt + generated tokens exceeds max context length of L"
    _p(r"\bprompt \+ generated tokens exceeds max context length\b"),
    # KsanaLLM (status 500): "input length or logits_custom_length exceeds the limit."
    _p(r"\binput length or logits_custom_length exceeds the limit\b"),
    # Megatron-LM's inference server: the error class in a Python repr, and its sentence
    # "This model's maximum context length was exceeded. Your messages resulted in P tokens."
    _p(r"'type': '(?:MaxSequenceLengthOverflowError|TokenOverflowError)'"),
    _p(
        r"maximum context length was exceeded\.? your messages resulted in (?P<real>{N})"
        r" tokens"
    ),
    # Baidu FastDeploy: "Input text is too long, input_ids_len (P) + min_tokens(C) >=
    # max_model_len(L)", and its engine's "length of prompt token(P) + min_dec_len (C) >=
    # max_model_len " (the window not stated)
    _p(
        r"input_ids_len \((?P<real>{N})\) \+ min_tokens\((?P<comp>{N})\) >= max_model_len\("
        r"(?P<max>{N})\)"
    ),
    _p(r"length of prompt token\((?P<real>{N})\) \+ min_dec_len \({N}\) >= max_model_len"),
    # apfel: "Input exceeds the L-token context window."
    _p(r"\bexceeds the (?P<max>{N})-token context window\b"),
    # Last: the sum any server may state, "P + C > L" or "P + C >= L" (AI21's "Request too
    # many tokens: 1999 + 50 > 2048"), the prompt first and the reservation second
    _p(
        r"\btokens?\b[^\n]{0,80}?(?<![\d.])(?P<real>{N})\s*\+\s*(?P<comp>{N})\s*>=?\s*(?P<max>{N})"
        r"(?![\d.]\d)"
    ),
    # xAI (2026): "[input_too_large] Current message (P tokens) exceeds budget (L tokens)"
    _p(r"\bcurrent message \((?P<real>{N}) tokens\) exceeds budget \((?P<max>{N}) tokens\)"),
    # SambaNova: "The provided prompt is P tokens long, so generating C tokens requires a
    # sequence length of T, but the maximum supported sequence length is just L!"
    _p(
        r"provided prompt is (?P<real>{N}) tokens long, so generating (?P<comp>{N}) tokens"
        r" requires a sequence length of {N}, but the maximum supported sequence length is"
        r" just (?P<max>{N})"
    ),
    # Writer: "Total number of tokens (prompt+generation) exceeded the service limit of L
    # tokens" (a total with the reservation: no count read)
    _p(r"total number of tokens \(prompt\+generation\) exceeded the service limit"),
    # OpenAI's sentence with no count of the prompt (Llama on Bedrock): "This model's
    # maximum context length is L tokens. Please reduce the length of the prompt"
    _p(
        r"maximum context length is (?P<max>{N}) tokens\.?\s*please reduce the length of the"
        r" (?:prompt|messages|input)\b(?!\s*(?:or|and)\b)"
    ),
    # ChatGPT's web app, relayed by its API relays (iimeta's chatgpt-api-server): "The
    # message you submitted was too long,P tokens, please reload the conversation ..."
    _p(r"the message you submitted was too long,?\s*(?P<real>{N}) tokens"),
    # OpenVINO GenAI's NPU pipeline (OpenArc, OVMS; as a 500): "Stateful LLM pipeline on NPU
    # may only process prompts or hold chat history up to L tokens. P is passed.", its VLM
    # pipeline's "... may only process input embeddings up to L tokens. P is passed."
    _p(
        r"may only process (?:prompts or hold chat history|input embeddings) up to (?P<max>{N})"
        r" tokens\.\s*(?P<real>{N}) is passed"
    ),
    # exllamav3's generator (an assertion its servers relay): "Job requires P pages (only L
    # available) and cannot be enqueued. Total cache allocated is L * 256 = T tokens". Pages
    # hold the prompt and its reservation, and are no tokens: no count is read
    _p(r"\bjob requires {N} pages \(only {N} available\) and cannot be enqueued\b"),
    # node-llama-cpp's LlamaChat (servers on it relay it, as a 500 or a stream's error):
    # the history left after its own context shift does not fit
    _p(r"\bthe context size is too small to generate a response\b"),
    # JamePeng's llama-cpp-python (status 500) where its backend cannot shift the context:
    # "Context Shift is explicitly disabled by the C++ backend (...). You MUST increase
    # n_ctx (currently L) to fit the dialogue.", and for an image chunk "Multimodal chunk
    # exceeded context limit(currently n_ctx=L)"
    _p(
        r"\bcontext shift is explicitly disabled\b[^.]{0,120}\. you must increase n_ctx"
        r" \(currently (?P<max>{N})\) to fit the dialogue"
    ),
    _p(r"\bmultimodal chunk exceeded context limit\s*\(currently n_ctx=(?P<max>{N})\)"),
    # llamafile's server (plain text, status 500): a prompt the slot cannot prefill
    _p(r"^\s*out_of_context\s*$"),
    # new-api relays (status 500, code maximum_context_length_failed)
    _p(r"\bmaximum context length failed\b"),
    # OpenAI's embeddings and Responses ``input``: "Invalid 'input': maximum context length is
    # L tokens."
    # (also one input of a list: "Invalid 'input[0]': maximum input length is 8192 tokens")
    _p(r"invalid 'input(?:\[\d+\])?': maximum (?:context|input) length is (?P<max>{N}) tokens"),
)

# Vocabulary the readers below share.
# Generating an output, but not a server's wrapper around any failure ("Stream generation
# failed: ...", "Error generating response: ...": vllm.rs, Apple's servers).
_GENERATING: Final = r"generat(?!ion failed|ing (?:a |the )?response)"
# The request's output setting by its key: max_tokens, max_new_tokens, max_completion_tokens,
# max_output_tokens.
_MAX_TOKENS_KEY: Final = r"max_(?:new_|completion_|output_)?tokens"
# A window's name called with its value: "max_seq_len(32768)".
_WINDOW_CALL: Final = r"(?:max_seq_len|max_model_len|n_ctx|context_length|max_context_length)\("
# The window by a name no other limit has ("context length", "max_seq_len", "n_ctx").
_WINDOW_NAMES: Final = (
    r"\bcontext(?:[ _-]?(?:window|length|size|limit))\b|\bmax_?seq_?len\b"
    # ("seq length exceeds max model length": gLLM; not an output's or a decode's)
    r"|(?<!output )(?<!decode )\bseq(?:uence)? length\b"
    r"|\bn_ctx\b"
)

# The generic rule (``_generic``): vocabulary for wordings no pattern lists.
_GEN_CONTEXT_RE: Final = _p(r"\bcontext\b|" + _WINDOW_NAMES)
# (the messages by their length, not their number: "the length of the messages exceeds the
# model limit", not "120 messages exceed the limit of 100")
_GEN_SUBJECT_RE: Final = _p(
    r"\b(?:prompt|input|tokens?)\b|\b(?:prompt|input)_tokens\b|\binput_ids\b"
    r"|\b(?:length|size) of (?:the |your )?messages\b"
)
_GEN_LIMIT_RE: Final = _p(
    r"\b(?:max|maximum|limit|length|window|size|allowed|permitted|capacity|supports?)\b"
    # "Payload too large: 9702 tokens exceeds available 5530" (herrbasan's LLM-Gateway),
    # not what a plan, a balance or credits leave available
    r"|\bexceeds? (?:the )?available (?:\d|tokens\b)"
    r"(?![^.;]*\b(?:plan|tier|subscription|quota|balance|credits?|account|remaining)\b)"
    r"|\bat most\b|\bcan (?:handle|process|accept|take)\b"
    r"|\bmax_(?:input|prompt|context|model)"
    r"|\b(?:cannot|can't|must not|may not) exceed \d"  # "... cannot exceed 2048 - received N"
)
_GEN_EXCESS_RE: Final = _p(
    # (not a lower bound: "should be greater than 0 and less than or equal to L, but got 0")
    r"exceed|too (?:long|large|big)|too many (?:\w+ )?tokens|longer than"
    r"|(?:greater|more|larger) than(?! 0\b)|must (?:be )?(?:less|smaller|at most|no more than|<)"
    # "You have reached the maximum prompt length limit" (a relayed Gemini web account)
    r"|\breached (?:the |your )?max(?:imum)? (?:(?:prompt|input|context)(?: token)?"
    r" (?:length|size|window|tokens?)|context limit)\b"
    # "is over this model's 8192 token limit"
    r"|\bover (?:the |this |its )?(?:model'?s? )?(?:{N} )?(?:tokens? )?(?:limit|maximum|max)\b"
    # "is above the model's limit", "surpass the model context of 8192"
    r"|\babove (?:the |this |its )?(?:model'?s? )?(?:limit|maximum|max)\b|\bsurpass"
    # "is far past the context window of M (L tokens)" (opencodex), "beyond the limit"
    r"|\b(?:past|beyond) (?:the |this |its )?(?:model'?s? )?(?:context|limit|maximum|max)\b"
    r"|\btoo much (?:input|context|text)\b"
    # "context window limit reached", "Context limit hit (9100 of 8192 tokens used)"
    r"|\bcontext(?:[ _-]?(?:window|length|size))?[ _-]?limit (?:reached|hit)\b"
    r"|\breached (?:the )?(?:model'?s? )?context(?:[ _-]?(?:window|length|size|limit))\b"
    # "Prompt already consumes the available context window" (gallama)
    r"|\b(?:fills?|consumes?|uses? up|takes? up)(?: the| all(?: of)? the)?"
    r"(?: (?:entire|whole|available|full))?(?: model'?s?)? context\b"
    # "this model's context length is 32768, which leaves no room for an answer" (knurlogic;
    # not what an output reservation leaves: mlx-vlm's "Output reservation leaves no room")
    r"|(?<!reservation )(?<!reserve )\b(?:leaves?|leaving) no room\b"
    # "does not fit in the context window", "cannot fit 9000 tokens into 8192", "not enough
    # context space for the prompt", "insufficient context window"
    r"|\b(?:does not|doesn't|do not|don't|cannot|can't|won't|will not|would not) fit\b"
    # "no candidate model fits estimated context (20440 tokens)" (forge-gateway)
    r"|\bno (?:\w+ )?(?:model|provider|backend|deployment)s? (?:fits?|can fit)\b"
    # "Compaction input must fit within the model context window." (mlx-vlm): the context as
    # what to fit within, not a vocabulary or a field
    r"|\bmust fit (?:in|within|into) (?:the |its |this )?(?:model'?s? )?(?:\w+ )?context\b"
    # "unable to compact conversation to the context window" (a server's own history cut,
    # into the window: a compaction that failed for another reason is no overflow)
    r"|\b(?:unable to|cannot|can't|could not|failed to) (?:compact|compress|truncate|shrink|trim)"
    r" (?:the )?(?:conversation|chat history|history|prompt|messages|input)(?: enough)?"
    r" (?:to fit (?:in |within |into )?|to |in |within |into )(?:the |its |this )?"
    r"(?:model'?s? )?context window\b"
    r"|\b(?:not enough|insufficient) (?:context (?:window|space|room|length|size)"
    r"|(?:room|space) (?:in|for) (?:the )?(?:context|prompt))\b"
    # "12000 tokens > 8192", "P (N) >= n_ctx (L)"
    # ("input after multimodal process is P > max_seq_len(L)": rtp-llm, a window's name only)
    r"|is full\b|overflow|\d ?(?:tokens? ?)?> ?(?:[a-z_]+ |" + _WINDOW_CALL + r")?\d"
    r"|\d\) ?>=? ?[a-z_]+ \(\d"
    r"|\bonly (?:supports?|allows?|accepts?)\b|\bsupports? (?:up to|at most)\b"
)
# The advice an overflow gives ("Please reduce the length of the prompt"): its excess, read
# beside the window's name only (``_GEN_CONTEXT_RE``), never beside "length" alone
_GEN_ADVICE_RE: Final = _p(
    r"\breduce the length of the (?:prompt|messages?|input)\b"
    # ("the rendered prompt is 9000 tokens; the model context is 8192 - shorten the
    # conversation or raise --ctx": dasllama)
    r"|\bshorten the (?:conversation|prompt|messages|input|chat history)\b"
)
# A count as wordings state it: digits (with thousands commas, or a ".0" decimal) that are
# not part of an id, a size ("10MB"), a date, a path or another decimal.
_COUNT_N: Final = r"(?<![\w.\-/])(\d+(?:,\d{3})*)(?:\.0+(?!\d))?(?![\w/]|[.\-]\d|,\d)"
# A prompt-side maximum stated with its count, the message's only one, as an error says it
# when it names no excess: "max supported input length = 512 for now" (BLOOM's inference
# server), "Maximum context length is 4096 tokens."
_GEN_LIMIT_STATED_RE: Final = _p(
    r"\bmax(?:imum)?(?: (?:supported|allowed|permitted))? (?:input|prompt|context|sequence)"
    r"[ _](?:length|size|tokens)\b(?: (?:is|of))? ?[=:]? ?" + _COUNT_N
)
# A limit and a larger count in one sentence, in either order, for wordings no pattern
# lists (``_claimed``): "maximum prompt length is 131072 but the request contains 136973
# tokens", "your messages resulted in 3503 tokens" after "maximum context length is 2048",
# "the input token count is 1251952 but model only supports up to 1048576". Read only in a
# message that says "tokens" and names no output (a total may hold its reservation).
_CLAIM_LIMIT_FIRST_RE: Final = _p(
    r"\b(?:maximum|max|limit|limited to|only supports?(?: up to)?|up to|at most"
    r"|(?:less|no more) than|cannot exceed|must be <=?)\b"
    # "maximum context length of DeepSeek-V3-0324 is": a model's name, after the window's
    r"(?: (?:context|sequence|input|prompt)(?: length| window| size)? of [\w.:/-]+ is)?"
    r"\D{0,60}?(?P<max>{N})"
    r"(?!\s*(?:bytes|characters|chars|[kmg]i?b)\b)\D{0,160}?"
    r"\b(?:however|but|while|whereas|received|given|got|requested|contains?|has|have"
    r"|resulted in|you passed|will take|would take|needs?|requires?|required)\b\D{0,80}?"
    r"(?P<real>{N})"
)
_CLAIM_COUNT_FIRST_RE: Final = _p(
    r"(?P<real>{N})\D{0,80}?\b(?:but|while|exceeds?|exceeded|more than|greater than"
    r"|larger than|longer than|over|too (?:long|large|big))\b\D{0,80}?\b(?:maximum|max|limit"
    r"|only supports?(?: up to)?|up to|at most|allowed|capacity|window|length|size)\b\D{0,40}?"
    r"(?P<max>{N})"
)
# ... or a prompt too long for the window, each count beside its name: "Prompt too long
# (9000 tokens) for context window (8192)" (LLM-Inference-Service)
_CLAIM_FOR_WINDOW_RE: Final = _p(
    r"\btoo (?:long|large|big) \(?(?P<real>{N}) tokens?\)? for (?:the |this |its )?"
    r"(?:model'?s? )?context(?: window| length| size)? (?:of )?\(?(?P<max>{N})\b"
)
# ... or a count and the smaller one left for it: "9100 tokens requested but only 8192
# available"
_CLAIM_ONLY_RE: Final = _p(
    r"(?P<real>{N})\s*tokens?\b\D{0,40}?\bbut only (?P<max>{N})(?: tokens?)?"
    r" (?:are |is )?(?:available|allowed|supported|left|remain)"
)
# ... or the prompt's count over a server setting that names the window as an identifier
# ("Prompt (9000) exceeds max_length (8192)", AReaL's "len of prompt tokens P exceeds
# max_total_tokens L"), which ``_GEN_EXCLUDE_RE`` would take for an output setting's name:
# only the window's own names; a budget, a rate, a per-message or media cap has others.
_CLAIM_SETTING_RE: Final = _p(
    r"\b(?:prompt|input)(?: tokens?| length| token len)?\s*+\(?+(?P<real>{N})\)?+\s++"
    r"(?:exceeds|is (?:larger|greater|longer) than)\s++(?:the )?"
    r"(?:engine_max_tokens|max_(?:length|total_tokens|seq_len(?:gth)?|sequence_length|model_len(?:gth)?"
    r"|context_len(?:gth)?|input_(?:length|tokens)|position_embeddings)|context_length|n_ctx)"
    r"\s*+[=(]?+\s*+(?P<max>{N})\b"
)
_CLAIM_TOKENS_RE: Final = _p(r"\btokens?\b|\b(?:input|prompt|sequence|context) length\b")
# The end of a sentence: what a claim's own sentences say is judged, not advice after them.
_SENTENCE_END_RE: Final = re.compile(r"[.!?;](?:\s|$)|\n")
# A message naming an output: a total it states may hold the reservation, so neither
# ``_claimed`` nor ``_two_counts`` splits it into a prompt and a window.
_OUTPUT_WORD_RE: Final = _p(
    # (not "Completion failure: ...", lemonade's wrapper around any failure)
    r"output|completion(?! fail)|prediction|max tokens|"
    + _MAX_TOKENS_KEY
    # a thinking budget is output too (Anthropic's budget_tokens, Gemini's thinkingBudget)
    + r"|budget_tokens|thinking[ _]?budget|"
    + _GENERATING
)
# An itemised wording no pattern lists (``_itemised``): the prompt's count, the output
# reservation's and the window, each told by the words beside it ("P input tokens",
# "C in the completion", "max_seq_len (L)", "must be <= L", "input_tokens=P ...
# max_new_tokens=C ... kv_capacity=L"), in any order. A decimal count
# ("prompt length (9351.0)") reads as its integer.
_ITEM_N: Final = _COUNT_N
# (Runs of blanks are taken possessively, "\s*+": two greedy "\s*" side by side split a long
# run of spaces every way before failing, seconds of the event loop for one message.)
_ITEM_GATE_RE: Final = _p(
    r"\bcontext(?:[ _-]?(?:window|length|size|limit))?\b|max_?seq_?len|max_model_len|n_ctx"
    r"|total length|\bmax(?:imum)? (?:model|seq(?:uence)?) (?:length|len)\b|must be <="
    r"|\bmodel max(?:imum)? (?:length|len)\b"  # OpenVINO Model Server
    r"|max_kv_size|\bkv[ _]?cache\b|kv_capacity|tokens per request"
    r"|(?:(?:server|model)'?s|effective) total token limit"
    # a sum compared with the window: "prompt token len P + max_new_tokens C > L"
    r"|\d\s*\+\s*`?[a-z_]+`?\s+\d+\s*>\s*\d"
)
_ITEM_PROMPT_AFTER_RE: Final = _p(
    _ITEM_N + r"\s*(?:`?inputs?`?\s+tokens?|input\b|(?:tokens? )?(?:in|of|from) (?:the |your )?"
    r"(?:input messages|messages|prompt|(?:text|tool|image|audio|file) input)\b|prompt\b)"
)
_ITEM_PROMPT_BEFORE_RE: Final = _p(
    # ("final prefill length (P) after placeholder expansion plus max_tokens (C) is T, above
    # L.", onnx-genai-server: the prompt as the engine fills it; not a chunked prefill's, nor
    # a cap: "max prompt length (L)", "max_input_tokens=L", "truncate_prompt_tokens=N")
    r"(?:input tokens length is|(?<!max )(?<!maximum )(?:prompt|final prefill) length\s*+=?+"
    r"\s*+\(?+|prompt tokens?:?|input length"
    # ("prompt_tokens≈7900": local-lattice's estimate)
    r"|(?<!max_)(?<!truncate_)(?:input|prompt)_tokens\s*+[=(≈~]|(?<![a-z_])(?:input|prompt)_tokens:?+"
    r"|prompt (?:contains(?: at least)?|has|uses)|you passed|prompt token len|prompt\s*+\("
    # ("(prompt P + max_tokens C + 1)", hipEngine's sum)
    r"|prompt is(?= \d[\d,]* tokens)|\(prompt(?=\s++\d[\d,]*+\s*+\+))\s*+" + _ITEM_N
)
_ITEM_OUTPUT_AFTER_RE: Final = _p(
    _ITEM_N + r"\s*(?:output tokens?|`?max_(?:new_|completion_)?tokens\b`?"
    r"|(?:tokens? )?(?:in|for) (?:the )?(?:completion|output|max_(?:new_|completion_)?tokens)"
    r"|output\b|(?:max )?generation\b|completion\b)"
)
_ITEM_OUTPUT_BEFORE_RE: Final = _p(
    # ("you have set the `max_tokens` to C", ms-swift)
    # ("+ max_new_tokens (C) exceeds max_seq_len (L)", paladin8's infer)
    r"(?:output tokens length is|max_new_tokens\s*+[=(]?+"
    # (not the window less it: "max_model_len - max_tokens = 7168", vLLM's truncation check)
    r"|(?<!- )max[_ ]tokens`?(?: value)?(?: to| is)?\s*+[:=(]?+\s*+\(?+"
    r"|max_(?:completion_)?tokens'? is too large:|(?:completion|output)\s*+\(|output reserves"
    # ("~P input tokens with C reserved for the response", Plexus's own window check; not a
    # window's "8192 less 2000 reserved for the response")
    r"|\bwith(?=\s++\d[\d,]*+ (?:tokens? )?reserved for (?:the )?(?:response|output|completion)\b))"
    r"\s*+" + _ITEM_N
)
_ITEM_LIMIT_RE: Final = _p(
    r"(?:context[ _](?:length|window|size|limit)"
    # "This model context is limited to L tokens, but this request needs P input tokens + C
    # output tokens" (ferrum-infer-rs)
    r"|context (?:is |was )?limited to"
    r"|max(?:imum)?(?: model)? (?:context |sequence |total )?(?:length|len)|max_seq_len"
    r"|max_model_len|max_num_tokens|max_kv_size|context window limit|max_context_tokens"
    r"|kv_capacity|number of tokens per request|(?:(?:server|model)'?s|effective) total token"
    r" limit"
    # ("... together they exceed this model's context of 8192")
    r"|exceed (?:the |this |its )?(?:model'?s? )?context of)"
    r"(?: of (?=[\w.\-]*[a-z])[\w.\-]+)?\D{0,16}?"
    + _ITEM_N
    + r"|(?:<=|must be <=|should not exceed|cannot exceed|>|(?:must|should) be less than or"
    r" equal to)\s*+\(?+\s*+(?:[a-z_]++\s*+)?+\(?+"
    + _ITEM_N
    # (", above L." ending its sentence, onnx-genai-server's window; not "above 8192 free
    # blocks" or "above max_prefill_tokens 4096")
    + r"|, above "
    + _ITEM_N
    + r"(?=\s*+(?:[.;]|$))"
    + r"|total length should be \[1, "
    + _ITEM_N
    + r"\]"
)
# The prompt and its output reservation named together as what exceeds the window ("Prompt +
# generated tokens exceeds max context length of 8192", "input and maximum output tokens (N)
# exceeded this model context window limit (L)", "prompt+generation exceeded the service
# limit"): read by ``_summed`` with the generic rule's excess and limit words, the output's
# own words (``_SUM_OUTPUT_RE``) set aside.
_SUM_SUBJECT_RE: Final = _p(
    r"\b(?:prompt|input)(?: tokens?| length| token len)?\s*(?:\+|and|plus)\s*(?:the )?"
    r"(?:max(?:imum)?[ _]?)?(?:output|generat\w*|prediction|completion|max_(?:new_)?tokens"
    r"|new tokens)"
)
# ... and the sum it states, prompt first as its subject names them: "1200 + 200000 > 200000"
_SUM_COUNTS_RE: Final = _p(r"(?P<real>{N}) ?\+ ?(?P<comp>{N}) ?>=? ?(?P<max>{N})")
_SUM_OUTPUT_RE: Final = _p(
    r"max_(?:new_)?tokens|output tokens?|maximum output|completion tokens?|generat\w*"
)
# A prompt-side subject that is "too long" (or has too many tokens) needs no stated limit.
_GEN_TOO_LONG_RE: Final = _p(
    r"\b(?:prompt|input|conversation|history|messages)\b.{0,40}?\btoo (?:long|big|large)\b"
    r"|\buser message is too long\b|\btoo much (?:input|context|text)\b"
    r"|too many (?:\w+ )?tokens"
)
# ... unless hedged: "The conversation may be too long or contain unsupported content" (a
# Kiro relay's guess at an upstream's malformed-request error) is a suspect, which a probe
# settles, not an overflow
_GEN_HEDGE_RE: Final = _p(
    r"\b(?:(?:may|might|could)(?: also)?(?: have)? be(?:en)?|seems|appears to be|possibly"
    r"|perhaps|maybe|probably|likely) too"
    r" (?:long|big|large)\b"
)
# Output limits, byte or media sizes, request shapes: never a prompt that fits after a trim.
# The output's part first, the rest after (``_GEN_SHAPE_EXCLUDE``).
_GEN_OUTPUT_EXCLUDE: Final = (
    r"max_total_tokens|max tokens (?:must|should|cannot|is|are)\b"
    r"|max(?:imum)? output|max_length|output tokens?|completion tokens?|\bn(?:um)?_predict\b"
    r"|maximum tokens you requested|"
    + _MAX_TOKENS_KEY
    + "|"
    + _GENERATING
    # "Max tokens exceeds model's max length" (Xinference), "Max tokens exceeded." (albert-api):
    # the output reservation, not the prompt; "(prompt: P + max: C)", a sum that holds it
    + r"|max tokens exceed|\+ max: \d"
)
_GEN_SHAPE_EXCLUDE: Final = (
    r"\bbytes?\b|\b[kmg]i?b\b|\d ?[kmg]i?b\b|megabytes|\bjson\b"
    r"|image|audio|video|file|attachment|document|pdf"
    # a picture's size, in pixels ("input size exceed limit 2048x2048,current
    # input:(1080,2376)": ModelScope's screenshot limit), not a model's "8x7b" nor a
    # product spaced as arithmetic ("32 x 1024")
    r"|\b\d{2,}[x\u00d7]\d{2,}\b|\bpixels?\b"
    # (a payload measured in tokens is the prompt: "Payload too large: 9702 tokens exceeds
    # available 5530", "Payload Too Large: System prompt alone exceeds available tokens
    # (6120 > 5530)", herrbasan's LLM-Gateway)
    r"|payload(?![^.;]{0,60}?(?:\d tokens\b|\btokens \(\d))"
    r"|request body|body size|string too long|expected a string|array too long"
    # (a tool's input counted in the prompt is not a tool limit: "3555 of tool input"; a
    # count of elements: "'input' array is too large, must be less than 2048 elements",
    # "`input` array length 300 exceeds the per-request cap of 256")
    r"|\barray length\b"
    r"|\bitems?\b|\belements\b|(?<!of )\btools?\b|function|schema"
    r"|stop (?:sequences?|tokens?|words?)"
    # the number of choices ("n=32 which exceeds the maximum", "The n 256 exceeds the
    # maximum supported choices")
    r"|\bn\b must|\bn ?= ?\d|\bchoices\b"
    # a cap on the number of messages, not on their size ("messages array too large (300
    # messages); maximum is 256 messages")
    r"|\b(?:message count|number of messages)\b[^.;]{0,40}?\b(?:exceed|more than|greater than"
    r"|over|above|limit)|\bmessages? array too (?:large|long|big)\b|\bmaximum is \d+ messages\b"
    # ... or of prompts ("prompt list length 2000 exceeds the maximum allowed count of 1024",
    # "reached the maximum prompt size of 50 prompts per project")
    r"|\bprompt list\b|\b\d+ prompts\b"
    # (an embeddings endpoint or model; not a setting's name: MindIE's "maxPositionEmbeddings")
    r"|(?<![a-z_])embedding|\bbatch(?:es)?\b"
    # time limits ("context deadline exceeded" of Go servers, a cancelled request's
    # "context canceled") and per-period quotas
    r"|deadline|context cancell?ed|time ?out|timed out|expir|\b(?:daily|hourly|monthly|today)\b"
    r"|\b(?:for|per|this|each) (?:the )?(?:day|hour|month|minute)\b"
    r"|slow down|short (?:period|time)|try again (?:later|in\b)|retry after"
    # an operating system's command line a CLI bridge passes the prompt on (cursor-api-proxy)
    r"|\bcommand[ -]line (?:length|limit|exceeds|is too long|too long)\b"
    # a field's own limit (a system prompt's characters, metadata, a description), not the window
    r"|(?<![\d,])\d[\d,]*+ (?:characters?|chars)\b|\bfields?\b|metadata|\bdescriptions?\b"
    # a nesting depth ("token estimate exceeds the maximum depth of 128"), not a length (a
    # model's name may hold the word: "depth-anything")
    r"|\b(?:max(?:imum)?|nesting|recursion) depth\b|\bdepth (?:limit|exceeded)\b"
    # a machine's memory, not the window ("A context size of 24 is too large for the
    # available RAM (including swap)": node-llama-cpp sizing a context it cannot allocate)
    r"|\bavailable (?:ram|vram|system memory)\b"
    # a count of a loop's rounds ("Compaction exceeded its summary pass limit; original
    # context preserved": mlx-vlm), not a length
    r"|\b(?:pass|iteration|step|round|loop|retry|attempt)s? (?:limit|count)\b"
    r"|\bmax(?:imum)? (?:number of )?(?:passes|iterations|steps|rounds|retries|attempts)\b"
)
_GEN_EXCLUDE_RE: Final = _p(_GEN_OUTPUT_EXCLUDE + "|" + _GEN_SHAPE_EXCLUDE)
_GEN_SHAPE_EXCLUDE_RE: Final = _p(_GEN_SHAPE_EXCLUDE)
# The window named, as a plain client error names it beside an output setting ("prompt has
# P tokens, and you have set the `max_tokens` to C, but the maximum model length supported
# is L"): which of the two is over, a probe tells (``_plainly_trimmable``).
_WINDOW_NAME_RE: Final = _p(
    _WINDOW_NAMES + r"|\bmax_model_len\b|\bmax(?:imum)? model (?:context )?(?:length|len)\b"
)
# The generic rule for Chinese wordings (DashScope, Qianfan, Spark, Zhipu, relays such as
# one-api / new-api): a prompt-side subject (上下文 context, 输入 input, 提示 prompt, 对话
# conversation, 消息 messages, 长度 length, 字数 characters, token) and an excess (超过 / 超出
# exceed, 超长 / 过长 / 太长 too long, 超限 over the limit, 太多 too many). Output, media and
# size wordings never qualify; quota, rate, auth and safety words are in ``_NEVER_WORDS``.
_GEN_ZH_EXCESS_RE: Final = _p(r"超过|超出|超长|超限|过长|太长|太多")
_GEN_ZH_SUBJECT_RE: Final = _p(r"上下文|输入|提示|对话|消息|长度|字数|token|prompt")
_GEN_ZH_EXCLUDE_RE: Final = _p(
    r"输出|生成|回复|回答|图片|图像|音频|视频|文件|附件|字节|大小|体积|请求体|批量|数组|工具|函数"
    # later (请稍后重试: retry later), per period and usage: a quota, not the window
    r"|稍后|今日|今天|每日|每天|当日|本日|本月|每月|每小时|每秒|用量|使用量"
)
# Words of errors that are never overflows, whatever else they say: billing, auth and
# content safety (rate limits and quotas are ``_RATE_RE``). Plain substrings of the
# lower-cased message: a case-insensitive alternation this long costs ~70 us a message.
_NEVER_WORDS: Final = (
    # a prompt cap the client set itself (EPAM DIAL's max_prompt_tokens: what is left when
    # it has dropped every turn it may is the system messages, which no trim can shorten)
    "requested maximum prompt tokens",
    # Anthropic's output cap, "max_tokens: N > M, which is the maximum allowed number of
    # output tokens for <model>": no trim helps, even where a gateway calls it a context
    # overflow (gaud's "Context window exceeded" with context_length_exceeded)
    "maximum allowed number of output tokens",
    # OpenAI's cap on one string's characters (string_above_max_length) by its words, where
    # a relay dropped the code and typed it an overflow (LiteLLM's ContextWindowExceededError)
    "expected a string with maximum length",
    "billing",
    "usage limit",  # a plan's allowance (LangDB's "Token usage limit exceeded")
    "credit balance",
    "insufficient balance",
    "insufficient funds",
    "insufficient credit",
    "payment",
    "arrears",
    "afford",
    "more credits",
    "monthly limit",
    # what a plan, a tier or an account allows ("exceeds the limit in your plan"), not what
    # a window holds: no overflow the corpus or the held-out set keeps says these
    "your plan",
    "your subscription",
    "your balance",
    "account balance",
    "free tier",
    "current tier",
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
    "pii detected",  # a privacy guard's refusal: a trim that passed it would hide why
    "personally identifiable",
    "responsible ai",
    "jailbreak",
    "data_inspection",
    "violat",
    "please wait",
    "wait before",
    # a budget that refills at a time ("Your limit will reset at Monday, ...": a plugin's
    # per-user token allowance); a window never resets (spaced: not "presets in", "resets
    # input", nor a conversation that "will reset when" a session ends)
    "will reset at",
    "will reset in",
    "will reset on",
    " resets at ",
    " resets in ",
    # the same in Chinese: quota, balance, arrears, top-up, rate and concurrency limits,
    # authorisation, keys, sensitive content, violations, moderation
    "额度",
    "限额",
    "余额",
    "配额",
    "欠费",
    "充值",
    "限流",
    "流控",
    "频率",
    "频繁",
    "并发",
    "每分钟",
    "访问量",
    "授权",
    "鉴权",
    "认证",
    "密钥",
    "敏感",
    "违规",
    "审核",
    "风控",
)
# A sentence of advice, after the one that states the error: what a client may do next.
# ``_never`` does not judge it, so an overflow's advice may name keys or rate limits
# (freellmapi: "The request is too large for every available candidate's context/token
# window. ... Add more API keys or wait for rate limits to reset."). Not "Try again in
# 20s" or "Retry after ...": waiting is how a rate limit is fixed, never an overflow.
_ADVICE_SENTENCE_RE: Final = re.compile(
    r"\s*(?:please\s+)?(?:add|enable|configure|consider|contact)\b", re.IGNORECASE
)
# ... unless it names a quota, a rate per period, credits, billing or a plan's tier
_ADVICE_TELLS_RE: Final = re.compile(
    r"quota|\bper (?:sec(?:ond)?|min(?:ute)?|hour|day)\b|\b(?:tpm|rpm|tpd|rpd)\b|credit"
    r"|billing|\btier\b|balance",
    re.IGNORECASE,
)
# A sentence after the first that tells the caller how to make the prompt fit ("Start a new
# chat or shorten the latest request/tool result", TensorSharp) ...
_REMEDY_SENTENCE_RE: Final = re.compile(
    r"\s*(?:please\s+)?(?:start a new|shorten|reduce|remove|delete|trim|compact"
    r"|summari[sz]e|split|clear)\b",
    re.IGNORECASE,
)
# ... where the tool results or calls it names are what to shorten, not what is over a
# limit of its own: the generic exclusions skip these words there (``_without_remedies``)
_REMEDY_NOUNS_RE: Final = re.compile(
    r"\b(?:tool|function)s?\b(?: (?:results?|calls?))?", re.IGNORECASE
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
    "toomanyrequests",
    "persecond",  # "TokensPerMinute", "RequestsPerDay"... lower-cased
    "perminute",
    "perhour",
    "perday",
    "throttl",
    "exhausted",
    "insufficient",
)

# Statuses (effective: HTTP or the code in the body) under which the generic rule may fire:
# an error body sent with 200; the usual refusals; 424 (Failed Dependency), how SageMaker
# endpoints and Huawei's MindIE server answer the model's own refusal; 500, how servers
# answer every exception a too-long prompt raises; and 502, how gateways relay their
# provider's refusal ("provider error: 输入内容超长，请缩短后重试"). Never 504, a timed-out
# upstream; a 503 or 507 only when it says nothing of waiting or load (``_unlisted``).
_GENERIC_STATUSES: Final = frozenset({200, 400, 413, 422, 424, 500, 502})

# llama.cpp's "input prompt is too big compared to KV size" (and its forks', llama-box):
# a 500 when a decode finds no KV slot, whoever filled the shared pool; only a 4xx means
# this prompt.
# llama-box's "decoding exceeds the available context size" is its KV-cache-full decode
# failure, sent to every slot in flight
_KV_SIZE_RE: Final = _p(
    r"input prompt is too big compared to kv size|decoding exceeds the available context size"
)
# llama.cpp and LM Studio's "Context size has been exceeded": a 4xx, or the 500 a
# decode gives when the prompt and its generation outgrow the context (an over-large
# request: llama.cpp issue 19774), also llama.cpp's "context shift cannot be used for shared
# prompt" (the same, for a request of several choices). A smaller prompt leaves the room;
# mid-stream, after output, nothing is an overflow anyway.
_CTX_SIZE_RE: Final = _p(
    r"context size has been exceeded|context shift cannot be used for shared prompt"
)
# A stated limit of 0 ("exceeds the limit of 0", "exceeds context size (0)": LocalAI's budget
# once its output reservation is taken): no prompt fits, whatever is dropped.
_ZERO_LIMIT_RE: Final = _p(
    r"\b(?:limit|maximum|max)\b(?: (?:is|of))?\W{0,3}0(?![\d.,])"
    r"|\bcontext(?: window)? (?:length|size)\b(?: (?:is|of))?[ :=(]{0,3}0(?![\d.,])"
)
# The room a server leaves for output, the window less the prompt, gone below zero (it
# derives the output setting when the request has none): "max_tokens must be at least 1,
# got -186" (vLLM), "max_new_tokens is -442" (rtp-llm), "`default_max_tokens` (-40205) must
# be greater than 0" (TensorRT-LLM); or said to be none: "Requested prompt(32762 tokens)
# leaves no room for generated tokens" (candle-vllm). Not -1, which clients send for "no
# limit" and servers refuse as it is ("max_tokens must be at least 0, got -1.").
_NO_ROOM_RE: Final = _p(
    r"\b(?:default_)?" + _MAX_TOKENS_KEY + r"`?\W{0,4}"
    r"(?:is|=|\(|must be at least 1, got)"
    r"\s*-(?!1\b)\d"
    r"|\b(?:prompt|input)\b[^.;]{0,60}?\bleaves? (?:no|0) (?:room|space|output|tokens?)\b"
)
# A sentence that names the context window as exceeded, whoever sends it: with it, a 403
# is an overflow too (Zed's cloud), as with a listed wording stating both counts.
# An output setting named before a strong sentence may be what exceeds the window ("Provided
# max_tokens (8192) exceeds context window size (4096)"), unless a prompt-side word is there
# too ("input length and max_tokens exceed the context window")
_OUTPUT_SETTING_RE: Final = _p(
    _MAX_TOKENS_KEY + r"|max(?:imum)?[ _-]?(?:output|completion|new)[ _-]?tokens|"
    r"\bmax tokens\b|maxoutputtokens|\bn?_?num_predict\b|\bn_predict\b"
)
# The prompt's side named as such, or the room it leaves ("max_tokens exceeds the remaining
# context window"), not the window's name ("context length") beside an output setting
_PROMPT_SIDE_RE: Final = _p(
    r"\b(?:prompt|input|messages?|conversation|history|remaining|left|available)\b"
    # ... or what remains of the window (eLLM's "requested max_tokens=4096, but only 1300
    # tokens remain in the context window"; not "tokens remain today")
    r"|\bremains? in (?:the )?context\b"
    # ... or its count key as what exceeds (mlxts's "Requested prompt_tokens P plus max_tokens
    # C exceeds this server's total token limit of L.")
    r"|(?<![a-z_])(?:prompt|input)_tokens\W{0,3}\d[\d,]*\W{0,3}(?:\+|plus\b|and\b)"
)
# (not a quoted key of an envelope printed inside the message: "{'message': ...")
_PROMPT_WORD_RE: Final = _p(
    r"(?<!['\"])\b(?:prompt|input|messages?|content|conversation|history|context)\b"
)
# The context's name and an exceeding verb in languages other than English, Russian and
# Chinese (``_STRONG_RE``); matched with Unicode word boundaries.
_CTX_INTL: Final = (
    r"\bcontext[oe]\b|\bkontext|\bcontesto\b|\bkontekst|コンテキスト|컨텍스트|ngữ cảnh"
)
_EXCEED_INTL: Final = (
    r"\bexced|\bexcède|\bexcéd|\bdépass|\bsuper[ao]\b|\bsuperad[oa]\b|\büberschr|\bprzekr"
    r"|超え|超過|초과|vượt quá"
    # too long: French, German, Spanish, Portuguese, Italian
    r"|\btrop longu?e?s?\b|\bzu lang\b|\bdemasiado larg[oa]s?\b|\bmuito long[oa]s?\b"
    r"|\btroppo lung(?:o|a|hi|he)\b"
)
# What a sentence names when its tokens are not the prompt's (``_STRONG_RE``'s "too many
# tokens and does not fit")
_NOT_PROMPT_PARTS: Final = (
    r"image|audio|video|frame|file|document|pdf|tool|schema|function|output|completion"
    r"|generat|reasoning|thinking"
)
_STRONG_RE: Final = _p(
    # (also as a code written into the text: "Last error: CONTEXT_LENGTH_EXCEEDED: ...")
    r"\bcontext(?:[ _-]?(?:window|length|size|limit))?[ _](?:is )?(?:exceeded|overflow)\b"
    # (a model's name may stand before it: "exceeds claude-opus-4-7 context window")
    r"|\bexceed(?:s|ed)? (?:the )?(?:model'?s? |(?=[\w.:/-]*?\d)[\w.:/-]++'?s? )?"
    r"(?:maximum |available )?context[ _-]?(?:window|length|size|limit)\b"
    # "Request body is too large for model context window" (GitHub Copilot's /v1/messages)
    r"|\btoo (?:long|large|big) for (?:the )?(?:model'?s? )?context[ _-]?(?:window|length|size)\b"
    # "has too many tokens and does not fit into the model's context window" (Voyage AI), in
    # a sentence that names no medium, tool or output ("The image has too many tokens and
    # does not fit", "Output tokens cannot fit")
    r"|(?:^|(?<=[.!?;:]\s))(?:(?!" + _NOT_PROMPT_PARTS + r")[^.;!?]){0,160}?"
    r"\btoo many tokens,? and (?:does not|doesn't|do not|don't|cannot|can't|will not|won't)"
    r" fit (?:in|into|within) (?:the |this )?(?:model'?s? )?context[ _-]?(?:window|length|size)\b"
    # Russian: "превышает контекст модели" (exceeds the model's context), "превышена длина
    # контекста" (the context length is exceeded)
    r"|(?u:превыш\w*\s+(?:\w+\s+){0,2}?контекст)"
    # Other languages: the context's name and an exceeding verb in one sentence, either
    # order: "excede el límite de contexto" (Spanish, Portuguese), "dépasse la limite de
    # contexte", "überschreitet das Kontextfenster", "supera il limite di contesto",
    # "przekracza limit kontekstu", "コンテキスト長を超えています", "컨텍스트 길이를
    # 초과했습니다", "vượt quá giới hạn ngữ cảnh"
    + f"|(?u:(?:{_CTX_INTL})[^.。!?！？\\n]{{0,40}}?(?:{_EXCEED_INTL})"
    + f"|(?:{_EXCEED_INTL})[^.。!?！？\\n]{{0,40}}?(?:{_CTX_INTL}))"
    # Chinese: "输入内容超长" (the input is too long), "上下文长度超出限制" (the context
    # length is over the limit), "输入内容超过模型单次上限" (the input is over the model's
    # per-request cap)
    r"|(?:输入|上下文)(?:内容|文本|长度)?"
    r"(?:超长|过长|太长|超出(?:了)?(?:模型)?(?:长度)?限制|超[出过](?:了)?模型(?:单次)?(?:长度)?上限)"
)

# An input limit stated below zero: the window less an output reservation larger than it,
# which no prompt fits ("larger than the model input length limit -80"). Not a model's name
# ("qwen-max-2025-01-25") nor, in a limit, a -1 that means unlimited.
_NEGATIVE_LIMIT_RE: Final = _p(
    r"(?<![\w-])(?:input|prompt|context)(?: length)? limit(?: is|:|=)? -(?:[2-9]|[1-9]\d+)\b"
    # vLLM 0.10.2-0.13 on /v1/completions: "This model's maximum context length is -7232
    # tokens", the window less a max_tokens larger than it (-1 too: a stated window, not a
    # setting)
    r"|\bmaximum context length is -[1-9]\d*\b"
)

# A server's own setting stated over the model's window, which every request fails alike
# whatever its length (rapid-mlx: "--context-length 262144 exceeds this model's declared
# 131072-token context window. Restart the server without --context-length, ..."): a
# command-line flag and its value, then the excess.
_SETTING_OVER_WINDOW_RE: Final = _p(
    r"(?<![\w-])--[a-z][\w-]*[= ]\d[\d,]*\s+(?:exceeds|is (?:larger|greater|more) than)\b"
)

# A count in a recognised wording that states exactly two (``_two_counts``), unless the
# wording adds or multiplies counts (``_SUM_RE``).
_COUNT_RE: Final = re.compile(_COUNT_N, re.ASCII)  # "上限4096": a count beside Chinese text
# The window a recognised wording states alone, as its only count: "exceed model limit
# (10000000 tokens)", "the maximum context length is 8192 tokens", "Token length exceeds
# max length of 32768"
_LIMIT_ONLY_RE: Final = _p(
    # (not a cap in characters or bytes: "input characters limit is 256000", Qianfan's)
    r"(?<!characters )(?<!character )(?<!chars )(?<!char )(?<!bytes )(?<!byte )"
    r"\b(?:limit|maximum|max|window|context (?:length|size)|max(?:imum)? length"
    # a setting's name: "prepared prompt exceeds Engine max_context 196608" (ninfer-serve)
    r"|max_(?:context|ctx|model_len|seq_len)(?:_?(?:length|len|size|tokens))?)\b"
    r"(?:\s+(?:is|of))?\W{0,3}"
    + _COUNT_N
    + r"(?:\s*tokens\b|\.?\s*$)"  # "... tokens", or the message's last word ("Model limit: 4096.")
)
# ... or in parentheses right after the window's name: "exceeds context window size (4096)"
_LIMIT_PAREN_RE: Final = _p(
    r"\b(?:context (?:window )?(?:length|size)|max(?:imum)? sequence length(?: for this model)?)"
    r" \((\d+(?:,\d{3})*)\)"
)
# A sum or a product of counts ("1999 + 50 > 2048", tabbyAPI's "Total cache allocated is
# 32 * 256 = 8192 tokens"): its parts are neither a prompt nor a window.
_SUM_RE: Final = re.compile(r"\d\)?\s*[+*×]\s*\(?\d")
# ... and not an error's own code or status ("code": 400 in JSON quoted inside a message,
# "HTTP 400 (invalid_request_error: ...)" as the OpenAI .NET SDK's exception starts)
_CODE_COUNT_RE: Final = _p(r"(?:code|status|http)\W{0,4}$")
# ... nor an HTTP status a message quotes ("400 Bad Request: Too many input tokens ...")
_STATUS_COUNT_RE: Final = _p(
    r"[ \t]*\(?(?:bad ?request|unprocessable|payload too large|request entity too large"
    r"|content too large|internal server error|bad gateway)\b"
)
# ... nor a size in characters or bytes beside the token counts ("estimated ~41666 tokens
# (from 125000 chars) exceeds context window of 32768 tokens")
_SIZE_COUNT_RE: Final = _p(r"[ \t]*(?:chars?|characters?|bytes?)\b")
# Counts a recognised wording states only as "N > M", "N >= M" or "N/M" ("Token sequence length is
# longer than the specified maximum sequence length for this model (1336 > 512)", SGLang's
# "After expanding len(...)=5192 => 6153 >= 5489"), the limit perhaps by its name ("length=9120
# > budget=7936", EasyDeL's eSurge), not inside a sum ("3500 + 1024 > 4096").
_PAIR_RE: Final = _p(
    r"(?<![\w.,+\-/])(?P<real>\d[\d,]*+)\s*(?:>=?\s*(?:[a-z_]+ ?= ?)?|/\s*)(?P<max>\d[\d,]*+)"
    r"(?![\w.]\d|\s*[-+]|/)"
)

# --------------------------------------------------------------------------- JSON keys

_TEXT_KEYS: Final = (
    "message",
    "Message",  # AWS services' {"ErrorCode"/"__type": ..., "Message": ...}
    "msg",
    "detail",
    "details",  # a string beside a generic message ("Chat completion failed")
    "error",
    "error_message",
    "errorMessage",
    "error_msg",
    "raw",
    "description",  # Writer: {"errors": [{"description": ...}]}
    "cause",  # lightspeed-stack: {"detail": {"response": "Prompt is too long", "cause": ...}}
    # Zylon PrivateGPT: {"message": "Request Too Large", "detail": {"code", "explanation"}}
    "explanation",
)
# Keys whose strings echo the request, never the server's own words (``_stray_texts``):
# a validation error's offending value and location, parameters, ids, the model's name.
_ECHO_KEYS: Final = frozenset(
    {
        "input",
        "loc",
        "ctx",
        "param",
        "params",
        "body",
        "request",
        "messages",
        "prompt",
        "content",
        "choices",
        "id",
        "request_id",
        "requestId",
        "model",
        "url",
        "path",
        "traceback",
        "stack",
    }
)
_CODE_KEYS: Final = (
    "type",
    "code",
    "status",
    "reason",
    "error_type",
    "errorType",
    "__type",
    "code_str",  # ollamalegion's "prompt_exceeds_n_ctx"
    "kind",  # SI-LLM-Gateway's {"error": {"code": "model_not_found", "kind": ...}}
    "error_code_str",  # rtp-llm's "511_LONG_PROMPT_ERROR"
    # DeepSeek web's hint error as DanyAPI relays it: {"message": "Content is too long. ...",
    # "finish_reason": "input_exceeds_limit"} (an error object's own; a choice's is no code)
    "finish_reason",
)
_STATUS_KEYS: Final = ("http_status_code", "status_code", "statusCode")
# ("status" as an object: NAVER CLOVA Studio's {"status": {"code", "message"}, "result"})
_NEST_KEYS: Final = (
    "error",
    "message",  # an object where the message goes (ChatGPT-to-API's {"code", "message"})
    "metadata",
    "details",
    "errors",
    "innererror",
    # SI-LLM-Gateway's {"error": {..., "gateway_debug": {"attempts": [{"reason": <the
    # upstream's answer>}]}}}: every candidate's own words, the last one's kind beside them
    "gateway_debug",
    "attempts",
    # llm-failover-proxy's {"error": {..., "proxy": {"attempts": [{"status", "message"}]}}}
    "proxy",
    "detail",
    "status",
)

# --------------------------------------------------------------------------- SSE events

# SSE events that precede the first output without carrying any (skipped, not decisive).
# A tuple, not a set: an event's "type" may be any JSON value, and a list is unhashable.
_LIFECYCLE_TYPES: Final = (
    "response.created",
    "response.in_progress",
    "response.queued",
    "ping",
    "message_start",
)

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

# --------------------------------------------------------------------------- suspects

# An error no reader recognises whose words point at the prompt's size (``detect_suspect``):
# a probe, a resend trimmed to 2/3 (then 4/9), tells whether it is an overflow. Broader than the
# generic rule: any size subject beside an excess, under a status a too-long prompt gets
# (never 502-599: a gateway's, an overloaded or a timed-out server's answer, which a resend
# may pass by chance, and a probe would take that for a fix).
_SUSPECT_STATUSES: Final = frozenset({400, 413, 422, 424, 500})
# A client error whatever its words is a plain suspect (``detect_suspect(plain=True)``):
# not 424 and 500, which pass on whatever went wrong upstream, a passing trouble a
# smaller resend may well get past
_PLAIN_STATUSES: Final = frozenset({400, 413, 422})
_SUSPECT_SUBJECT_RE: Final = _p(
    r"\b(?:context|prompt|input|tokens?|length|len|text|messages?|conversation|history"
    r"|sequence|request|content)\b|上下文|输入|提示|对话|消息|长度|字数|内容|文本"
)
# A 413 that says the request or its payload is too large: a byte limit, which a trim of the
# history may well bring the body under, so it is worth the probe too; so is one that asks
# for the context to be compacted (headroom's compressor, refusing a request too large or
# too slow to compress: "... on a 504566-byte request — please compact context and retry.")
_SUSPECT_413_RE: Final = _p(
    r"\b(?:payload|request(?: body| entity)?|body|entity)\b.{0,40}?\b(?:too (?:large|big)|exceed)"
    r"|\bcompact (?:the |your )?(?:context|conversation|history)\b"
)
# A wording's key blanks what changes from one answer to the next: ids (a run of letters and
# digits mixing both, 8 or more) and numbers.
_SUSPECT_ID_RE: Final = re.compile(
    r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[^\W\d_])[\w-]{8,}",
    re.ASCII,  # not a run of CJK text
)
_SUSPECT_NUMBER_RE: Final = re.compile(r"\d+(?:,\d{3})*")
_SUSPECT_KEY_CHARS: Final = 2048  # of the messages, joined: a wording's key at most this long
