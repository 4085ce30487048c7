"""The import direction of DESIGN.md, enforced."""

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
