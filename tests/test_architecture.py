"""The import direction of the layers (README.md, "Development"), enforced."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PURE = [
    "trimgate.attribution",
    "trimgate.history",
    "trimgate.trimming",
    "trimgate.providers",
    "trimgate.sse",
]
FORBIDDEN = ["aiohttp", "asyncio", "tenacity", "prometheus_client", "logging"]


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
