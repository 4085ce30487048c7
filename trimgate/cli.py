"""The command line: serve, check-config, trim, demo (see README.md, "Commands")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
import yaml

import trimgate
from trimgate.config import Config, config_warnings, load_config, redacted
from trimgate.errors import ConfigError, DecodeError
from trimgate.providers.registry import REGISTRY

if TYPE_CHECKING:  # imported where used: each command loads only what it needs
    from trimgate.providers.catalog import CatalogEntry
    from trimgate.trimming.pipeline import TrimPlan


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, where help is), exit 2."""

    def error(self, message: str) -> Any:  # argparse types it NoReturn
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {value}")
    return value


def _budget(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of tokens: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 token, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="trimgate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"trimgate {trimgate.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="config file (default: $TRIMGATE_CONFIG, else built-ins)")
    serve.add_argument("--host", help="listen address (default: server.host)")
    serve.add_argument("--port", type=_port, help="listen port (default: server.port)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="INFO",
        help="log threshold (default INFO; any case)",
    )

    check = sub.add_parser("check-config", help="validate a config file")
    check.add_argument("file")

    trim = sub.add_parser("trim", help="offline dry run of one request body")
    trim.add_argument("--format", choices=REGISTRY.formats, help="wire format (default: guessed)")
    trim.add_argument("--model", help="model name (default: the body's)")
    trim.add_argument(
        "--budget", type=_budget, help="token budget, at least 1 (default: from the config)"
    )
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
    except OSError as exc:  # e.g. stdin or stdout closed, a file that vanished
        print(f"trimgate {args.command}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C in demo or trim: no traceback
        return 130


def _check_config(path: str) -> int:
    config = load_config(path)
    for warning in config_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(yaml.safe_dump(redacted(config), sort_keys=False))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from trimgate import logs
    from trimgate.proxy.serve import serve

    logs.setup(args.log_level)
    config = load_config(args.config)
    server = config.server.model_copy(
        update={k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    )
    config = config.model_copy(update={"server": server})
    if args.workers < 1:
        print("--workers: must be at least 1", file=sys.stderr)
        return 2
    ports = [("port", server.port)]
    if server.admin_port is not None:
        ports.append(("admin_port", server.admin_port))
    for what, port in ports:
        problem = _cannot_listen(server.host, port)
        if problem is not None:
            print(f"cannot listen on {server.host}:{port} ({what}): {problem}", file=sys.stderr)
            return 2
    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve(config, workers=args.workers)
    except OSError as exc:  # lost a race for the port since the check above
        print(f"cannot listen on {server.host}:{server.port}: {_why(exc)}", file=sys.stderr)
        return 2
    return 0


def _cannot_listen(host: str, port: int) -> str | None:
    """Why ``serve`` could not listen on host:port, or None: found by binding first, so
    that the answer is one line, not a traceback from inside the event loop."""
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot resolve the host ({exc.strerror})"
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(address)
        except OSError as exc:
            return _why(exc)
    return None


def _why(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "address already in use (another server listens there: pick another --port)"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "no such address on this machine (check --host / server.host)"
    return (exc.strerror or str(exc)).lower()


def _trim(args: argparse.Namespace) -> int:
    from trimgate.providers.base import DecodeOptions
    from trimgate.providers.catalog import Catalog, CatalogEntry
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
    wire = args.format or REGISTRY.guess_format(body)
    codec = REGISTRY.codecs[wire]
    model = (
        args.model or body.get("model") or (body.get("generateContentRequest") or {}).get("model")
    )
    path = codec.default_path.format(model=str(model or "unknown").removeprefix("models/"))
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
    window = entry.context_window if entry else (tc.max_context_tokens or 0)
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
    if entry is None and tc.max_context_tokens is None and not result.report.budget:
        report["skipped"] = "unknown-window"  # no window to trim to (no --budget)
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
