"""The repository documents itself: no file points outside it, and docs/ names every
metric, trimgate header and config key the code has, so the docs cannot fall behind."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from trimgate.config import Config

ROOT = Path(__file__).resolve().parent.parent

# Spelled in pieces so that this file does not match itself.
OUTSIDE = re.compile(
    "|".join(
        (
            re.escape("../" + "shared"),
            r"\b" + "SPEC" + r"\.md\b",
            r"\b" + "DESIGN" + r"\.md\b",
            r"\b" + "SPEC" + r" ?\u00a7",  # a section of that file
            r"(?<![\w.-])" + "research" + "/",  # a path, not a URL like entropy-research/x
        )
    )
)
HEADER = re.compile(r"x-trimgate-[a-z][a-z-]*[a-z]")
METRIC = re.compile(r"\"(trimgate_[a-z_]+)\"")


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))


def test_no_file_refers_outside_the_repository() -> None:
    found = []
    for path in _tracked_files():
        if not path.is_file():  # deleted in the work tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "references to files outside the repository:\n" + "\n".join(found)


def test_every_metric_is_documented() -> None:
    names = set(METRIC.findall((ROOT / "trimgate/proxy/metrics.py").read_text(encoding="utf-8")))
    assert "trimgate_requests_total" in names  # the pattern still finds them
    docs = _docs_text()
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", docs))
    assert not missing, f"metrics not named in docs/: {missing}"


def test_every_trimgate_header_is_documented() -> None:
    names: set[str] = set()
    for path in sorted((ROOT / "trimgate").rglob("*.py")):
        names.update(HEADER.findall(path.read_text(encoding="utf-8")))
    assert "x-trimgate-request-id" in names
    docs = _docs_text()
    missing = sorted(n for n in names if not re.search(rf"`{re.escape(n)}\b", docs))
    assert not missing, f"x-trimgate-* headers not named in docs/: {missing}"


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        out.append(prefix + name)
        inner = field.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            out.extend(_keys(inner, f"{prefix}{name}."))
    return out


def test_every_config_key_is_documented() -> None:
    from trimgate.config import ModelEntry, UpstreamConfig

    keys = _keys(Config) + _keys(UpstreamConfig) + _keys(ModelEntry)
    assert "trimming.reactive.max_retries" in keys
    docs = _docs_text()

    # a key is documented when its last part appears as code in docs/: `max_retries`,
    # `reactive.max_retries`, `breadcrumb.text` (for breadcrumb)
    def documented(key: str) -> bool:
        last = re.escape(key.rsplit(".", 1)[-1])
        return re.search(rf"`(?:[a-z_]+\.)*{last}[`.]", docs) is not None

    missing = sorted(k for k in keys if not documented(k))
    assert not missing, f"config keys not named in docs/: {missing}"
