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

from tests.fakes import free_port
from tests.proxy.bodies import anthropic_messages, gemini_contents, openai_chat, responses_input

pytestmark = pytest.mark.shell  # (each command runs in a subprocess of its own)

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
    assert data["trimming"]["max_context_tokens"] is None  # unset unless configured


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


def test_trim_leaves_a_model_without_a_window_alone(tmp_path: Path) -> None:
    body = orjson.dumps(openai_chat(40, model="mystery-model"))
    out = run("trim", "-", stdin=body)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stderr)
    assert report["skipped"] == "unknown-window" and report["trimmed"] is False
    assert report["budget"] == 0 and report["catalog_entry"] is None
    f = tmp_path / "c.yaml"
    f.write_text("trimming: {max_context_tokens: 1000}\n")
    out = run("trim", "--config", str(f), "-", stdin=body)
    report = json.loads(out.stderr)
    assert "skipped" not in report and report["trimmed"] is True and report["budget"] == 1000


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
    # the tour shows a reactive retry: the fake overflows once and trimgate resends
    assert "2. A reactive retry (request " in text
    assert "x-trimgate-reason: reactive\n     x-trimgate-retries: 1" in text
    assert 'trimgate_reactive_retries_total{model="demo-coder",upstream="openai"} 1.0' in text
    assert "error 4" not in text  # the agent never saw the overflow


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


def test_check_config_warns_of_a_base_url_that_doubles_v1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trimgate.cli import main

    f = tmp_path / "c.yaml"
    f.write_text(
        "upstreams:\n"
        "  openai: {provider: openai, base_url: 'https://api.openai.com'}\n"
        "  groq: {provider: openai, base_url: 'https://api.groq.com/openai/v1/', prefix: /groq}\n"
        "  claude: {provider: anthropic, base_url: 'https://api.anthropic.com/v1'}\n"
        "  gem: {provider: gemini, base_url: 'https://generativelanguage.googleapis.com/v1beta'}\n"
        "  local: {provider: openai, base_url: 'http://127.0.0.1:8000/v1beta'}\n"
    )
    assert main(["check-config", str(f)]) == 0  # a warning, not an error
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 3, lines
    groq, claude, gem = lines
    assert groq.startswith("warning: upstreams.groq.base_url: ends in /v1; ")
    assert "/v1/v1/..." in groq and "use https://api.groq.com/openai," in groq
    assert "http://127.0.0.1:8788/groq/v1" in groq  # says when the doubling happens
    assert claude == (
        "warning: upstreams.claude.base_url: ends in /v1; requests already carry /v1, so the "
        "provider would get /v1/v1/... — use https://api.anthropic.com"
    )
    assert "/v1beta/v1beta/..." in gem and gem.endswith(
        "use https://generativelanguage.googleapis.com"
    )
    assert yaml.safe_load(out.out)["upstreams"]["groq"]["base_url"].endswith("/openai/v1")


def test_check_config_warns_of_a_host_name_no_resolver_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trimgate.cli import main

    f = tmp_path / "c.yaml"
    f.write_text(
        "upstreams:\n"
        f"  long: {{provider: openai, base_url: 'https://{'a' * 64}.example'}}\n"
        "  gaps: {provider: openai, base_url: 'https://api..example'}\n"
        "  fine: {provider: openai, base_url: 'https://b\u00fccher.example'}\n"
    )
    assert main(["check-config", str(f)]) == 0  # a warning: serve still starts
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"warning: upstreams.{name}.base_url: the host name has a label that is empty or over"
        " 63 bytes; no resolver takes it, so every request to it will get a 502"
        for name in ("long", "gaps")
    ]


def test_check_config_is_quiet_about_good_base_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trimgate.cli import main

    f = tmp_path / "c.yaml"
    f.write_text(
        "upstreams:\n"
        "  groq: {provider: openai, base_url: 'https://api.groq.com/openai', prefix: /groq}\n"
        "  v1x: {provider: openai, base_url: 'https://example.com/v10', prefix: /v10}\n"
        "  api: {provider: openai, base_url: 'https://example.com/v1/openai', prefix: /x}\n"
    )
    assert main(["check-config", str(f)]) == 0
    assert capsys.readouterr().err == ""


