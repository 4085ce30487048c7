"""Session-wide checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

PACKAGE = Path(__file__).resolve().parent.parent / "trimgate"

# CI machines are shared and have two cores: how fast hypothesis draws and runs an
# example says nothing about trimgate (speed is measured in bench/), so neither a slow
# draw nor a slow example is a failure.
settings.register_profile("trimgate", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("trimgate")


def stale_compiled() -> list[str]:
    """Compiled modules (setup.py) older than their source: they would shadow the edit."""
    stale = []
    for ext in PACKAGE.rglob("*.so"):
        for suffix in (".py", ".c"):  # the mypyc modules, and the hand-written C ones (setup.py)
            source = ext.with_name(ext.name.split(".", 1)[0] + suffix)
            if source.exists() and source.stat().st_mtime > ext.stat().st_mtime:
                stale.append(str(source.relative_to(PACKAGE.parent)))
    return sorted(stale)


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = stale_compiled()
    if stale:
        pytest.exit(
            "compiled modules are older than their source, so the tests would run the old "
            f"code: {', '.join(stale)}. Rebuild with `pip install --no-deps -e .` "
            "(bash scripts/test does it for you) or delete the .so files to run pure Python.",
            returncode=2,
        )
