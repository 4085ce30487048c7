"""The command line: serve, check-config, trim, demo (see README.md, "Commands")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from trimgate.config import Config, load_config, redacted
from trimgate.errors import ConfigError, DecodeError

if TYPE_CHECKING:  # imported where used: each command loads only what it needs
    from trimgate.providers.catalog import CatalogEntry
    from trimgate.trimming.pipeline import TrimPlan

FORMATS = ("openai", "openai-responses", "anthropic", "gemini")
DEFAULT_PATHS = {
    "openai": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/{model}:generateContent",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trimgate", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="config file (default: $TRIMGATE_CONFIG, else built-ins)")
    serve.add_argument("--host", help="listen address (default: server.host)")
    serve.add_argument("--port", type=int, help="listen port (default: server.port)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.add_argument("--log-level", default="INFO")

    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("file")

    trim = sub.add_parser("trim", help="offline dry run of one request body")
    trim.add_argument("--format", choices=FORMATS, help="wire format (default: guessed)")
    trim.add_argument("--model", help="model name (default: the body's)")
    trim.add_argument("--budget", type=int, help="token budget (default: from the config)")
    trim.add_argument("--config", help="config file")
    trim.add_argument("file", nargs="?", default="-", help="request body file, or - for stdin")

    sub.add_parser("demo", help="a self-contained tour on loopback")

    args = parser.parse_args(argv)
    try:
        if args.command == "check-config":
            return _check_config(args.file)
        if args.command == "trim":
            return _trim(args)
        if args.command == "demo":
            from trimgate.demo import run_demo

            return asyncio.run(run_demo())
        return _serve(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2


def _check_config(path: str) -> int:
    config = load_config(path)
    sys.stdout.write(yaml.safe_dump(redacted(config), sort_keys=False))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from trimgate import logs
    from trimgate.proxy.serve import serve

    logs.setup(args.log_level.upper())
    config = load_config(args.config)
    server = config.server.model_copy(
        update={k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    )
    config = config.model_copy(update={"server": server})
    if args.workers < 1:
        print("--workers: must be at least 1", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        serve(config, workers=args.workers)
    return 0


def guess_format(body: dict[str, Any]) -> str:
    if "contents" in body or "generateContentRequest" in body:
        return "gemini"
    if "input" in body and "messages" not in body:
        return "openai-responses"
    messages = body.get("messages")
    if "system" in body or (
        isinstance(body.get("max_tokens"), int)
        and "anthropic" in str(body.get("model", "")).lower()
    ):
        return "anthropic"
    if isinstance(messages, list):
        for m in messages:
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                for part in m["content"]:
                    if isinstance(part, dict) and part.get("type") in (
                        "tool_use",
                        "tool_result",
                        "thinking",
                    ):
                        return "anthropic"
    return "openai"


def _trim(args: argparse.Namespace) -> int:
    from trimgate.providers.base import DecodeOptions
    from trimgate.providers.catalog import Catalog, CatalogEntry
    from trimgate.providers.registry import CODECS
    from trimgate.trimming.pipeline import plan
    from trimgate.trimming.policy import make_policy

    config: Config = load_config(args.config)
    raw = sys.stdin.buffer.read() if args.file == "-" else _read(args.file)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        print("input is not valid JSON", file=sys.stderr)
        return 2
    if not isinstance(body, dict):
        print("input is not a JSON object", file=sys.stderr)
        return 2
    wire = args.format or guess_format(body)
    codec = CODECS[wire]
    model = (
        args.model or body.get("model") or (body.get("generateContentRequest") or {}).get("model")
    )
    path = DEFAULT_PATHS[wire].format(model=str(model or "unknown").removeprefix("models/"))
    t = config.trimming
    try:
        decoded = codec.decode(
            body,
            path=path,
            options=DecodeOptions(breadcrumb=t.breadcrumb.text, media_tokens=t.media_tokens),
        )
    except DecodeError as exc:
        print(f"not a {wire} request body: {exc.reason}", file=sys.stderr)
        return 2
    if decoded.skip:
        sys.stdout.buffer.write(raw)
        sys.stderr.write(orjson.dumps({"skipped": decoded.skip}).decode() + "\n")
        return 0
    catalog = Catalog(
        [
            CatalogEntry(name=m.name or m.match, match=m.match, context_window=m.context_window)
            for m in config.models
        ]
    )
    entry = catalog.lookup(str(model) if model else decoded.model)
    overrides = {(m.name or m.match): m.trimming for m in config.models}
    tc = config.for_model(overrides.get(entry.name) if entry else None)
    window = entry.context_window if entry else tc.max_context_tokens
    policy = make_policy(
        tc.settings(),
        window,
        output_limit=decoded.output_limit,
        hoistable=decoded.hoistable,
        budget=args.budget,
        max_input=entry.max_input if entry else None,
    )
    result = plan(decoded.conversation, policy)
    out = codec.encode(decoded, result, breadcrumb=tc.breadcrumb.text) if result.changed else body
    sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    report = _trim_report(wire, str(model) if model else None, entry, result)
    sys.stderr.write(orjson.dumps(report).decode() + "\n")
    return 0


def _trim_report(
    wire: str, model: str | None, entry: CatalogEntry | None, result: TrimPlan
) -> dict[str, Any]:
    """What ``trim`` reports on stderr: the plan's report as one JSON object."""
    r = result.report
    return {
        "format": wire,
        "model": model,
        "catalog_entry": entry.name if entry else None,
        "trimmed": r.trimmed,
        "dropped_turns": r.dropped_turns,
        "kept_turns": r.kept_turns,
        "dropped_messages": r.dropped_messages,
        "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after,
        "budget": r.budget,
        "capped_messages": r.capped_messages,
        "orphans_removed": r.orphans_removed,
        "tool_results_capped": r.tool_results_capped,
        "anchor_tokens": r.anchor_tokens,
        "changed": result.changed,
    }


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read ({exc.strerror})"]) from exc


if __name__ == "__main__":
    raise SystemExit(main())
