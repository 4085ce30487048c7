"""The model catalog: from a request's model string to the model's context window.

The budget of a request (docs/trimming.md, "Budget") starts from the context window of
its model. The window is looked up here: user entries from the config file (``models:``) first, then
the built-in catalog below, first match wins. An entry's ``name`` is also the value
of the Prometheus ``model`` label, so the set of names is small and fixed; a model
that matches nothing gets ``None`` (the caller uses the configured fallback and the
label ``other``).

Matching
    ``match`` is an fnmatch-style glob (``*``, ``?``, ``[seq]``, ``[!seq]``), matched
    case-insensitively against the whole model string. Several globs may be given
    in one entry, separated by ``|`` (``"gpt-4o*|chatgpt-4o*"``); ``|`` never occurs
    in a model name.

Normalisation
    People reach a model through gateways that decorate its name. Before the
    built-in entries are tried the string is lower-cased and reduced to its last
    ``/``-separated segment (``openai/gpt-4o``, ``models/gemini-1.5-pro``,
    ``projects/p/locations/l/publishers/google/models/gemini-2.5-pro``, Bedrock ARNs,
    ``meta-llama/Llama-3.1-8B-Instruct``), a Gemini method suffix is dropped
    (``gemini-2.5-pro:generateContent``) and a Bedrock region/vendor prefix is
    dropped (``us.anthropic.claude-...``, ``meta.llama3-1-70b-instruct-v1:0``; a
    ``deepseek.`` vendor prefix becomes ``deepseek-``). Dated snapshots, Bedrock
    ``-v1:0`` suffixes, Vertex ``@20241022`` versions and Ollama ``:8b`` tags are
    left in place: the globs end in ``*`` and absorb them. User entries are tried
    against the raw (lower-cased) string first and then against the normalised one,
    so a user can pin ``openrouter-org/some-model`` without it being rewritten.

Speed
    This runs on every request. The globs are compiled once (one regex per entry,
    the built-in ones at import time) and results, misses included, are memoised in
    a bounded dict (default 4096 model strings, oldest evicted first; strings longer
    than 256 characters are resolved but never cached), so a client sending made-up
    model names cannot grow memory. A string longer than 1024 characters is no model
    name and is unknown without being matched, so it cannot cost CPU either.

Figures
    ``context_window`` is the model's window, in tokens. Every figure
    carries a comment naming the page it comes from. Where the serving provider's
    figure differs from other sources, the serving provider's documented figure is
    used and the comment says so. Where a provider documents a total window with a
    separate, smaller input cap (the GPT-5 family: 400,000 total, 128,000 output,
    at most 272,000 input), the window is the total and ``max_input`` the cap: the
    budget is the window less the request's output limit, never above the cap.
    Open-weight models get the window their model card documents without opt-in
    extensions such as YaRN (what a default deployment serves); a deployment that
    serves more or less is configured with a user entry.

Betas
    Some windows are opt-in per request: Claude Sonnet 4 and 4.5 take 1,000,000 tokens
    when the request's ``anthropic-beta`` header names ``context-1m-2025-08-07`` and
    200,000 without it. An entry lists such tokens in ``betas`` (token -> window);
    ``CatalogEntry.window_for(anthropic_beta_tokens(header))`` is the window of one
    request. ``lookup`` itself stays keyed by the model string alone.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "ANTHROPIC_CONTEXT_1M_BETA",
    "BUILTIN_CATALOG",
    "DEFAULT_CACHE_SIZE",
    "MAX_CACHED_MODEL_LEN",
    "MAX_MODEL_LEN",
    "Catalog",
    "CatalogEntry",
    "anthropic_beta_tokens",
    "normalize_model",
]

DEFAULT_CACHE_SIZE = 4096
MAX_CACHED_MODEL_LEN = 256  # longer strings are resolved but never memoised
MAX_MODEL_LEN = 1024  # longer strings are no model name: unknown, without matching


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One catalog line: a label, the glob(s) it answers to, and the model's window."""

    name: str  # the Prometheus `model` label value, e.g. "gpt-4o"; a small, fixed set
    match: str  # fnmatch-style glob(s), case-insensitive, several separated by "|"
    context_window: int  # the model's context window in tokens (input + output)
    # A smaller cap on the input alone, where the provider documents one (GPT-5:
    # 400,000 total, at most 272,000 input): the budget never exceeds it.
    max_input: int | None = None
    # Opt-in windows: (beta token, window) pairs. A request that names the token in its
    # `anthropic-beta` header gets that window instead of `context_window` (Claude
    # Sonnet 4 / 4.5: `context-1m-2025-08-07` -> 1,000,000). Tokens are lower case.
    betas: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("catalog entry name must not be empty")
        if not _glob_parts(self.match):
            raise ValueError(f"catalog entry {self.name!r}: match must not be empty")
        if isinstance(self.context_window, bool) or self.context_window <= 0:
            raise ValueError(
                f"catalog entry {self.name!r}: context_window must be a positive integer"
            )
        for token, window in self.betas:
            if not token or token != token.strip().lower() or "," in token or " " in token:
                raise ValueError(
                    f"catalog entry {self.name!r}: beta token {token!r} must be one "
                    "lower-case header token"
                )
            if isinstance(window, bool) or window <= 0:
                raise ValueError(
                    f"catalog entry {self.name!r}: beta {token!r} window must be a positive integer"
                )

    def window_for(self, beta_tokens: Iterable[str] = ()) -> int:
        """The window of a request that sent ``beta_tokens`` (see ``anthropic_beta_tokens``).

        ``context_window``, or the largest window of a beta the request names; unknown
        tokens are ignored. Tokens are compared stripped and lower-cased; a ``frozenset``
        is taken as already normalised (what ``anthropic_beta_tokens`` returns).
        """
        if not self.betas:
            return self.context_window
        sent = (
            beta_tokens  # already normalised by anthropic_beta_tokens
            if isinstance(beta_tokens, frozenset)
            else {token.strip().lower() for token in beta_tokens}
        )
        window = self.context_window
        for token, beta_window in self.betas:
            if token in sent and beta_window > window:
                window = beta_window
        return window


