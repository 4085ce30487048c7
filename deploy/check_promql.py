#!/usr/bin/env python3
"""Check the PromQL of the alert rules and the Grafana dashboard against a live Prometheus.

    python deploy/check_promql.py http://127.0.0.1:9090 [--rules FILE] [--dashboard FILE]
        [--require-data] [--allow-empty REGEX ...]

Every alerting/recording ``expr`` of the rules files and every panel target ``expr`` (and
``label_values(...)`` variable query) of the dashboards is sent to ``/api/v1/query``;
Grafana variables are substituted first (``$__rate_interval`` -> ``--rate-interval``,
``$__range`` -> ``--range``, any other ``$var`` -> ``.*``). Reported as problems:

- a query Prometheus rejects (HTTP 4xx/5xx or ``"status": "error"``);
- a ``trimgate_*`` metric name that is not in ``/api/v1/label/__name__/values``;
- a recording-rule name (``a:b:c``) used but not recorded by the rules files given;
- with ``--require-data``: a recording rule or panel target that returns no series.
  Alert expressions are exempt (they return series only while firing); so are queries
  matching an ``--allow-empty`` regex (matched against "<file>: <what>" and the query).

Exit 0 when clean, 1 on any problem, 2 when Prometheus cannot be reached. Stdlib and
PyYAML only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DEFAULT_RULES = HERE / "prometheus" / "rules.yml"
DEFAULT_DASHBOARD = HERE / "grafana" / "dashboards" / "trimgate.json"

# ${var}, ${var:format}, [[var]], $var
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_TRIMGATE_NAME = re.compile(r"(?<![\w:])trimgate_\w+(?![\w:])")
_RECORDED_NAME = re.compile(r"(?<![\w:])[a-zA-Z_]\w*:[\w:]*\w(?![\w:])")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.*?)\s*(?:,\s*\w+\s*)?\)\s*$", re.DOTALL)


@dataclass(frozen=True)
class Expr:
    source: str  # file name
    what: str  # "alert X", "record Y", "panel 'T' ref A", "variable model"
    query: str  # after variable substitution
    kind: str  # "alert" | "record" | "panel" | "variable"

    @property
    def where(self) -> str:
        return f"{self.source}: {self.what}"


class Unreachable(Exception):
    pass


def substitute(expr: str, rate_interval: str, range_: str) -> str:
    builtin = {
        "__rate_interval": rate_interval,
        "__interval": rate_interval,
        "__range": range_,
        "__range_s": str(_seconds(range_)),
        "__range_ms": str(_seconds(range_) * 1000),
        "__interval_ms": str(_seconds(rate_interval) * 1000),
    }

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return builtin.get(name, ".*")

    return _VARIABLE.sub(repl, expr)


def _seconds(duration: str) -> int:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total = 0.0
    for number, unit in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration):
        total += int(number) * units[unit]
    return int(total)


def rule_exprs(path: Path) -> Iterator[Expr]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            if "alert" in rule:
                yield Expr(path.name, f"alert {rule['alert']}", str(rule["expr"]), "alert")
            else:
                yield Expr(path.name, f"record {rule['record']}", str(rule["expr"]), "record")


def recorded_names(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for group in doc.get("groups", []):
            names.update(str(r["record"]) for r in group.get("rules", []) if "record" in r)
    return names


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # rows, collapsed or not


def dashboard_exprs(path: Path, rate_interval: str, range_: str) -> Iterator[Expr]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    dashboard = doc.get("dashboard", doc)  # accept an API export too
    for panel in _panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if expr:
                title = panel.get("title", panel.get("id"))
                what = f"panel {title!r} ref {target.get('refId', '?')}"
                yield Expr(path.name, what, substitute(expr, rate_interval, range_), "panel")
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        m = _LABEL_VALUES.match(query or "")
        if m and m.group(1):
            selector = substitute(m.group(1), rate_interval, range_)
            yield Expr(path.name, f"variable {var.get('name')}", selector, "variable")


def metric_names(expr: str, pattern: re.Pattern[str]) -> set[str]:
    return set(pattern.findall(_STRING.sub('""', expr)))


def api_get(base: str, path: str, params: dict[str, str], timeout: float) -> tuple[int, Any]:
    url = f"{base.rstrip('/')}{path}"
    data = urllib.parse.urlencode(params).encode() if params else None
    request = urllib.request.Request(url, data=data)  # POST form when params: no URL limit
    if data is not None:
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable(f"{url}: {exc}") from exc
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {"status": "error", "error": body[:200].decode(errors="replace")}


def check(args: argparse.Namespace) -> list[str]:
    rules: list[Path] = args.rules or [DEFAULT_RULES]
    dashboards: list[Path] = args.dashboard or [DEFAULT_DASHBOARD]
    exprs = [e for p in rules for e in rule_exprs(p)]
    exprs += [e for p in dashboards for e in dashboard_exprs(p, args.rate_interval, args.range)]
    allow_empty = [re.compile(p) for p in args.allow_empty]
    problems: list[str] = []

    status, body = api_get(args.prometheus, "/api/v1/label/__name__/values", {}, args.timeout)
    if status != 200 or body.get("status") != "success":
        raise Unreachable(f"/api/v1/label/__name__/values: HTTP {status}: {body.get('error')}")
    known = set(body["data"])
    recorded = recorded_names(rules)

    for e in exprs:
        for name in sorted(metric_names(e.query, _TRIMGATE_NAME) - known):
            problems.append(f"{e.where}: metric {name} is not known to Prometheus")
        for name in sorted(metric_names(e.query, _RECORDED_NAME) - recorded):
            problems.append(f"{e.where}: {name} is not recorded by the rules files")

        status, body = api_get(args.prometheus, "/api/v1/query", {"query": e.query}, args.timeout)
        if status != 200 or body.get("status") != "success":
            kind = body.get("errorType", "error")
            problems.append(f"{e.where}: HTTP {status} {kind}: {body.get('error')}\n    {e.query}")
            continue
        if not args.require_data or e.kind == "alert":
            continue
        if any(p.search(e.where) or p.search(e.query) for p in allow_empty):
            continue
        result = body["data"]["result"]
        if not result:
            problems.append(f"{e.where}: no data\n    {e.query}")
    print(f"checked {len(exprs)} expressions against {args.prometheus}", file=sys.stderr)
    return problems


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("prometheus", help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--rules", type=Path, action="append", help=f"(default {DEFAULT_RULES})")
    parser.add_argument(
        "--dashboard", type=Path, action="append", help=f"(default {DEFAULT_DASHBOARD})"
    )
    parser.add_argument(
        "--require-data",
        action="store_true",
        help="also report recording rules and panel targets that return no series",
    )
    parser.add_argument(
        "--allow-empty",
        action="append",
        default=[],
        metavar="REGEX",
        help="with --require-data: queries matching this may be empty (repeatable)",
    )
    parser.add_argument("--rate-interval", default="1m", help="$__rate_interval (default 1m)")
    parser.add_argument("--range", default="1h", help="$__range (default 1h)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        problems = check(args)
    except Unreachable as exc:
        print(f"check_promql: cannot query Prometheus: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