def test_serve_logs_each_config_warning_once_at_start_up(tmp_path: Path) -> None:
    port = free_port()
    f = tmp_path / "c.yaml"
    f.write_text(
        f"server: {{port: {port}}}\n"
        "upstreams:\n"
        "  anthropic: {provider: anthropic, base_url: 'https://api.anthropic.com/v1'}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "trimgate", "serve", "--config", str(f)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    lines = [json.loads(line) for line in err.decode().splitlines()]
    warnings = [line for line in lines if line.get("event") == "config_warning"]
    assert len(warnings) == 1, lines
    assert warnings[0]["level"] == "warning"
    assert warnings[0]["warning"].startswith("upstreams.anthropic.base_url: ends in /v1;")


def _main_exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from trimgate.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exits (usage errors, --version)
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--log-level", "nonsense"], "choose from 'DEBUG', 'INFO', 'WARNING'"),
        (["serve", "--port", "99999"], "--port: not a port number (0-65535): 99999"),
        (["serve", "--port", "http"], "--port: not a port number: 'http'"),
        (["trim", "--budget", "-5"], "--budget: must be at least 1 token, got -5"),
        (["trim", "--budget", "0"], "--budget: must be at least 1 token, got 0"),
        (["trim", "--budget", "lots"], "--budget: not a whole number of tokens: 'lots'"),
        (["trim", "/nonexistent/body.json"], "/nonexistent/body.json: cannot read"),
        (["check-config", "/"], "/: cannot read (Is a directory)"),
        (["check-config", "NOT-UTF8"], "not UTF-8 text (byte 0)"),
        ([], "the following arguments are required: command"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_every_cli_failure_is_one_line_and_exit_2(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"\xff\xfe server: {}\n")
    argv = [str(bad) if a == "NOT-UTF8" else a for a in argv]
    code, out, err = _main_exit(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert says in err and "Traceback" not in err


def test_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    import trimgate

    code, out, _ = _main_exit(["--version"], capsys)
    assert (code, out) == (0, f"trimgate {trimgate.__version__}\n")


def test_serve_on_a_port_in_use_says_so_in_one_line() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        # --log-level takes any case: "debug" gets past the parser to the port check
        for extra in ([], ["--workers", "2", "--log-level", "debug"]):
            out = run("serve", "--port", str(port), *extra)
            assert out.returncode == 2, out.stderr
            assert out.stderr.decode() == (
                f"cannot listen on 127.0.0.1:{port} (port): address already in use "
                "(another server listens there: pick another --port)\n"
            )


def test_check_config_reports_every_config_wide_problem(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "server: {port: 9000, admin_port: 9000}\n"
        "upstreams:\n"
        "  a: {provider: openai, base_url: 'https://a.example', prefix: /x}\n"
        "  b: {provider: openai, base_url: 'https://b.example', prefix: /x/}\n"
        "  c: {provider: openai, base_url: 'https://c.example', prefix: /x}\n"
        "trimming: {mode: loud}\n"
    )
    out = run("check-config", str(f))
    assert out.returncode == 2
    assert out.stderr.decode().splitlines() == [
        "trimming.mode: Input should be 'enforce', 'shadow' or 'off'",
        "upstreams.b.prefix: same prefix as upstreams.a",
        "upstreams.c.prefix: same prefix as upstreams.a",
        "server.admin_port: must differ from server.port",
    ]


def test_config_wide_problems_are_found_after_coercion_too() -> None:
    from trimgate.config import parse_config
    from trimgate.errors import ConfigError

    with pytest.raises(ConfigError) as info:  # "9000" is coerced: the model's check finds it
        parse_config({"server": {"port": "9000", "admin_port": 9000}})
    assert info.value.problems == ["server.admin_port: must differ from server.port"]


def test_human_banner_says_where_to_point_each_sdk() -> None:
    from trimgate.config import parse_config
    from trimgate.proxy.serve import human_banner

    config = parse_config(
        {
            "server": {"host": "0.0.0.0", "port": 9001, "admin_port": 9002},
            "upstreams": {
                "openai": {"provider": "openai", "base_url": "https://api.openai.com"},
                "anthropic": {"provider": "anthropic", "base_url": "https://api.anthropic.com"},
                "backup": {"provider": "openai", "base_url": "https://backup.example"},
                "groq": {
                    "provider": "openai",
                    "base_url": "https://api.groq.com/openai",
                    "prefix": "/groq",
                },
                "vllm": {
                    "provider": "openai",
                    "base_url": "http://127.0.0.1:8000/v1",
                    "prefix": "/vllm",
                },
            },
        }
    )
    line = human_banner(config)
    assert "\n" not in line
    assert line.startswith("trimgate ") and " on http://127.0.0.1:9001; " in line
    assert "openai http://127.0.0.1:9001/v1, anthropic http://127.0.0.1:9001, " in line
    assert "groq http://127.0.0.1:9001/groq/v1, vllm http://127.0.0.1:9001/vllm;" in line
    assert "backup" not in line  # reached only by nothing: openai is the default
    assert line.endswith(
        "metrics http://127.0.0.1:9002/metrics; events http://127.0.0.1:9002/api/events"
    )


def test_serve_prints_one_human_line_when_stdout_is_a_terminal(tmp_path: Path) -> None:
    import pty

    port = free_port()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trimgate", "serve", "--port", str(port)],
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz")
        shown = b""
        deadline = time.monotonic() + 10
        while b"\n" not in shown and time.monotonic() < deadline:
            shown += os.read(leader, 4096)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
        os.close(leader)
    base = f"http://127.0.0.1:{port}"
    assert shown.decode().strip() == human_line(base)
    assert json.loads(err.decode().splitlines()[0])["msg"] == "listening"  # the JSON log too


def human_line(base: str) -> str:
    import trimgate

    return (
        f"trimgate {trimgate.__version__} on {base}; SDK base URLs: openai {base}/v1, "
        f"anthropic {base}, gemini {base}; metrics {base}/metrics; events {base}/api/events"
    )


def test_ctrl_c_in_a_command_is_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import trimgate.demo

    async def interrupted() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(trimgate.demo, "run_demo", interrupted)
    code, out, err = _main_exit(["demo"], capsys)
    assert (code, out, err) == (130, "", "")


def test_serve_with_an_unreadable_config_says_so_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    out = run("serve", env={"TRIMGATE_CONFIG": str(missing)})
    assert out.returncode == 2
    assert out.stderr.decode() == f"{missing}: cannot read (No such file or directory)\n"
    (tmp_path / "bad.yaml").write_text("server: {port: 70000}\n")
    out = run("serve", "--config", str(tmp_path / "bad.yaml"))
    assert out.returncode == 2
    assert out.stderr.decode().startswith("server.port: ")
    assert out.stderr.decode().count("\n") == 1