ANTHROPIC_CONTEXT_1M_BETA = "context-1m-2025-08-07"

# Bounds on what a client can make us parse: an `anthropic-beta` value is a short list.
_MAX_BETA_HEADER_LEN = 4096
_MAX_BETA_TOKENS = 64


def anthropic_beta_tokens(*header_values: str | None) -> frozenset[str]:
    """The beta tokens of one or more ``anthropic-beta`` header values.

    The header is a comma-separated list (``"context-1m-2025-08-07,
    interleaved-thinking-2025-05-14"``) and may be sent more than once; each value is
    split on commas, tokens are stripped of whitespace and lower-cased, empty ones are
    dropped. A value longer than 4096 characters is ignored, and at most 64 tokens are
    kept, so a client cannot make this cost more than a short header does.
    """
    tokens: set[str] = set()
    for value in header_values:
        if not value or len(value) > _MAX_BETA_HEADER_LEN:
            continue
        for part in value.split(","):
            token = part.strip().lower()
            if token and len(tokens) < _MAX_BETA_TOKENS:
                tokens.add(token)
    return frozenset(tokens)


def _glob_parts(match: str) -> list[str]:
    return [part.strip() for part in match.split("|") if part.strip()]


def _compile(match: str) -> re.Pattern[str]:
    """One regex for all the globs of an entry, anchored at both ends by ``re.match``."""
    return re.compile(
        "|".join(fnmatch.translate(part.lower()) for part in _glob_parts(match)),
        re.IGNORECASE,
    )


_GEMINI_METHOD = re.compile(r":(?:generatecontent|streamgeneratecontent|counttokens)$")
_BEDROCK_PREFIX = re.compile(
    r"^(?:(?:us-gov|us|eu|apac|ap|jp|au|ca|global)\.)?"
    r"(anthropic|meta|mistral|amazon|cohere|ai21|openai|qwen|google|xai|writer|deepseek)\."
)


def normalize_model(model: str) -> str:
    """The form of ``model`` that the built-in globs are written against (see module doc)."""
    name = model.strip().lower()
    if "/" in name:
        tail = name.rsplit("/", 1)[1]
        if tail:
            name = tail
    name = _GEMINI_METHOD.sub("", name)
    prefix = _BEDROCK_PREFIX.match(name)
    if prefix is not None:
        vendor = prefix.group(1)
        # Bedrock's DeepSeek ids ("deepseek.r1-v1:0") carry the family only in the prefix.
        name = ("deepseek-" if vendor == "deepseek" else "") + name[prefix.end() :]
    return name


def _e(
    name: str,
    match: str,
    context_window: int,
    max_input: int | None = None,
    betas: tuple[tuple[str, int], ...] = (),
) -> CatalogEntry:
    return CatalogEntry(
        name=name, match=match, context_window=context_window, max_input=max_input, betas=betas
    )


