"""The import direction of the layers (README.md, "Development"), enforced."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PURE = [
    "trimgate.attribution",
    "trimgate.history",
    "trimgate.trimming",
    "trimgate.providers",
    "trimgate.sse",
]
FORBIDDEN = ["aiohttp", "asyncio", "tenacity", "prometheus_client", "logging"]

PACKAGE = Path(__file__).resolve().parents[1] / "trimgate"
MAX_FUNCTION_LINES = 60  # def line to last line, decorators excluded
# The functions allowed to be longer, by file and qualified name: take an entry out
# once its function is split (test_long_function_exceptions_are_still_long says when).
HOT_LOOP = "hot loop, compiled"
LONG_FUNCTION_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("providers/anthropic.py", "AnthropicCodec.decode"): HOT_LOOP,
    ("providers/gemini.py", "_scan"): HOT_LOOP,
    ("providers/openai_chat.py", "OpenAIChatCodec.decode"): HOT_LOOP,
    ("providers/openai_chat.py", "OpenAIChatCodec.decode_raw"): HOT_LOOP,
    ("providers/openai_responses.py", "OpenAIResponsesCodec.decode"): HOT_LOOP,
    ("trimming/turns.py", "trim_to_recent_turns"): HOT_LOOP,
}


def test_core_and_codecs_import_no_io() -> None:
    code = (
        "import sys\n"
        f"for name in {PURE!r}: __import__(name)\n"
        "import trimgate.providers.registry\n"
        f"print(','.join(m for m in {FORBIDDEN!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_trimming_knows_only_history() -> None:
    code = (
        "import sys\n"
        "import trimgate.trimming\n"
        "print(sorted(m for m in sys.modules if m.startswith('trimgate.')"
        " and not m.startswith(('trimgate.trimming', 'trimgate.history'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_core_runs_compiled_unless_asked_for_pure_python() -> None:
    """setup.py compiles the core with mypyc; CI must test what users run."""
    import trimgate

    if os.environ.get("TRIMGATE_PURE", "") not in ("", "0"):
        pytest.skip("TRIMGATE_PURE is set: the pure-Python core is under test")
    assert trimgate.compiled(), "the core is not compiled: see setup.py, or set TRIMGATE_PURE=1"
    # built with it, all or nothing: the C count of UTF-8 lengths
    from trimgate.trimming import estimate
    from trimgate.trimming._utf8 import utf8_len

    assert estimate._utf8_len is utf8_len


def test_trimming_imports_nothing_of_proxy_or_providers() -> None:
    """The policy rules live in the core too: it reads plain values, not the shell's."""
    code = (
        "import sys\n"
        "import trimgate.trimming.policy, trimgate.trimming.pipeline\n"
        "print(sorted(m for m in sys.modules if m.startswith("
        "('trimgate.proxy', 'trimgate.providers', 'trimgate.config'))))\n"
        "print('pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["[]", "False"]


def test_the_pure_steps_of_the_request_path_import_no_aiohttp() -> None:
    """Examining a body and reading usage are plain code: the shell does their I/O."""
    code = (
        "import sys\n"
        "import trimgate.proxy.examine, trimgate.proxy.usage, trimgate.proxy.routing\n"
        "print(','.join(m for m in ['aiohttp', 'tenacity', 'prometheus_client']"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_the_trim_command_loads_no_server_machinery() -> None:
    """``trimgate trim`` runs in a fresh interpreter without aiohttp, tenacity or
    prometheus_client: it is a file filter, not a server."""
    code = (
        "import io, sys\n"
        "from trimgate import cli\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO("
        'b\'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}\'))\n'
        "sys.stdout = io.TextIOWrapper(io.BytesIO())\n"
        "code = cli.main(['trim', '-'])\n"
        "loaded = [m for m in ['aiohttp', 'tenacity', 'prometheus_client'] if m in sys.modules]\n"
        "sys.stderr.write(f'{code} {loaded}')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stderr.strip().endswith("0 []"), out.stderr


def _function_lengths() -> dict[tuple[str, str], int]:
    """Every function of the package: (file under trimgate/, qualified name) -> lines."""
    lengths: dict[tuple[str, str], int] = {}

    def visit(node: ast.AST, prefix: str, path: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", path)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                assert child.end_lineno is not None
                name = f"{prefix}{child.name}"
                lengths[(path, name)] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.", path)
            else:
                visit(child, prefix, path)

    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(PACKAGE).as_posix()
        visit(ast.parse(file.read_text(encoding="utf-8")), "", path)
    return lengths


def test_no_function_is_longer_than_60_lines() -> None:
    """A function reads top to bottom on one screen; split a longer one into named
    steps. The codecs' and the trimming core's hot loops are the listed exceptions."""
    lengths = _function_lengths()
    assert len(lengths) > 100  # the scan found the package
    too_long = {
        f"trimgate/{path}: {name} ({n} lines)"
        for (path, name), n in lengths.items()
        if n > MAX_FUNCTION_LINES and (path, name) not in LONG_FUNCTION_EXCEPTIONS
    }
    assert not too_long, sorted(too_long)


def test_long_function_exceptions_are_still_long() -> None:
    """The exceptions only shrink: one split (or gone) comes off the list."""
    lengths = _function_lengths()
    stale = {
        f"trimgate/{path}: {name}"
        for path, name in LONG_FUNCTION_EXCEPTIONS
        if lengths.get((path, name), 0) <= MAX_FUNCTION_LINES
    }
    assert not stale, f"take these off LONG_FUNCTION_EXCEPTIONS: {sorted(stale)}"
