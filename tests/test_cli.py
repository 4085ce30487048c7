"""The command line: check-config, trim, demo, serve."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat, responses_input

CRUMB = "[earlier turns omitted to fit the context window]"


def run(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "trimgate", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_check_config_prints_effective_config_with_secrets_redacted(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "server: {admin_token: hunter2}\n"
        "upstreams:\n"
        "  groq: {provider: openai, base_url: 'https://user:pw@api.groq.com/openai', "
        "prefix: /groq}\n"
        "trimming: {mode: shadow}\n"
    )
    out = run("check-config", str(f))
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "hunter2" not in text and "pw@" not in text
    data = yaml.safe_load(text)
    assert data["trimming"]["mode"] == "shadow"
    assert data["server"]["admin_token"] == "<redacted>"
    assert data["trimming"]["breadcrumb"]["text"] == CRUMB


def test_check_config_names_every_problem_by_key_path(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "upstreams:\n"
        "  groq: {provider: openai, base_url: 'not a url'}\n"
        "trimming:\n"
        "  mode: loud\n"
        "  reactive: {max_retries: 3, bogus: 1}\n"
        "serverr: {}\n"
    )
    out = run("check-config", str(f))
    assert out.returncode == 2
    lines = out.stderr.decode().strip().splitlines()
    assert "upstreams.groq.base_url: not a URL" in lines
    assert any(line.startswith("trimming.mode:") for line in lines)
    assert "trimming.reactive.bogus: unknown key" in lines
    assert "serverr: unknown key" in lines
    assert len(lines) == 4


def test_check_config_bad_yaml_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("server: [unclosed\n")
    out = run("check-config", str(f))
    assert out.returncode == 2 and b"not valid YAML" in out.stderr
    out = run("check-config", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and b"cannot read" in out.stderr


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        ("openai", openai_chat(8, model="gpt-4o")),
        ("anthropic", anthropic_messages(8, model="claude-sonnet-4-5")),
        ("openai-responses", responses_input(8, model="gpt-4o")),
        ("gemini", {**gemini_contents(8)}),
    ],
)
def test_trim_dry_run_every_format(fmt: str, body: dict[str, Any]) -> None:
    out = run(
        "trim",
        "--format",
        fmt,
        "--model",
        "gemini-2.5-pro",
        "--budget",
        "900",
        "-",
        stdin=orjson.dumps(body),
    )
    assert out.returncode == 0, out.stderr
    forwarded = json.loads(out.stdout)
    report = json.loads(out.stderr.decode().strip().splitlines()[-1])
    assert report["budget"] == 900 and report["trimmed"] is True
    assert report["tokens_after"] <= 900 < report["tokens_before"]
    assert report["dropped_turns"] >= 1 and report["kept_turns"] >= 1
    assert set(report) >= {"dropped_messages", "tokens_before", "tokens_after", "kept_turns"}
    text = json.dumps(forwarded)
    # The first prompt is the anchor: pinned before the breadcrumb, its size reported
    assert CRUMB in text and "task 7" in text and "task 1:" not in text
    assert text.index("task 0:") < text.index(CRUMB) < text.index("task 7")
    assert report["anchor_tokens"] > 0


def test_trim_guesses_the_format_and_leaves_small_bodies_alone(tmp_path: Path) -> None:
    f = tmp_path / "body.json"
    body = anthropic_messages(2, size=10, model="claude-sonnet-4-5")
    f.write_bytes(orjson.dumps(body))
    out = run("trim", str(f))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stderr)
    assert report["format"] == "anthropic" and report["trimmed"] is False
    assert report["catalog_entry"] is not None and report["budget"] > 100_000
    assert json.loads(out.stdout) == body


def test_trim_rejects_invalid_json() -> None:
    out = run("trim", "-", stdin=b"{nope")
    assert out.returncode == 2 and b"not valid JSON" in out.stderr


def test_demo_runs_offline_and_shows_trims() -> None:
    out = run("demo")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "preemptive" in text and "x-trimgate-trimmed: true" in text
    assert "trimgate_trims_total" in text and "history_trimmed" in text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never became ready")


def test_serve_with_builtin_defaults_answers_health_and_reads_config_env(tmp_path: Path) -> None:
    port = free_port()
    f = tmp_path / "c.yaml"
    f.write_text(f"server: {{port: {port}}}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trimgate", "serve"],
        env={**os.environ, "TRIMGATE_CONFIG": str(f)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert json.loads(resp.read()) == {"status": "ok"}
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    first = json.loads(err.decode().splitlines()[0])
    assert first["msg"] == "listening" and first["port"] == port