# Ordered: within a family the more specific globs come first, and the first match wins.
# OpenAI pages: https://developers.openai.com/api/docs/models/<id> (was platform.openai.com).
BUILTIN_CATALOG: tuple[CatalogEntry, ...] = (
    # ---------------------------------------------------------------- OpenAI: GPT-6 family
    # Sol / Terra / Luna / Astra tiers and their snapshots: "1,050,000 context window",
    # "922,000 max input tokens", "128,000 max output tokens". The -cyber, -healthcare,
    # -law variants get their base model's figures (no page of their own was found).
    # gpt-6.2-sol is the Codex CLI default (0.171.0: first listed model of its bundled
    # catalog); Codex itself compacts at its own, smaller window (500,000).
    # https://developers.openai.com/api/docs/models/gpt-6.2-sol
    _e("gpt-6.2", "gpt-6.2*", 1_050_000, max_input=922_000),
    # https://developers.openai.com/api/docs/models/gpt-6.1-terra (gpt-6.1-sol: same figures,
    # https://docs.cloud.google.com/gemini-enterprise-agent-platform/models/partner-models/openai/gpt-6-1-sol)
    _e("gpt-6.1", "gpt-6.1*", 1_050_000, max_input=922_000),
    # gpt-6-sol, gpt-6-luna, gpt-6-astra: 1,050,000 window, 128,000 output -> 922,000 input.
    # https://developers.openai.com/api/docs/models/gpt-6-sol
    _e("gpt-6", "gpt-6|gpt-6-*|gpt-6.*", 1_050_000, max_input=922_000),
    # ---------------------------------------------------------------- OpenAI: GPT-5 family
    # gpt-5-chat-latest, gpt-5.1-chat-latest, ...: 128,000 window, 16,384 output.
    # https://developers.openai.com/api/docs/models/gpt-5-chat-latest
    _e("gpt-5-chat", "gpt-5*-chat*", 128_000),
    # gpt-5.3-codex-spark: 128,000 (Codex research preview; figure from the Codex model
    # catalog, not an API model page -- see https://openai.com/index/introducing-gpt-5-3-codex/)
    _e("gpt-5.3-codex-spark", "gpt-5*-spark*", 128_000),
    # GPT-5.6 Sol/Terra/Luna: 1,050,000 total, 128,000 output -> 922,000 input.
    # https://developers.openai.com/api/docs/models/gpt-5.6-sol
    _e("gpt-5.6", "gpt-5.6*", 1_050_000, max_input=922_000),
    # gpt-5.5 / gpt-5.5-pro: 1,050,000 total, 128,000 output -> 922,000 input ("922K input").
    # https://developers.openai.com/api/docs/models/gpt-5.5 (one gateway lists 272K output)
    _e("gpt-5.5", "gpt-5.5*", 1_050_000, max_input=922_000),
    # gpt-5.4-mini / -nano: 400,000 total, 128,000 output -> 272,000 input.
    # https://developers.openai.com/api/docs/models/gpt-5.4-mini
    _e("gpt-5.4-mini", "gpt-5.4-mini*", 400_000, max_input=272_000),
    # https://developers.openai.com/api/docs/models/gpt-5.4-nano
    _e("gpt-5.4-nano", "gpt-5.4-nano*", 400_000, max_input=272_000),
    # gpt-5.4 / gpt-5.4-pro: 1,050,000 total, 128,000 output -> 922,000 input.
    # https://developers.openai.com/api/docs/models/gpt-5.4
    _e("gpt-5.4", "gpt-5.4*", 1_050_000, max_input=922_000),
    # gpt-5.3-codex: 400,000 total, 128,000 output -> 272,000 input.
    # https://developers.openai.com/api/docs/models/gpt-5.3-codex
    _e("gpt-5.3", "gpt-5.3*", 400_000, max_input=272_000),
    # gpt-5.2, -pro, -codex: 400,000 total, 128,000 output -> 272,000 input.
    # https://developers.openai.com/api/docs/models/gpt-5.2
    _e("gpt-5.2", "gpt-5.2*", 400_000, max_input=272_000),
    # gpt-5.1, -codex, -codex-mini, -codex-max: 400,000 total, 128,000 output -> 272,000.
    # https://developers.openai.com/api/docs/models/gpt-5.1
    _e("gpt-5.1", "gpt-5.1*", 400_000, max_input=272_000),
    # gpt-5-mini: 400,000 total, 128,000 output -> 272,000 input.
    # https://developers.openai.com/api/docs/models/gpt-5-mini
    _e("gpt-5-mini", "gpt-5-mini*", 400_000, max_input=272_000),
    # https://developers.openai.com/api/docs/models/gpt-5-nano
    _e("gpt-5-nano", "gpt-5-nano*", 400_000, max_input=272_000),
    # gpt-5, gpt-5-codex, gpt-5-pro: "400,000 context window, 128,000 max output"; the API
    # caps input at 272,000 ("Input tokens exceed the configured limit of 272,000 tokens").
    # https://developers.openai.com/api/docs/models/gpt-5 and
    # https://openai.com/index/introducing-gpt-5-for-developers/
    _e("gpt-5", "gpt-5|gpt-5-*|gpt-5.*", 400_000, max_input=272_000),
    # ------------------------------------------------------------ OpenAI: GPT-4.x, GPT-3.5
    # GPT-4.1 family: 1,047,576. https://developers.openai.com/api/docs/models/gpt-4.1-mini
    _e("gpt-4.1-mini", "gpt-4.1-mini*", 1_047_576),
    # https://developers.openai.com/api/docs/models/gpt-4.1-nano
    _e("gpt-4.1-nano", "gpt-4.1-nano*", 1_047_576),
    # https://developers.openai.com/api/docs/models/gpt-4.1
    _e("gpt-4.1", "gpt-4.1*", 1_047_576),
    # 128,000 window, 16,384 output. https://developers.openai.com/api/docs/models/gpt-4o-mini
    _e("gpt-4o-mini", "gpt-4o-mini*", 128_000),
    # gpt-audio, gpt-audio-mini and their snapshots: "128,000 context window", 16,384 output.
    # https://developers.openai.com/api/docs/models/gpt-audio-mini
    _e("gpt-audio", "gpt-audio*", 128_000),
    # gpt-4o, its snapshots and chatgpt-4o-latest: 128,000.
    # https://developers.openai.com/api/docs/models/gpt-4o
    _e("gpt-4o", "gpt-4o*|chatgpt-4o*", 128_000),
    # gpt-4-turbo and the gpt-4-*-preview snapshots: 128,000.
    # https://developers.openai.com/api/docs/models/gpt-4-turbo
    _e("gpt-4-turbo", "gpt-4-turbo*|gpt-4-*preview*", 128_000),
    # https://developers.openai.com/api/docs/models/gpt-4 (gpt-4-32k: 32,768)
    _e("gpt-4-32k", "gpt-4-32k*", 32_768),
    # gpt-4, gpt-4-0613, gpt-4-0314: 8,192. https://developers.openai.com/api/docs/models/gpt-4
    _e("gpt-4", "gpt-4|gpt-4-*", 8_192),
    # https://developers.openai.com/api/docs/models/gpt-3.5-turbo-instruct
    _e("gpt-3.5-turbo-instruct", "gpt-3.5-turbo-instruct*|gpt-35-turbo-instruct*", 4_096),
    # 16,385 (Azure spells it gpt-35-turbo).
    # https://developers.openai.com/api/docs/models/gpt-3.5-turbo
    _e("gpt-3.5-turbo", "gpt-3.5-turbo*|gpt-35-turbo*", 16_385),
    # ----------------------------------------------------------- OpenAI: reasoning models
    # https://developers.openai.com/api/docs/models/o1-mini (128,000)
    _e("o1-mini", "o1-mini*", 128_000),
    # https://developers.openai.com/api/docs/models/o1-preview (128,000)
    _e("o1-preview", "o1-preview*", 128_000),
    # o1, o1-pro: 200,000. https://developers.openai.com/api/docs/models/o1
    _e("o1", "o1|o1-*", 200_000),
    # https://developers.openai.com/api/docs/models/o3-mini (200,000)
    _e("o3-mini", "o3-mini*", 200_000),
    # o3, o3-pro, o3-deep-research: 200,000. https://developers.openai.com/api/docs/models/o3
    _e("o3", "o3|o3-*", 200_000),
    # o4-mini, o4-mini-deep-research: 200,000. https://developers.openai.com/api/docs/models/o4-mini
    _e("o4-mini", "o4-mini*", 200_000),
    # https://developers.openai.com/api/docs/models/codex-mini-latest (200,000)
    _e("codex-mini", "codex-mini*", 200_000),
    # ------------------------------------------------------------- OpenAI: open weights
    # 131,072 window. https://developers.openai.com/api/docs/models/gpt-oss-120b
    _e("gpt-oss-120b", "gpt-oss-120b*|gpt-oss:120b*", 131_072),
    # 131,072; Ollama's bare "gpt-oss" is the 20b.
    # https://developers.openai.com/api/docs/models/gpt-oss-20b
    _e("gpt-oss-20b", "gpt-oss-20b*|gpt-oss:20b*|gpt-oss|gpt-oss:latest", 131_072),
    # ------------------------------------------------------------------------ Anthropic
    # Claude's window counts input + output; "?" in the globs accepts "4-6" and "4.6".
    # 1M is native from the 4.6 generation on: the model pages state "Context window: 1M
    # tokens" (older overview tables said "200K / 1M (beta)" for Opus 4.6; the current page
    # is used). https://platform.claude.com/docs/en/models/opus-4-8/overview
    _e("claude-opus-4.8", "claude-opus-4?8*|claude-4?8-opus*", 1_000_000),
    # https://platform.claude.com/docs/en/models/opus-4-7/overview (Bedrock card: 1M too)
    _e("claude-opus-4.7", "claude-opus-4?7*|claude-4?7-opus*", 1_000_000),
    # https://platform.claude.com/docs/en/models/opus-4-6/overview
    _e("claude-opus-4.6", "claude-opus-4?6*|claude-4?6-opus*", 1_000_000),
    # https://platform.claude.com/docs/en/models/sonnet-4-6/overview
    _e("claude-sonnet-4.6", "claude-sonnet-4?6*|claude-4?6-sonnet*", 1_000_000),
    # 200K. https://platform.claude.com/docs/en/models/opus-4-5/overview
    _e("claude-opus-4.5", "claude-opus-4?5*|claude-4?5-opus*", 200_000),
    # 200K. https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-opus-4.1", "claude-opus-4?1*|claude-4?1-opus*", 200_000),
    # 200K. https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-opus-4", "claude-opus-4*|claude-4-opus*", 200_000),
    # 200K ("Context window: 200K tokens"); 1,000,000 with the `anthropic-beta:
    # context-1m-2025-08-07` header, the 1M beta of Sonnet 4 and 4.5 ("the Claude API can
    # take in 1M tokens with ... Sonnet 4.5 and Sonnet 4"; later models have 1M natively).
    # Claude Code 2.1.332 models them the same way (window 200,000, 1M with that beta).
    # https://platform.claude.com/docs/en/models/sonnet-4-5/overview and
    # https://support.claude.com/en/articles/8606395
    _e(
        "claude-sonnet-4.5",
        "claude-sonnet-4?5*|claude-4?5-sonnet*",
        200_000,
        betas=((ANTHROPIC_CONTEXT_1M_BETA, 1_000_000),),
    ),
    # 200K; 1,000,000 with the same beta header (the model it launched with, 2025-08).
    # https://support.claude.com/en/articles/8606395
    _e(
        "claude-sonnet-4",
        "claude-sonnet-4*|claude-4-sonnet*",
        200_000,
        betas=((ANTHROPIC_CONTEXT_1M_BETA, 1_000_000),),
    ),
    # 200K. https://platform.claude.com/docs/en/models/haiku-4-5/overview
    _e("claude-haiku-4.5", "claude-haiku-4?5*|claude-4?5-haiku*", 200_000),
    # Claude 3.x: 200K. https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-3.7-sonnet", "claude-3?7-sonnet*", 200_000),
    # https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-3.5-sonnet", "claude-3?5-sonnet*", 200_000),
    # https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-3.5-haiku", "claude-3?5-haiku*", 200_000),
    # https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-3-opus", "claude-3-opus*", 200_000),
    # https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-3-sonnet", "claude-3-sonnet*", 200_000),
    # https://platform.claude.com/docs/en/about-claude/models/overview
    _e("claude-3-haiku", "claude-3-haiku*", 200_000),
    # Claude 5 family (Opus 5, 5.5): "Context window: 1M tokens". claude-opus-5-5 is what
    # Claude Code's `opus` alias names (2.1.332).
    # https://platform.claude.com/docs/en/models/opus-5-5/overview
    _e("claude-opus-5", "claude-opus-5*", 1_000_000),
    # Sonnet 5, 5.5: 1M. claude-sonnet-5-5 is Claude Code's `sonnet` alias (2.1.332).
    # https://platform.claude.com/docs/en/models/sonnet-5-5/overview
    _e("claude-sonnet-5", "claude-sonnet-5*", 1_000_000),
    # Haiku 5.5: 1M; Claude Code's `haiku` alias.
    # https://platform.claude.com/docs/en/models/haiku-5-5/overview
    _e("claude-haiku-5", "claude-haiku-5*", 1_000_000),
    # Fable 5, 5.1, 5.2: 1M; Claude Code's `fable` alias is claude-fable-5-2.
    # https://platform.claude.com/docs/en/models/fable-5-1/overview
    _e("claude-fable", "claude-fable*", 1_000_000),
    # Mythos 5, 5.1, 5.2 and claude-mythos-preview: 1M.
    # https://platform.claude.com/docs/en/build-with-claude/context-windows
    _e("claude-mythos", "claude-mythos*", 1_000_000),
    # Any other Claude: 200K, the smallest window of every current Claude model.
    # https://platform.claude.com/docs/en/build-with-claude/context-windows
    _e("claude", "claude-*", 200_000),
    # --------------------------------------------------------------------------- Google
    # Image models take far less input; the smallest documented limit is used
    # (2.0 Flash image generation: 32,000). https://ai.google.dev/gemini-api/docs/models
    _e("gemini-image", "gemini-*image*", 32_000),
    # gemini-2.5-computer-use-preview-10-2025 (in Gemini CLI's model list): input 128,000,
    # not the 1,048,576 of other 2.5 models (the figure a gateway cross-checked there).
    # https://ai.google.dev/gemini-api/docs/models/gemini-2.5-computer-use-preview-10-2025
    _e("gemini-computer-use", "gemini-*computer-use*", 128_000),
    # Gemini 4: "a unified 1,048,576 input + output token limit".
    # https://ai.google.dev/gemini-api/docs/generate-content/latest-model
    _e("gemini-4", "gemini-4*", 1_048_576),
    # gemini-3-pro-preview, gemini-3.1-pro-preview: input 1,048,576.
    # https://ai.google.dev/gemini-api/docs/models/gemini-3.1-pro-preview
    _e("gemini-3-pro", "gemini-3*-pro*", 1_048_576),
    # gemini-3-flash-preview, gemini-3.8-flash, ...-flash-lite: input 1,048,576.
    # https://ai.google.dev/gemini-api/docs/models/gemini-3-flash-preview
    # gemini-3.5-flash (Gemini CLI 0.61's default Flash; its Flash-Lite is
    # gemini-3.1-flash-lite): "Input token limit 1,048,576".
    # https://ai.google.dev/gemini-api/docs/models/gemini-3.5-flash
    _e("gemini-3-flash", "gemini-3*-flash*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini-3-pro-preview
    _e("gemini-3", "gemini-3*", 1_048_576),
    # Gemini CLI's default model (DEFAULT_GEMINI_MODEL in packages/core/src/config/models.ts).
    # https://ai.google.dev/gemini-api/docs/models/gemini-2.5-pro (input 1,048,576)
    _e("gemini-2.5-pro", "gemini-2.5-pro*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini-2.5-flash-lite (input 1,048,576)
    _e("gemini-2.5-flash-lite", "gemini-2.5-flash-lite*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini-2.5-flash (input 1,048,576)
    _e("gemini-2.5-flash", "gemini-2.5-flash*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini-2.0-flash-lite (input 1,048,576)
    _e("gemini-2.0-flash-lite", "gemini-2.0-flash-lite*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini-2.0-flash (input 1,048,576)
    _e("gemini-2.0-flash", "gemini-2.0-flash*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini (1.5 Pro: input 2,097,152)
    _e("gemini-1.5-pro", "gemini-1.5-pro*", 2_097_152),
    # https://ai.google.dev/gemini-api/docs/models/gemini (1.5 Flash-8B: input 1,048,576)
    _e("gemini-1.5-flash-8b", "gemini-1.5-flash-8b*", 1_048_576),
    # https://ai.google.dev/gemini-api/docs/models/gemini (1.5 Flash: input 1,048,576)
    _e("gemini-1.5-flash", "gemini-1.5-flash*", 1_048_576),
    # Aliases (gemini-flash-latest, gemini-pro-latest) and later 2.x+ variants: 1,048,576,
    # the input limit of every current Gemini text model.
    # https://ai.google.dev/gemini-api/docs/models
    _e("gemini", "gemini-*latest|gemini-[2-9]*", 1_048_576),
    # ----------------------------------------------------------------------- Meta Llama
    # Hosts often serve less than the model card (Groq: 131,072); configure those.
    # Maverick: 1M. https://ai.meta.com/blog/llama-4-multimodal-intelligence/
    _e("llama-4-maverick", "*llama*4*maverick*", 1_000_000),
    # Scout: 10M (Ollama's bare "llama4" is Scout). Same source as above.
    _e("llama-4-scout", "*llama*4*scout*|*llama4|*llama4:latest", 10_000_000),
    # "[.p-]" accepts llama-3.3, llama3.3, Bedrock llama3-3 and Fireworks llama-v3p3.
    # 128K = 131,072. https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct
    _e("llama-3.3", "*llama*3[.p-]3*", 131_072),
    # 128K = 131,072. https://huggingface.co/meta-llama/Llama-3.2-3B-Instruct
    _e("llama-3.2", "*llama*3[.p-]2*", 131_072),
    # 128K = 131,072. https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct
    _e("llama-3.1", "*llama*3[.p-]1*", 131_072),
    # Llama 3 (no point release): 8,192. https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct
    _e("llama-3", "*llama?3|*llama3|*llama?3[-:_]*|*llama3[-:_]*", 8_192),
    # ------------------------------------------------------------------------ Qwen
    # Qwen3-Coder: 262,144 natively. https://huggingface.co/Qwen/Qwen3-Coder-30B-A3B-Instruct
    _e("qwen3-coder", "qwen3*coder*", 262_144),
    # Qwen3 2507 refresh: 262,144 natively. https://huggingface.co/Qwen/Qwen3-30B-A3B-Instruct-2507
    _e("qwen3-2507", "qwen3*2507*", 262_144),
    # Qwen3: 32,768 natively; 131,072 only with YaRN enabled by the deployment.
    # https://github.com/QwenLM/Qwen3 (docs/source/inference/transformers.md)
    _e("qwen3", "qwen3|qwen3[-:_]*", 32_768),
    # Qwen2.5: 32,768 natively; the card's 131,072 needs YaRN ("no YaRN no 128K", Qwen team).
    # https://huggingface.co/Qwen/Qwen2.5-72B-Instruct
    _e("qwen2.5", "qwen2?5|qwen2?5[-:_]*", 32_768),
    # ------------------------------------------------------------------------ DeepSeek
    # deepseek-v4-flash / -pro: "CONTEXT LENGTH 1M".
    # https://api-docs.deepseek.com/quick_start/pricing
    _e("deepseek-v4", "deepseek-v4*", 1_000_000),
    # The DeepSeek API serves deepseek-chat / deepseek-reasoner as aliases of
    # deepseek-v4-flash (non-thinking / thinking), 1M. Older pages said 64K (V3, R1) and
    # then 128K (V3.1, V3.2); the current figure of the serving API is used.
    # https://api-docs.deepseek.com/quick_start/pricing
    _e("deepseek-chat", "deepseek-chat*", 1_000_000),
    # Same source and caveat as deepseek-chat.
    _e("deepseek-reasoner", "deepseek-reasoner*", 1_000_000),
    # Open weights V3 / V3.1 / V3.2: 128K (Alibaba Model Studio serves 131,072).
    # https://huggingface.co/deepseek-ai/DeepSeek-V3
    _e("deepseek-v3", "deepseek-v3*", 131_072),
    # Open weights R1 (and the Ollama distills, 128K): 131,072.
    # https://huggingface.co/deepseek-ai/DeepSeek-R1
    _e("deepseek-r1", "deepseek-r1*", 131_072),
    # ------------------------------------------------------------------------ Mistral
    # Mistral Large 3 (2512), which mistral-large-latest now names: 256k.
    # https://docs.mistral.ai/getting-started/models/ (Bedrock lists 256,000 as well)
    _e("mistral-large-3", "mistral-large-3*|mistral-large-2512*|mistral-large-latest", 256_000),
    # Mistral Large 2 (2407, 2411; Ollama mistral-large): 128k.
    # https://huggingface.co/mistralai/Mistral-Large-Instruct-2411
    _e("mistral-large", "mistral-large*", 128_000),
    # Mistral Small 3.1 / 3.2 (2503, 2506) and mistral-small-latest: 128k.
    # https://huggingface.co/mistralai/Mistral-Small-3.1-24B-Base-2503
    _e(
        "mistral-small-3",
        "mistral-small*3.[12]*|mistral-small*250[36]*|mistral-small-latest",
        128_000,
    ),
    # Older Mistral Small (2501 "32k context window", 2409, 2402): 32,768.
    # https://huggingface.co/mistralai/Mistral-Small-24B-Base-2501
    _e("mistral-small", "mistral-small*", 32_768),
    # Codestral 22B (2405; Ollama codestral): 32k.
    # https://huggingface.co/mistralai/Codestral-22B-v0.1
    _e("codestral-22b", "codestral|codestral:*|codestral-22b*|codestral-2405*", 32_768),
    # Codestral 25.01 / 25.08 (codestral-latest): 256k.
    # https://docs.mistral.ai/getting-started/models/
    _e("codestral", "codestral*", 256_000),
    # 64k = 65,536. https://huggingface.co/mistralai/Mixtral-8x22B-Instruct-v0.1
    _e("mixtral-8x22b", "*mixtral-8x22b*|mixtral:8x22b*", 65_536),
    # 32k = 32,768. https://huggingface.co/mistralai/Mixtral-8x7B-Instruct-v0.1
    _e("mixtral", "mixtral*|open-mixtral*", 32_768),
    # 128k. https://huggingface.co/mistralai/Mistral-Nemo-Instruct-2407
    _e("mistral-nemo", "mistral-nemo*|open-mistral-nemo*", 128_000),
    # Mistral 7B v0.2/v0.3 (Ollama "mistral"): 32k.
    # https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3
    _e("mistral-7b", "mistral|mistral:*|mistral-7b*|open-mistral-7b*", 32_768),
    # ------------------------------------------------------------------------ Gemma
    # Gemma 4 E2B / E4B: "the small models have a 128K context window" (131,072).
    # https://ai.google.dev/gemma/docs/core
    _e("gemma-4-small", "gemma?4*e[24]b*|gemma4*e[24]b*", 131_072),
    # Gemma 4 26B A4B, 31B (and the rest of the family): 256K. 256,000 is the figure the
    # Gemini API serves them at (Gemini CLI: GEMMA_4_TOKEN_LIMIT = 256_000 for
    # gemma-4-31b-it and gemma-4-26b-a4b-it, packages/core/src/core/tokenLimits.ts).
    # https://ai.google.dev/gemma/docs/core
    _e("gemma-4", "gemma?4*|gemma4*", 256_000),
    # Gemma 3n: 32K. https://ai.google.dev/gemma/docs/gemma-3n/model_card
    _e("gemma-3n", "gemma?3n*|gemma3n*", 32_768),
    # Gemma 3 1B: 32K. https://ai.google.dev/gemma/docs/core/model_card_3
    _e("gemma-3-1b", "gemma*3*[-:]1b*", 32_768),
    # Gemma 3 270M: 32K. https://ai.google.dev/gemma/docs/core/model_card_3
    _e("gemma-3-270m", "gemma*3*[-:]270m*", 32_768),
    # Gemma 3 4B/12B/27B: 128K = 131,072. https://ai.google.dev/gemma/docs/core/model_card_3
    _e("gemma-3", "gemma?3*|gemma3*", 131_072),
    # Gemma 2: 8,192 (config.json max_position_embeddings).
    # https://ai.google.dev/gemma/docs/core/model_card_2
    _e("gemma-2", "gemma?2*|gemma2*", 8_192),
    # ------------------------------------------------------------------------ Microsoft Phi
    # Phi-4-mini: 128K = 131,072. https://huggingface.co/microsoft/Phi-4-mini-instruct
    _e("phi-4-mini", "phi*4-mini*", 131_072),
    # Phi-4-multimodal: 128K. https://huggingface.co/microsoft/Phi-4-multimodal-instruct
    _e("phi-4-multimodal", "phi*4-multimodal*", 131_072),
    # Phi-4-reasoning (-plus): 32K. https://huggingface.co/microsoft/Phi-4-reasoning
    _e("phi-4-reasoning", "phi*4-reasoning*", 32_768),
    # Phi-4 (14B): 16K. https://huggingface.co/microsoft/phi-4
    _e("phi-4", "phi-4|phi4|phi-4[-:_]*|phi4[-:_]*", 16_384),
    # Phi-3.5 mini / MoE: 128K. https://huggingface.co/microsoft/Phi-3.5-mini-instruct
    _e("phi-3.5", "phi*3.5*", 131_072),
    # Phi-3 *-128k variants: 128K. https://huggingface.co/microsoft/Phi-3-mini-128k-instruct
    _e("phi-3-128k", "phi*3*128k*", 131_072),
    # Phi-3 4k variants (Ollama's default phi3 tags): 4K.
    # https://huggingface.co/microsoft/Phi-3-mini-4k-instruct
    _e("phi-3", "phi-3*|phi3*", 4_096),
    # ------------------------------------------------------------------------ xAI Grok
    # grok-4-1-fast(-reasoning / -non-reasoning): 2,000,000. https://docs.x.ai/docs/models
    _e("grok-4.1-fast", "grok-4?1-fast*", 2_000_000),
    # grok-4-fast(-reasoning / -non-reasoning): 2,000,000. https://docs.x.ai/docs/models
    _e("grok-4-fast", "grok-4-fast*", 2_000_000),
    # grok-4.20 (reasoning / non-reasoning): 1M. xAI's page was not in the reference
    # corpus; the figure is the one gateways republish. https://docs.x.ai/docs/models
    _e("grok-4.20", "grok-4.20*", 1_000_000),
    # grok-4.3: 1M (same caveat; AWS Bedrock's listing agrees). https://docs.x.ai/docs/models
    _e("grok-4.3", "grok-4.3*", 1_000_000),
    # grok-code-fast-1: 256,000. https://docs.x.ai/docs/models
    _e("grok-code-fast", "grok-code*", 256_000),
    # grok-4 / grok-4-0709 (and later 4.x not listed above): 256,000. https://docs.x.ai/docs/models
    _e("grok-4", "grok-4*", 256_000),
    # grok-3, -mini, -fast: 131,072. https://docs.x.ai/docs/models
    _e("grok-3", "grok-3*", 131_072),
    # grok-2-vision-1212: 32,768. https://docs.x.ai/docs/models
    _e("grok-2-vision", "grok-2-vision*|grok-vision*", 32_768),
    # grok-2-1212: 131,072. https://docs.x.ai/docs/models
    _e("grok-2", "grok-2*", 131_072),
)

_Compiled = tuple[tuple[CatalogEntry, re.Pattern[str]], ...]


def _compile_all(entries: Sequence[CatalogEntry]) -> _Compiled:
    return tuple((entry, _compile(entry.match)) for entry in entries)


_BUILTIN_COMPILED: _Compiled = _compile_all(BUILTIN_CATALOG)


class Catalog:
    """User entries followed by the built-in catalog; ``lookup`` is memoised and bounded."""

    __slots__ = ("_builtin", "_cache", "_cache_size", "_entries", "_user")

    def __init__(
        self,
        user_entries: Sequence[CatalogEntry] = (),
        *,
        builtin: bool = True,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if cache_size < 0:
            raise ValueError("cache_size must not be negative")
        self._user: _Compiled = _compile_all(user_entries)
        self._builtin: _Compiled = _BUILTIN_COMPILED if builtin else ()
        self._entries: tuple[CatalogEntry, ...] = tuple(user_entries) + (
            BUILTIN_CATALOG if builtin else ()
        )
        self._cache_size = cache_size
        self._cache: dict[str, CatalogEntry | None] = {}

    @property
    def entries(self) -> tuple[CatalogEntry, ...]:
        """Every entry in lookup order: user entries, then the built-in ones."""
        return self._entries

    @property
    def cache_len(self) -> int:
        """How many model strings are memoised right now (never above ``cache_size``)."""
        return len(self._cache)

    def lookup(self, model: str | None) -> CatalogEntry | None:
        """The first entry that matches ``model``, or ``None`` for an unknown model."""
        if not model or len(model) > MAX_MODEL_LEN:
            return None
        cache = self._cache
        try:
            return cache[model]
        except KeyError:
            pass
        entry = self._resolve(model)
        if self._cache_size and len(model) <= MAX_CACHED_MODEL_LEN:
            if len(cache) >= self._cache_size:
                # Oldest first (dicts keep insertion order); a concurrent eviction is harmless.
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del cache[next(iter(cache))]
            cache[model] = entry
        return entry

    def _resolve(self, model: str) -> CatalogEntry | None:
        raw = model.strip().lower()
        if not raw:
            return None
        for entry, pattern in self._user:
            if pattern.match(raw):
                return entry
        normalized = normalize_model(raw)
        if normalized != raw:
            for entry, pattern in self._user:
                if pattern.match(normalized):
                    return entry
        for entry, pattern in self._builtin:
            if pattern.match(normalized):
                return entry
        return None
