"""The model catalog: real model strings, prefixes, user entries, bounds, ordering."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trimgate.providers.catalog import (
    ANTHROPIC_CONTEXT_1M_BETA,
    BUILTIN_CATALOG,
    DEFAULT_CACHE_SIZE,
    MAX_CACHED_MODEL_LEN,
    MAX_MODEL_LEN,
    Catalog,
    CatalogEntry,
    anthropic_beta_tokens,
    normalize_model,
)

# Real model strings as clients send them -> (entry name, most input tokens: the
# context window, or the input cap where one is documented).
REAL_MODELS: list[tuple[str, str, int]] = [
    # OpenAI, dated snapshots and gateway prefixes
    ("gpt-5", "gpt-5", 272_000),
    ("gpt-5-2025-08-07", "gpt-5", 272_000),
    ("gpt-5-codex", "gpt-5", 272_000),
    ("gpt-5-pro", "gpt-5", 272_000),
    ("openai/gpt-5-mini", "gpt-5-mini", 272_000),
    ("gpt-5-mini-2025-08-07", "gpt-5-mini", 272_000),
    ("gpt-5-nano-2025-08-07", "gpt-5-nano", 272_000),
    ("gpt-5-chat-latest", "gpt-5-chat", 128_000),
    ("gpt-5.1-chat-latest", "gpt-5-chat", 128_000),
    ("gpt-5.1-2025-11-13", "gpt-5.1", 272_000),
    ("gpt-5.1-codex-max", "gpt-5.1", 272_000),
    ("gpt-5.2-pro", "gpt-5.2", 272_000),
    ("gpt-5.3-codex", "gpt-5.3", 272_000),
    ("gpt-5.3-codex-spark", "gpt-5.3-codex-spark", 128_000),
    ("gpt-5.4", "gpt-5.4", 922_000),
    ("gpt-5.4-pro-2026-03-05", "gpt-5.4", 922_000),
    ("gpt-5.4-mini", "gpt-5.4-mini", 272_000),
    ("gpt-5.4-nano", "gpt-5.4-nano", 272_000),
    ("gpt-5.5-pro", "gpt-5.5", 922_000),
    ("gpt-5.6-luna", "gpt-5.6", 922_000),
    ("gpt-6.2-sol", "gpt-6.2", 922_000),
    ("gpt-6.2-astra", "gpt-6.2", 922_000),
    ("gpt-6.2-astra-law", "gpt-6.2", 922_000),
    ("openai/gpt-6.1-sol", "gpt-6.1", 922_000),
    ("gpt-6.1-terra", "gpt-6.1", 922_000),
    ("gpt-6-sol", "gpt-6", 922_000),
    ("gpt-6-luna", "gpt-6", 922_000),
    ("gpt-6-astra", "gpt-6", 922_000),
    ("global.openai.gpt-6-sol", "gpt-6", 922_000),
    ("gpt-4.1", "gpt-4.1", 1_047_576),
    ("gpt-4.1-2025-04-14", "gpt-4.1", 1_047_576),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini", 1_047_576),
    ("openai/gpt-4.1-nano", "gpt-4.1-nano", 1_047_576),
    ("gpt-4o", "gpt-4o", 128_000),
    ("gpt-4o-2024-08-06", "gpt-4o", 128_000),
    ("openai/gpt-4o", "gpt-4o", 128_000),
    ("azure/gpt-4o", "gpt-4o", 128_000),
    ("chatgpt-4o-latest", "gpt-4o", 128_000),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", 128_000),
    ("gpt-4-turbo-2024-04-09", "gpt-4-turbo", 128_000),
    ("gpt-4-1106-preview", "gpt-4-turbo", 128_000),
    ("gpt-4-0125-preview", "gpt-4-turbo", 128_000),
    ("gpt-4", "gpt-4", 8_192),
    ("gpt-4-0613", "gpt-4", 8_192),
    ("gpt-4-32k-0613", "gpt-4-32k", 32_768),
    ("gpt-3.5-turbo", "gpt-3.5-turbo", 16_385),
    ("gpt-3.5-turbo-0125", "gpt-3.5-turbo", 16_385),
    ("gpt-35-turbo", "gpt-3.5-turbo", 16_385),
    ("gpt-3.5-turbo-instruct", "gpt-3.5-turbo-instruct", 4_096),
    ("o1", "o1", 200_000),
    ("o1-2024-12-17", "o1", 200_000),
    ("o1-pro", "o1", 200_000),
    ("o1-mini-2024-09-12", "o1-mini", 128_000),
    ("o1-preview", "o1-preview", 128_000),
    ("o3", "o3", 200_000),
    ("o3-2025-04-16", "o3", 200_000),
    ("o3-pro", "o3", 200_000),
    ("o3-mini-2025-01-31", "o3-mini", 200_000),
    ("o4-mini-2025-04-16", "o4-mini", 200_000),
    ("o4-mini-deep-research", "o4-mini", 200_000),
    ("codex-mini-latest", "codex-mini", 200_000),
    ("gpt-oss-120b", "gpt-oss-120b", 131_072),
    ("openai/gpt-oss-120b", "gpt-oss-120b", 131_072),
    ("openai/gpt-oss-120b:nitro", "gpt-oss-120b", 131_072),
    ("openai.gpt-oss-120b-1:0", "gpt-oss-120b", 131_072),
    ("gpt-oss:20b", "gpt-oss-20b", 131_072),
    ("gpt-oss", "gpt-oss-20b", 131_072),
    # Anthropic: API ids, aliases, OpenRouter dotted names, Bedrock, Vertex
    ("claude-3-5-sonnet-20241022", "claude-3.5-sonnet", 200_000),
    ("claude-3-5-sonnet-latest", "claude-3.5-sonnet", 200_000),
    ("anthropic/claude-3-5-sonnet", "claude-3.5-sonnet", 200_000),
    ("anthropic/claude-3.5-sonnet", "claude-3.5-sonnet", 200_000),
    ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3.5-sonnet", 200_000),
    ("us.anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3.5-sonnet", 200_000),
    ("claude-3-5-sonnet-v2@20241022", "claude-3.5-sonnet", 200_000),
    ("claude-3-7-sonnet-20250219", "claude-3.7-sonnet", 200_000),
    ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3.7-sonnet", 200_000),
    ("anthropic/claude-3.7-sonnet:thinking", "claude-3.7-sonnet", 200_000),
    ("claude-3-5-haiku-20241022", "claude-3.5-haiku", 200_000),
    ("claude-3-opus-20240229", "claude-3-opus", 200_000),
    ("claude-3-sonnet-20240229", "claude-3-sonnet", 200_000),
    ("claude-3-haiku-20240307", "claude-3-haiku", 200_000),
    (
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
        "claude-3-haiku",
        200_000,
    ),
    ("claude-sonnet-4-20250514", "claude-sonnet-4", 200_000),
    ("claude-sonnet-4@20250514", "claude-sonnet-4", 200_000),
    ("claude-4-sonnet", "claude-sonnet-4", 200_000),
    ("anthropic/claude-sonnet-4", "claude-sonnet-4", 200_000),
    ("claude-opus-4-20250514", "claude-opus-4", 200_000),
    ("claude-opus-4-1-20250805", "claude-opus-4.1", 200_000),
    ("claude-opus-4-1@20250805", "claude-opus-4.1", 200_000),
    ("eu.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4.1", 200_000),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4.5", 200_000),
    ("claude-sonnet-4-5", "claude-sonnet-4.5", 200_000),
    ("anthropic/claude-sonnet-4.5", "claude-sonnet-4.5", 200_000),
    ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4.5", 200_000),
    ("claude-haiku-4-5-20251001", "claude-haiku-4.5", 200_000),
    ("claude-haiku-4-5@20251001", "claude-haiku-4.5", 200_000),
    ("claude-opus-4-5-20251101", "claude-opus-4.5", 200_000),
    ("claude-opus-4-6", "claude-opus-4.6", 1_000_000),
    ("anthropic.claude-opus-4-6-v1:0", "claude-opus-4.6", 1_000_000),
    ("claude-sonnet-4-6", "claude-sonnet-4.6", 1_000_000),
    ("claude-opus-4-7", "claude-opus-4.7", 1_000_000),
    ("claude-opus-4-8", "claude-opus-4.8", 1_000_000),
    ("claude-opus-5", "claude-opus-5", 1_000_000),
    ("claude-sonnet-5-5", "claude-sonnet-5", 1_000_000),
    ("claude-haiku-5-5", "claude-haiku-5", 1_000_000),
    ("claude-2.1", "claude", 200_000),
    (
        "projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514",
        "claude-sonnet-4",
        200_000,
    ),
    # Google Gemini: "models/..." paths, Vertex resource names, method suffixes
    ("gemini-2.5-pro", "gemini-2.5-pro", 1_048_576),
    ("models/gemini-2.5-pro", "gemini-2.5-pro", 1_048_576),
    ("gemini-2.5-pro-preview-06-05", "gemini-2.5-pro", 1_048_576),
    ("gemini-2.5-pro:generateContent", "gemini-2.5-pro", 1_048_576),
    (
        "projects/p/locations/global/publishers/google/models/gemini-2.5-flash",
        "gemini-2.5-flash",
        1_048_576,
    ),
    ("gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash", 1_048_576),
    ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite", 1_048_576),
    ("gemini-2.0-flash-001", "gemini-2.0-flash", 1_048_576),
    ("gemini-2.0-flash-lite-001", "gemini-2.0-flash-lite", 1_048_576),
    ("models/gemini-1.5-pro", "gemini-1.5-pro", 2_097_152),
    ("gemini-1.5-pro-002", "gemini-1.5-pro", 2_097_152),
    ("models/gemini-1.5-flash-latest", "gemini-1.5-flash", 1_048_576),
    ("gemini-1.5-flash-8b", "gemini-1.5-flash-8b", 1_048_576),
    ("gemini-3-pro-preview", "gemini-3-pro", 1_048_576),
    ("gemini-3.1-pro-preview", "gemini-3-pro", 1_048_576),
    ("gemini-3-flash-preview", "gemini-3-flash", 1_048_576),
    ("gemini-4-argon", "gemini-4", 1_048_576),
    ("gemini-flash-latest", "gemini", 1_048_576),
    ("gemini-2.5-flash-image", "gemini-image", 32_000),
    ("gemini-2.0-flash-preview-image-generation", "gemini-image", 32_000),
    # Meta Llama across hosts: Ollama, HF ids, Groq, Together, Fireworks, Bedrock, Cloudflare
    ("llama3.1:8b", "llama-3.1", 131_072),
    ("llama3.1", "llama-3.1", 131_072),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1", 131_072),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo", "llama-3.1", 131_072),
    ("llama-3.1-8b-instant", "llama-3.1", 131_072),
    ("accounts/fireworks/models/llama-v3p1-405b-instruct", "llama-3.1", 131_072),
    ("meta.llama3-1-70b-instruct-v1:0", "llama-3.1", 131_072),
    ("@cf/meta/llama-3.1-8b-instruct", "llama-3.1", 131_072),
    ("llama3.2", "llama-3.2", 131_072),
    ("llama3.2:3b", "llama-3.2", 131_072),
    ("llama3.2-vision:11b", "llama-3.2", 131_072),
    ("us.meta.llama3-2-90b-instruct-v1:0", "llama-3.2", 131_072),
    ("llama3.3:70b", "llama-3.3", 131_072),
    ("llama-3.3-70b-versatile", "llama-3.3", 131_072),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3", 131_072),
    ("meta.llama3-3-70b-instruct-v1:0", "llama-3.3", 131_072),
    ("llama3:8b", "llama-3", 8_192),
    ("llama3", "llama-3", 8_192),
    ("llama3-70b-8192", "llama-3", 8_192),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3", 8_192),
    ("meta.llama3-8b-instruct-v1:0", "llama-3", 8_192),
    ("llama4:scout", "llama-4-scout", 10_000_000),
    ("llama4", "llama-4-scout", 10_000_000),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout", 10_000_000),
    ("us.meta.llama4-scout-17b-instruct-v1:0", "llama-4-scout", 10_000_000),
    ("meta-llama/llama-4-maverick-17b-128e-instruct", "llama-4-maverick", 1_000_000),
    ("llama4:maverick", "llama-4-maverick", 1_000_000),
    # Qwen
    ("qwen2.5:72b", "qwen2.5", 32_768),
    ("qwen2.5", "qwen2.5", 32_768),
    ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5", 32_768),
    ("qwen2.5-coder:32b", "qwen2.5", 32_768),
    ("accounts/fireworks/models/qwen2p5-72b-instruct", "qwen2.5", 32_768),
    ("qwen3:30b", "qwen3", 32_768),
    ("qwen3", "qwen3", 32_768),
    ("Qwen/Qwen3-235B-A22B", "qwen3", 32_768),
    ("qwen.qwen3-32b-v1:0", "qwen3", 32_768),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-2507", 262_144),
    ("qwen3:30b-a3b-instruct-2507-q4_K_M", "qwen3-2507", 262_144),
    ("qwen3-coder:30b", "qwen3-coder", 262_144),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder", 262_144),
    # DeepSeek
    ("deepseek-chat", "deepseek-chat", 1_000_000),
    ("deepseek/deepseek-chat", "deepseek-chat", 1_000_000),
    ("deepseek-reasoner", "deepseek-reasoner", 1_000_000),
    ("deepseek-v4-flash", "deepseek-v4", 1_000_000),
    ("deepseek-v4-pro", "deepseek-v4", 1_000_000),
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3", 131_072),
    ("deepseek-v3.2", "deepseek-v3", 131_072),
    ("deepseek.v3-v1:0", "deepseek-v3", 131_072),
    ("deepseek-ai/DeepSeek-R1", "deepseek-r1", 131_072),
    ("deepseek-r1:8b", "deepseek-r1", 131_072),
    ("us.deepseek.r1-v1:0", "deepseek-r1", 131_072),
    # Mistral
    ("mistral-large-latest", "mistral-large-3", 256_000),
    ("mistral-large-2512", "mistral-large-3", 256_000),
    ("mistral.mistral-large-3-675b-instruct", "mistral-large-3", 256_000),
    ("mistral-large-2411", "mistral-large", 128_000),
    ("mistral.mistral-large-2407-v1:0", "mistral-large", 128_000),
    ("mistral-large:123b", "mistral-large", 128_000),
    ("mistral-small-latest", "mistral-small-3", 128_000),
    ("mistral-small-2506", "mistral-small-3", 128_000),
    ("mistralai/mistral-small-3.1-24b-instruct", "mistral-small-3", 128_000),
    ("mistral-small3.2:24b", "mistral-small-3", 128_000),
    ("mistral-small-2501", "mistral-small", 32_768),
    ("mistral-small:24b", "mistral-small", 32_768),
    ("codestral-latest", "codestral", 256_000),
    ("codestral-2501", "codestral", 256_000),
    ("codestral:22b", "codestral-22b", 32_768),
    ("codestral", "codestral-22b", 32_768),
    ("open-mixtral-8x22b", "mixtral-8x22b", 65_536),
    ("mixtral:8x22b", "mixtral-8x22b", 65_536),
    ("mistral.mixtral-8x7b-instruct-v0:1", "mixtral", 32_768),
    ("mixtral-8x7b-32768", "mixtral", 32_768),
    ("open-mistral-nemo", "mistral-nemo", 128_000),
    ("mistral-nemo:12b", "mistral-nemo", 128_000),
    ("mistral", "mistral-7b", 32_768),
    ("mistral:7b", "mistral-7b", 32_768),
    ("mistral.mistral-7b-instruct-v0:2", "mistral-7b", 32_768),
    # Gemma
    ("gemma3:27b", "gemma-3", 131_072),
    ("google/gemma-3-12b-it", "gemma-3", 131_072),
    ("gemma-3-27b-it", "gemma-3", 131_072),
    ("gemma-4-31b-it", "gemma-4", 256_000),
    ("gemma-4-26b-a4b-it", "gemma-4", 256_000),
    ("google/gemma-4-26b-a4b-it", "gemma-4", 256_000),
    ("gemma4:31b", "gemma-4", 256_000),
    ("gemma-4-e2b-it", "gemma-4-small", 131_072),
    ("gemma4:e4b", "gemma-4-small", 131_072),
    ("gemma3:1b", "gemma-3-1b", 32_768),
    ("gemma-3-1b-it", "gemma-3-1b", 32_768),
    ("gemma3:270m", "gemma-3-270m", 32_768),
    ("gemma3n:e4b", "gemma-3n", 32_768),
    ("gemma-3n-e4b-it", "gemma-3n", 32_768),
    ("gemma2:9b", "gemma-2", 8_192),
    ("google/gemma-2-27b-it", "gemma-2", 8_192),
    # Phi
    ("phi4", "phi-4", 16_384),
    ("microsoft/phi-4", "phi-4", 16_384),
    ("phi4:14b", "phi-4", 16_384),
    ("phi4-mini", "phi-4-mini", 131_072),
    ("microsoft/Phi-4-mini-instruct", "phi-4-mini", 131_072),
    ("phi4-reasoning:14b", "phi-4-reasoning", 32_768),
    ("microsoft/Phi-4-multimodal-instruct", "phi-4-multimodal", 131_072),
    ("phi3.5", "phi-3.5", 131_072),
    ("microsoft/Phi-3.5-mini-instruct", "phi-3.5", 131_072),
    ("microsoft/Phi-3-mini-128k-instruct", "phi-3-128k", 131_072),
    ("phi3:medium-128k", "phi-3-128k", 131_072),
    ("phi3", "phi-3", 4_096),
    ("microsoft/Phi-3-mini-4k-instruct", "phi-3", 4_096),
    # xAI Grok
    ("grok-4", "grok-4", 256_000),
    ("grok-4-0709", "grok-4", 256_000),
    ("x-ai/grok-4", "grok-4", 256_000),
    ("grok-4-fast-reasoning", "grok-4-fast", 2_000_000),
    ("grok-4-1-fast-non-reasoning", "grok-4.1-fast", 2_000_000),
    ("x-ai/grok-4.1-fast", "grok-4.1-fast", 2_000_000),
    ("grok-4.20-reasoning", "grok-4.20", 1_000_000),
    ("grok-4.3", "grok-4.3", 1_000_000),
    ("grok-code-fast-1", "grok-code-fast", 256_000),
    ("grok-3", "grok-3", 131_072),
    ("grok-3-mini", "grok-3", 131_072),
    ("grok-2-1212", "grok-2", 131_072),
    ("grok-2-vision-1212", "grok-2-vision", 32_768),
]

# One example per built-in entry: the entry must be what the example resolves to, so no
# entry is shadowed by an earlier, broader one. A new entry without an example fails.
OWN_EXAMPLE: dict[str, str] = {
    "gpt-6.2": "gpt-6.2-sol",
    "gpt-6.1": "gpt-6.1-terra",
    "gpt-6": "gpt-6-astra",
    "gpt-audio": "gpt-audio-mini",
    "gpt-5-chat": "gpt-5-chat-latest",
    "gpt-5.3-codex-spark": "gpt-5.3-codex-spark",
    "gpt-5.6": "gpt-5.6-sol",
    "gpt-5.5": "gpt-5.5",
    "gpt-5.4-mini": "gpt-5.4-mini",
    "gpt-5.4-nano": "gpt-5.4-nano",
    "gpt-5.4": "gpt-5.4",
    "gpt-5.3": "gpt-5.3-codex",
    "gpt-5.2": "gpt-5.2",
    "gpt-5.1": "gpt-5.1",
    "gpt-5-mini": "gpt-5-mini",
    "gpt-5-nano": "gpt-5-nano",
    "gpt-5": "gpt-5",
    "gpt-4.1-mini": "gpt-4.1-mini",
    "gpt-4.1-nano": "gpt-4.1-nano",
    "gpt-4.1": "gpt-4.1",
    "gpt-4o-mini": "gpt-4o-mini",
    "gpt-4o": "gpt-4o",
    "gpt-4-turbo": "gpt-4-turbo",
    "gpt-4-32k": "gpt-4-32k",
    "gpt-4": "gpt-4",
    "gpt-3.5-turbo-instruct": "gpt-3.5-turbo-instruct",
    "gpt-3.5-turbo": "gpt-3.5-turbo",
    "o1-mini": "o1-mini",
    "o1-preview": "o1-preview",
    "o1": "o1",
    "o3-mini": "o3-mini",
    "o3": "o3",
    "o4-mini": "o4-mini",
    "codex-mini": "codex-mini-latest",
    "gpt-oss-120b": "gpt-oss-120b",
    "gpt-oss-20b": "gpt-oss-20b",
    "claude-opus-4.8": "claude-opus-4-8",
    "claude-opus-4.7": "claude-opus-4-7",
    "claude-opus-4.6": "claude-opus-4-6",
    "claude-sonnet-4.6": "claude-sonnet-4-6",
    "claude-opus-4.5": "claude-opus-4-5",
    "claude-opus-4.1": "claude-opus-4-1",
    "claude-opus-4": "claude-opus-4-0",
    "claude-sonnet-4.5": "claude-sonnet-4-5",
    "claude-sonnet-4": "claude-sonnet-4-0",
    "claude-haiku-4.5": "claude-haiku-4-5",
    "claude-3.7-sonnet": "claude-3-7-sonnet-latest",
    "claude-3.5-sonnet": "claude-3-5-sonnet-latest",
    "claude-3.5-haiku": "claude-3-5-haiku-latest",
    "claude-3-opus": "claude-3-opus-latest",
    "claude-3-sonnet": "claude-3-sonnet-20240229",
    "claude-3-haiku": "claude-3-haiku-20240307",
    "claude-opus-5": "claude-opus-5",
    "claude-sonnet-5": "claude-sonnet-5",
    "claude-haiku-5": "claude-haiku-5-5",
    "claude-fable": "claude-fable-5-1",
    "claude-mythos": "claude-mythos-5",
    "claude": "claude-instant-1.2",
    "gemini-image": "gemini-2.5-flash-image",
    "gemini-computer-use": "gemini-2.5-computer-use-preview-10-2025",
    "gemini-4": "gemini-4-argon",
    "gemini-3-pro": "gemini-3-pro-preview",
    "gemini-3-flash": "gemini-3-flash-preview",
    "gemini-3": "gemini-3-something-new",
    "gemini-2.5-pro": "gemini-2.5-pro",
    "gemini-2.5-flash-lite": "gemini-2.5-flash-lite",
    "gemini-2.5-flash": "gemini-2.5-flash",
    "gemini-2.0-flash-lite": "gemini-2.0-flash-lite",
    "gemini-2.0-flash": "gemini-2.0-flash",
    "gemini-1.5-pro": "gemini-1.5-pro",
    "gemini-1.5-flash-8b": "gemini-1.5-flash-8b",
    "gemini-1.5-flash": "gemini-1.5-flash",
    "gemini": "gemini-pro-latest",
    "llama-4-maverick": "llama-4-maverick-17b-128e-instruct",
    "llama-4-scout": "llama-4-scout-17b-16e-instruct",
    "llama-3.3": "llama-3.3-70b-instruct",
    "llama-3.2": "llama-3.2-3b-instruct",
    "llama-3.1": "llama-3.1-8b-instruct",
    "llama-3": "llama-3-8b-instruct",
    "qwen3-coder": "qwen3-coder-30b-a3b-instruct",
    "qwen3-2507": "qwen3-30b-a3b-instruct-2507",
    "qwen3": "qwen3-8b",
    "qwen2.5": "qwen2.5-7b-instruct",
    "deepseek-v4": "deepseek-v4-flash",
    "deepseek-chat": "deepseek-chat",
    "deepseek-reasoner": "deepseek-reasoner",
    "deepseek-v3": "deepseek-v3",
    "deepseek-r1": "deepseek-r1",
    "mistral-large-3": "mistral-large-2512",
    "mistral-large": "mistral-large-2411",
    "mistral-small-3": "mistral-small-2503",
    "mistral-small": "mistral-small-2409",
    "codestral-22b": "codestral-2405",
    "codestral": "codestral-2508",
    "mixtral-8x22b": "mixtral-8x22b-instruct-v0.1",
    "mixtral": "mixtral-8x7b-instruct-v0.1",
    "mistral-nemo": "mistral-nemo-instruct-2407",
    "mistral-7b": "mistral-7b-instruct-v0.3",
    "gemma-3n": "gemma-3n-e2b-it",
    "gemma-3-1b": "gemma-3-1b-it",
    "gemma-3-270m": "gemma-3-270m-it",
    "gemma-3": "gemma-3-4b-it",
    "gemma-4-small": "gemma-4-e4b-it",
    "gemma-4": "gemma-4-31b-it",
    "gemma-2": "gemma-2-9b-it",
    "phi-4-mini": "phi-4-mini-instruct",
    "phi-4-multimodal": "phi-4-multimodal-instruct",
    "phi-4-reasoning": "phi-4-reasoning-plus",
    "phi-4": "phi-4",
    "phi-3.5": "phi-3.5-moe-instruct",
    "phi-3-128k": "phi-3-medium-128k-instruct",
    "phi-3": "phi-3-small-8k-instruct",
    "grok-4.1-fast": "grok-4-1-fast-reasoning",
    "grok-4-fast": "grok-4-fast-non-reasoning",
    "grok-4.20": "grok-4.20-non-reasoning",
    "grok-4.3": "grok-4.3",
    "grok-code-fast": "grok-code-fast-1",
    "grok-4": "grok-4-latest",
    "grok-3": "grok-3-fast",
    "grok-2-vision": "grok-2-vision-1212",
    "grok-2": "grok-2-1212",
}

UNKNOWN_MODELS = [
    "my-finetune",
    "text-embedding-3-large",
    "llama-2-13b-chat",
    "codellama:13b",
    "qwen2-57b-a14b-instruct",
    "gpt-50",
    "o10",
    "amazon.nova-pro-v1:0",
    "gemini-1.0-pro",
    "grokking",
    "nope/nope/",
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog()


@pytest.mark.parametrize(("model", "name", "window"), REAL_MODELS)
def test_real_model_strings_resolve(catalog: Catalog, model: str, name: str, window: int) -> None:
    entry = catalog.lookup(model)
    assert entry is not None, model
    assert (entry.name, entry.max_input or entry.context_window) == (name, window)


@pytest.mark.parametrize("model", UNKNOWN_MODELS)
def test_unknown_models_are_none(catalog: Catalog, model: str) -> None:
    assert catalog.lookup(model) is None


@pytest.mark.parametrize("model", [None, "", "   ", "/"])
def test_empty_model_is_none(catalog: Catalog, model: str | None) -> None:
    assert catalog.lookup(model) is None


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("GPT-4o", "gpt-4o"),
        ("OpenAI/GPT-4O-2024-08-06", "gpt-4o"),
        ("Claude-3-5-Sonnet-20241022", "claude-3.5-sonnet"),
        ("US.Anthropic.Claude-Sonnet-4-5-20250929-V1:0", "claude-sonnet-4.5"),
        ("Models/Gemini-2.5-Pro", "gemini-2.5-pro"),
        ("Llama3.1:8B", "llama-3.1"),
        ("  gpt-4o  ", "gpt-4o"),
    ],
)
def test_matching_is_case_insensitive(catalog: Catalog, model: str, name: str) -> None:
    entry = catalog.lookup(model)
    assert entry is not None
    assert entry.name == name


def test_user_entries_win_over_builtins() -> None:
    mine = CatalogEntry("my-4o", "gpt-4o*", 64_000)
    cat = Catalog([mine])
    assert cat.lookup("gpt-4o-2024-08-06") is mine
    assert cat.lookup("openai/gpt-4o") is mine  # matched after normalisation
    other = cat.lookup("gpt-4o-mini")
    assert other is mine  # the user's glob is broader, and user entries come first
    untouched = cat.lookup("claude-3-haiku-20240307")
    assert untouched is not None
    assert untouched.name == "claude-3-haiku"


def test_user_entries_match_the_raw_string_first() -> None:
    routed = CatalogEntry("openrouter-4o", "openai/gpt-4o*", 100_000)
    plain = CatalogEntry("plain-4o", "gpt-4o*", 90_000)
    cat = Catalog([plain, routed])
    # `plain` comes first in the list, but only `routed` matches the raw string.
    assert cat.lookup("openai/gpt-4o") is routed
    assert cat.lookup("azure/gpt-4o") is plain


def test_user_entries_in_order_and_case_insensitive() -> None:
    first = CatalogEntry("first", "MY-MODEL-*", 1_000)
    second = CatalogEntry("second", "my-model-large*", 2_000)
    cat = Catalog([first, second])
    assert cat.lookup("my-model-large-v2") is first
    assert cat.lookup("My-Model-x") is first


def test_user_entry_alternatives() -> None:
    both = CatalogEntry("both", "foo-*| bar-*", 5_000)
    cat = Catalog([both], builtin=False)
    assert cat.lookup("foo-1") is both
    assert cat.lookup("bar-2") is both
    assert cat.lookup("baz-3") is None


def test_builtin_can_be_turned_off() -> None:
    cat = Catalog(builtin=False)
    assert cat.lookup("gpt-4o") is None
    assert cat.entries == ()
    assert Catalog().entries == BUILTIN_CATALOG


def test_entries_lists_user_then_builtin() -> None:
    mine = CatalogEntry("mine", "mine*", 10)
    assert Catalog([mine]).entries == (mine, *BUILTIN_CATALOG)


def test_cache_stays_bounded_with_made_up_names() -> None:
    cat = Catalog()
    for i in range(10_000):
        assert cat.lookup(f"made-up-model-{i}") is None
    assert 0 < cat.cache_len <= DEFAULT_CACHE_SIZE
    entry = cat.lookup("gpt-4o")  # still resolves after the churn
    assert entry is not None
    assert entry.name == "gpt-4o"
    assert cat.cache_len <= DEFAULT_CACHE_SIZE


def test_cache_size_is_configurable_and_can_be_off() -> None:
    small = Catalog(cache_size=8)
    for i in range(100):
        small.lookup(f"gpt-4o-{i}")
    assert small.cache_len == 8
    off = Catalog(cache_size=0)
    entry = off.lookup("gpt-4o")
    assert entry is not None
    assert entry.name == "gpt-4o"
    assert off.cache_len == 0
    with pytest.raises(ValueError, match="cache_size"):
        Catalog(cache_size=-1)


def test_long_model_strings_are_resolved_but_not_cached() -> None:
    cat = Catalog()
    long_name = "gpt-4o-" + "x" * (MAX_CACHED_MODEL_LEN + 1)
    entry = cat.lookup(long_name)
    assert entry is not None
    assert entry.name == "gpt-4o"
    assert cat.cache_len == 0


def test_absurdly_long_model_strings_are_unknown() -> None:
    cat = Catalog([CatalogEntry("anything", "*", 1_000)])
    assert cat.lookup("gpt-4o-" + "x" * MAX_MODEL_LEN) is None
    assert cat.cache_len == 0
    near = cat.lookup("x" * MAX_MODEL_LEN)
    assert near is not None
    assert near.name == "anything"


def test_cached_result_is_the_same() -> None:
    cat = Catalog()
    first = cat.lookup("claude-sonnet-4-5")
    assert cat.cache_len == 1
    assert cat.lookup("claude-sonnet-4-5") is first
    assert cat.lookup("made-up") is None
    assert cat.lookup("made-up") is None  # a cached miss
    assert cat.cache_len == 2


def test_every_builtin_name_is_unique() -> None:
    names = [entry.name for entry in BUILTIN_CATALOG]
    assert len(names) == len(set(names))


def test_every_builtin_entry_has_an_example() -> None:
    assert set(OWN_EXAMPLE) == {entry.name for entry in BUILTIN_CATALOG}


@pytest.mark.parametrize("entry", BUILTIN_CATALOG, ids=lambda e: e.name)
def test_no_builtin_entry_is_shadowed(catalog: Catalog, entry: CatalogEntry) -> None:
    found = catalog.lookup(OWN_EXAMPLE[entry.name])
    assert found is entry


def test_builtin_entries_are_sane() -> None:
    for entry in BUILTIN_CATALOG:
        assert entry.name == entry.name.strip().lower()
        assert entry.match == entry.match.lower()
        assert 1_024 <= entry.context_window <= 10_000_000
        assert entry.max_input is None or entry.max_input < entry.context_window
        assert "/" not in entry.match  # built-ins match the normalised form only


def test_every_builtin_figure_has_a_source_comment() -> None:
    import inspect

    import trimgate.providers.catalog as module

    lines = inspect.getsource(module).splitlines()
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("BUILTIN_CATALOG")) :]
    seen_source = False
    for line in body:
        stripped = line.strip()
        if stripped.startswith("#"):
            seen_source = seen_source or bool(re.search(r"https://|Same source", stripped))
        elif stripped.startswith("_e("):
            assert seen_source, f"no source comment above: {stripped}"
            seen_source = False
        elif stripped == ")":
            break


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (("", "x*", 10), "name"),
        (("x", " | ", 10), "match"),
        (("x", "x*", 0), "context_window"),
        (("x", "x*", -5), "context_window"),
    ],
)
def test_invalid_entries_are_rejected(bad: tuple[str, str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CatalogEntry(*bad)


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("models/gemini-1.5-pro", "gemini-1.5-pro"),
        ("openai/gpt-4o", "gpt-4o"),
        ("OpenRouter/Anthropic/Claude-3.5-Sonnet", "claude-3.5-sonnet"),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet-20241022-v2:0"),
        ("us.anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet-20241022-v2:0"),
        ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307-v1:0"),
        ("deepseek.r1-v1:0", "deepseek-r1-v1:0"),
        ("meta.llama3-1-70b-instruct-v1:0", "llama3-1-70b-instruct-v1:0"),
        ("gemini-2.5-flash:streamGenerateContent", "gemini-2.5-flash"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet-v2@20241022"),
        ("llama3.1:8b", "llama3.1:8b"),
        ("us.my-model", "us.my-model"),
        ("trailing/", "trailing/"),
    ],
)
def test_normalize_model(raw: str, normalized: str) -> None:
    assert normalize_model(raw) == normalized


# --------------------------------------------------------------------------------------
# The models today's agents send by default (2026-12). Each row: the model string the
# agent sends, the entry it must resolve to, and the most input tokens (window or cap).
# Codex CLI 0.171.0: the first listed model of its bundled catalog
#   (codex-rs/models-manager/models.json, `codex debug models --bundled`), then its picker.
# Claude Code 2.1.332: its aliases (opus / sonnet / haiku / fable) and the ids they stand
#   for on Bedrock and gateways, from its model registry.
# Gemini CLI 0.61.0: packages/core/src/config/models.ts (DEFAULT_GEMINI_MODEL,
#   DEFAULT_GEMINI_FLASH_MODEL, DEFAULT_GEMINI_FLASH_LITE_MODEL, PREVIEW_*, GEMMA_4_*).
AGENT_DEFAULTS: list[tuple[str, str, str, int]] = [
    ("codex default", "gpt-6.2-sol", "gpt-6.2", 922_000),
    ("codex picker", "gpt-6.2-astra", "gpt-6.2", 922_000),
    ("codex picker", "gpt-6.1-terra", "gpt-6.1", 922_000),
    ("codex picker", "gpt-6.1-sol", "gpt-6.1", 922_000),
    ("codex picker", "gpt-6-astra", "gpt-6", 922_000),
    ("codex picker", "gpt-6-sol", "gpt-6", 922_000),
    ("codex picker", "gpt-6-luna", "gpt-6", 922_000),
    ("codex picker", "gpt-5.6-sol", "gpt-5.6", 922_000),
    ("codex picker", "gpt-5.6-terra", "gpt-5.6", 922_000),
    ("codex picker", "gpt-5.5", "gpt-5.5", 922_000),
    ("claude-code opus", "claude-opus-5-5", "claude-opus-5", 1_000_000),
    ("claude-code sonnet", "claude-sonnet-5-5", "claude-sonnet-5", 1_000_000),
    ("claude-code haiku", "claude-haiku-5-5", "claude-haiku-5", 1_000_000),
    ("claude-code fable", "claude-fable-5-2", "claude-fable", 1_000_000),
    ("claude-code bedrock opus", "us.anthropic.claude-opus-5-5", "claude-opus-5", 1_000_000),
    ("claude-code bedrock sonnet", "us.anthropic.claude-sonnet-4-5", "claude-sonnet-4.5", 200_000),
    ("claude-code bedrock haiku", "claude-haiku-4-5", "claude-haiku-4.5", 200_000),
    ("claude-code gateway opus", "claude-opus-4-7", "claude-opus-4.7", 1_000_000),
    ("claude-code gateway sonnet", "claude-sonnet-4-6", "claude-sonnet-4.6", 1_000_000),
    ("claude-code [1m] tag", "claude-sonnet-4-5-20250929[1m]", "claude-sonnet-4.5", 200_000),
    ("claude-code mythos", "claude-mythos-preview", "claude-mythos", 1_000_000),
    ("gemini-cli default", "gemini-2.5-pro", "gemini-2.5-pro", 1_048_576),
    ("gemini-cli flash", "gemini-3.5-flash", "gemini-3-flash", 1_048_576),
    ("gemini-cli flash-lite", "gemini-3.1-flash-lite", "gemini-3-flash", 1_048_576),
    ("gemini-cli preview", "gemini-3-pro-preview", "gemini-3-pro", 1_048_576),
    ("gemini-cli preview", "gemini-3.1-pro-preview-customtools", "gemini-3-pro", 1_048_576),
    ("gemini-cli preview flash", "gemini-3-flash-preview", "gemini-3-flash", 1_048_576),
    (
        "gemini-cli computer use",
        "gemini-2.5-computer-use-preview-10-2025",
        "gemini-computer-use",
        128_000,
    ),
    ("gemini-cli gemma", "gemma-4-31b-it", "gemma-4", 256_000),
    ("gemini-cli gemma", "gemma-4-26b-a4b-it", "gemma-4", 256_000),
]


@pytest.mark.parametrize(
    ("agent", "model", "name", "most_input"), AGENT_DEFAULTS, ids=[row[1] for row in AGENT_DEFAULTS]
)
def test_agent_default_models_resolve(
    catalog: Catalog, agent: str, model: str, name: str, most_input: int
) -> None:
    entry = catalog.lookup(model)
    assert entry is not None, f"{agent}: {model} would be budgeted at the fallback"
    assert entry.name == name
    assert (entry.max_input or entry.context_window) == most_input


def _literals(annotation: object) -> list[str]:
    import typing

    found: list[str] = []
    for arg in typing.get_args(annotation):
        if isinstance(arg, str):
            found.append(arg)
        elif typing.get_origin(arg) is typing.Literal or typing.get_args(arg):
            found.extend(_literals(arg))
    return found


def test_every_openai_sdk_chat_model_is_known(catalog: Catalog) -> None:
    from openai.types.shared.chat_model import ChatModel

    models = _literals(ChatModel)
    assert "gpt-6.2-sol" in models  # the installed SDK is the one these rows were read from
    assert [m for m in models if catalog.lookup(m) is None] == []


def test_every_anthropic_sdk_model_is_known(catalog: Catalog) -> None:
    from anthropic.types.model_param import ModelParam

    models = _literals(ModelParam)
    assert "claude-opus-5-5" in models
    assert [m for m in models if catalog.lookup(m) is None] == []


# --------------------------------------------------------------------------------------
# Opt-in windows: the anthropic-beta header.


def test_sonnet_4_and_4_5_take_the_1m_beta(catalog: Catalog) -> None:
    for model in ("claude-sonnet-4-5-20250929", "claude-sonnet-4-20250514", "claude-sonnet-4-5"):
        entry = catalog.lookup(model)
        assert entry is not None
        assert entry.window_for(()) == 200_000
        assert entry.window_for(anthropic_beta_tokens(ANTHROPIC_CONTEXT_1M_BETA)) == 1_000_000
        header = " interleaved-thinking-2025-05-14 , Context-1M-2025-08-07,"
        assert entry.window_for(anthropic_beta_tokens(header)) == 1_000_000
        assert entry.window_for(anthropic_beta_tokens("context-1m-2025-08-08")) == 200_000


@pytest.mark.parametrize(
    "model", ["claude-opus-4-5", "claude-haiku-4-5", "claude-3-7-sonnet-20250219", "gpt-6.2-sol"]
)
def test_the_beta_does_not_raise_other_models(catalog: Catalog, model: str) -> None:
    entry = catalog.lookup(model)
    assert entry is not None
    beta = anthropic_beta_tokens(ANTHROPIC_CONTEXT_1M_BETA)
    assert entry.window_for(beta) == entry.context_window


def test_native_1m_models_keep_1m_with_or_without_the_beta(catalog: Catalog) -> None:
    for model in ("claude-sonnet-4-6", "claude-opus-4-6", "claude-sonnet-5-5"):
        entry = catalog.lookup(model)
        assert entry is not None
        assert entry.window_for(()) == 1_000_000
        assert entry.window_for(anthropic_beta_tokens(ANTHROPIC_CONTEXT_1M_BETA)) == 1_000_000


@pytest.mark.parametrize(
    ("values", "tokens"),
    [
        ((None,), set()),
        (("",), set()),
        ((" , ,",), set()),
        (("context-1m-2025-08-07",), {"context-1m-2025-08-07"}),
        (("a,b", " B , c "), {"a", "b", "c"}),  # the header may be sent more than once
        (("A-B,\tc-d ",), {"a-b", "c-d"}),
        (("x" * 5000 + ",context-1m-2025-08-07",), set()),  # an absurd value is ignored
    ],
)
def test_anthropic_beta_tokens(values: tuple[str | None, ...], tokens: set[str]) -> None:
    assert anthropic_beta_tokens(*values) == tokens


def test_anthropic_beta_tokens_are_bounded() -> None:
    many = ",".join(f"beta-{i}" for i in range(300))
    assert len(anthropic_beta_tokens(many)) == 64


@given(
    tokens=st.lists(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=30),
        max_size=8,
    ),
    spaces=st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=2, max_size=2),
    upper=st.booleans(),
)
def test_beta_parsing_ignores_spacing_case_and_order(
    tokens: list[str], spaces: list[str], upper: bool
) -> None:
    pad_left, pad_right = spaces
    rendered = [(t.upper() if upper else t) for t in tokens]
    forward = ",".join(f"{pad_left}{t}{pad_right}" for t in rendered)
    backward = ",".join(reversed(rendered))
    assert anthropic_beta_tokens(forward) == anthropic_beta_tokens(backward) == set(tokens)


@given(
    tokens=st.frozensets(
        st.sampled_from([ANTHROPIC_CONTEXT_1M_BETA, "other-beta", "context-1m", "x"]), max_size=4
    )
)
def test_window_for_is_never_below_the_default(tokens: frozenset[str]) -> None:
    for entry in BUILTIN_CATALOG:
        window = entry.window_for(tokens)
        assert window >= entry.context_window
        if ANTHROPIC_CONTEXT_1M_BETA not in tokens:
            assert window == entry.context_window


def test_builtin_betas_raise_the_window() -> None:
    with_betas = [entry for entry in BUILTIN_CATALOG if entry.betas]
    assert {entry.name for entry in with_betas} == {"claude-sonnet-4", "claude-sonnet-4.5"}
    for entry in with_betas:
        for token, window in entry.betas:
            assert token == token.strip().lower()
            assert window > entry.context_window


def test_user_entries_may_carry_betas() -> None:
    mine = CatalogEntry("mine", "mine*", 100_000, betas=(("long-2099-01-01", 400_000),))
    cat = Catalog([mine], builtin=False)
    entry = cat.lookup("mine-v1")
    assert entry is mine
    assert entry.window_for(anthropic_beta_tokens("long-2099-01-01")) == 400_000
    assert entry.window_for(anthropic_beta_tokens("other")) == 100_000


@pytest.mark.parametrize(
    ("betas", "message"),
    [
        ((("", 10),), "beta token"),
        ((("Upper-Case", 10),), "beta token"),
        ((("a,b", 10),), "beta token"),
        (((" padded", 10),), "beta token"),
        ((("ok", 0),), "window"),
        ((("ok", True),), "window"),
    ],
)
def test_invalid_betas_are_rejected(betas: tuple[tuple[str, int], ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CatalogEntry("x", "x*", 10, betas=betas)
