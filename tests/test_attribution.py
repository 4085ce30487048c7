"""Metering by team: the config of ``metrics.attribution`` and the team resolver."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from trimgate import attribution as attribution_module
from trimgate.attribution import OTHER, UNATTRIBUTED, TeamResolver, team_resolver
from trimgate.config import AttributionConfig, parse_config
from trimgate.errors import ConfigError

# Fake credentials: never valid anywhere, hashed here as trimgate hashes them.
PAYMENTS_KEY = "sk-test-payments-4b7e0c1d9a"
SEARCH_KEY = "sk-ant-test-search-77f3e2"
PAYMENTS_PREFIX = hashlib.sha256(PAYMENTS_KEY.encode()).hexdigest()[:12]
SEARCH_PREFIX = hashlib.sha256(SEARCH_KEY.encode()).hexdigest()[:8]


def resolver(**data: Any) -> TeamResolver:
    return TeamResolver(AttributionConfig.model_validate(data))


def h(**headers: str) -> CIMultiDict[str]:
    return CIMultiDict((k.replace("_", "-"), v) for k, v in headers.items())


KEYS = [
    {"sha256_prefix": PAYMENTS_PREFIX, "team": "payments"},
    {"sha256_prefix": SEARCH_PREFIX.upper(), "team": "search"},  # hex in any case
]


def test_off_by_default() -> None:
    assert parse_config({}).metrics.attribution is None
    assert team_resolver(None) is None


def test_header_value_is_the_team() -> None:
    r = resolver()
    assert r(h(x_trimgate_agent="payments")) == "payments"
    assert r(h(X_TRIMGATE_AGENT="  search ")) == "search"  # case-insensitive name, trimmed
    assert r(h()) == UNATTRIBUTED
    assert r(h(x_trimgate_agent="   ")) == UNATTRIBUTED


def test_any_configured_header() -> None:
    r = resolver(header="X-Team", **{"from": ["header"]})
    assert r(h(x_team="payments", x_trimgate_agent="search")) == "payments"
    assert r(h(x_trimgate_agent="search")) == UNATTRIBUTED


def test_api_key_prefix_matches_the_sha256_of_the_credential_as_sent() -> None:
    r = resolver(api_keys=KEYS, **{"from": ["api_key"]})
    assert r(h(authorization=f"Bearer {PAYMENTS_KEY}")) == "payments"
    assert r(h(authorization=f"bearer   {PAYMENTS_KEY} ")) == "payments"
    assert r(h(x_api_key=SEARCH_KEY)) == "search"  # Anthropic
    assert r(h(x_goog_api_key=PAYMENTS_KEY)) == "payments"  # Gemini
    assert r(h(authorization="Bearer sk-someone-else")) == UNATTRIBUTED
    assert r(h(authorization=f"Basic {PAYMENTS_KEY}")) == UNATTRIBUTED  # only a bearer value
    # the header is not read when it is not a source
    assert r(h(x_trimgate_agent="search")) == UNATTRIBUTED


def test_the_longest_matching_prefix_wins() -> None:
    digest = hashlib.sha256(PAYMENTS_KEY.encode()).hexdigest()
    r = resolver(
        api_keys=[
            {"sha256_prefix": digest[:8], "team": "broad"},
            {"sha256_prefix": digest[:16], "team": "narrow"},
        ],
        **{"from": ["api_key"]},
    )
    assert r(h(x_api_key=PAYMENTS_KEY)) == "narrow"


def test_precedence_is_the_order_of_from() -> None:
    both = h(x_trimgate_agent="from-header", authorization=f"Bearer {PAYMENTS_KEY}")
    header_first = resolver(api_keys=KEYS, **{"from": ["header", "api_key"]})
    key_first = resolver(api_keys=KEYS, **{"from": ["api_key", "header"]})
    assert header_first(both) == "from-header"
    assert key_first(both) == "payments"
    # a source that gives no value hands over to the next one
    assert header_first(h(authorization=f"Bearer {PAYMENTS_KEY}")) == "payments"
    unknown_key = h(x_trimgate_agent="from-header", authorization="Bearer sk-unknown")
    assert key_first(unknown_key) == "from-header"
    assert key_first(h(authorization="Bearer sk-unknown")) == UNATTRIBUTED


class CountingSha256:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, data: bytes) -> Any:
        self.calls += 1
        return hashlib.sha256(data)


def test_the_credential_is_hashed_once_and_only_when_needed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = CountingSha256()
    monkeypatch.setattr(attribution_module, "sha256", counting)
    all_keys = h(authorization=f"Bearer {PAYMENTS_KEY}", x_api_key=SEARCH_KEY)
    assert resolver(api_keys=KEYS)(all_keys) == "payments"
    assert counting.calls == 1
    # no api_keys configured: nothing to compare, nothing hashed
    assert resolver()(all_keys) == UNATTRIBUTED
    # api_key not a source
    assert resolver(api_keys=KEYS, **{"from": ["header"]})(all_keys) == UNATTRIBUTED
    # the header gave a value first
    assert resolver(api_keys=KEYS)(h(x_trimgate_agent="a", x_api_key=SEARCH_KEY)) == "a"
    assert counting.calls == 1


def test_allow_list_maps_everything_else_to_other() -> None:
    r = resolver(allow=["payments", "search"])
    assert r(h(x_trimgate_agent="payments")) == "payments"
    assert r(h(x_trimgate_agent="Payments")) == OTHER  # values are compared as they are
    assert r(h(x_trimgate_agent="marketing")) == OTHER
    assert r(h()) == UNATTRIBUTED
    teams = {r(h(x_trimgate_agent=f"agent-{i}")) for i in range(1000)}
    assert teams == {OTHER}


def test_ten_thousand_header_values_give_at_most_max_values_plus_two() -> None:
    r = resolver(max_values=50)
    values = {r(h(x_trimgate_agent=f"agent-{i}")) for i in range(10_000)}
    values.add(r(h()))
    assert len(values) == 52
    assert {OTHER, UNATTRIBUTED} <= values
    assert r.distinct == 50
    # the first ones keep their values, later ones are other, for good
    assert r(h(x_trimgate_agent="agent-0")) == "agent-0"
    assert r(h(x_trimgate_agent="agent-49")) == "agent-49"
    assert r(h(x_trimgate_agent="agent-50")) == OTHER


def test_configured_teams_hold_their_places() -> None:
    r = resolver(api_keys=KEYS, max_values=3)
    assert r(h(x_trimgate_agent="first")) == "first"
    assert r(h(x_trimgate_agent="second")) == OTHER  # payments and search took two places
    assert r(h(x_api_key=SEARCH_KEY)) == "search"


def test_odd_header_values() -> None:
    r = resolver()
    assert r(h(x_trimgate_agent="x" * 65)) == OTHER
    assert r(h(x_trimgate_agent="x" * 64)) == "x" * 64
    assert r(h(x_trimgate_agent="ab\udcffcd")) == "ab\ufffdcd"  # undecodable bytes
    assert r(h(x_trimgate_agent="équipe")) == "équipe"
    assert r(h(x_trimgate_agent=OTHER)) == OTHER
    assert r.distinct == 3


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.text(max_size=80)), max_size=300),
    max_values=st.integers(1, 20),
)
def test_label_values_stay_bounded(values: list[str | None], max_values: int) -> None:
    r = resolver(max_values=max_values)
    seen = set()
    for value in values:
        headers = h() if value is None else h(x_trimgate_agent=value)
        team = r(headers)
        assert team and len(team) <= 64
        seen.add(team)
    assert len(seen) <= max_values + 2
    assert r.distinct <= max_values


# --- the config: what check-config refuses ---------------------------------


def problems(attribution: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config({"metrics": {"attribution": attribution}})
    return info.value.problems


def test_config_refusals_name_their_key_path() -> None:
    p = "metrics.attribution"
    assert problems({"api_keys": [{"sha256_prefix": "3f1a9c0", "team": "a"}]}) == [
        f"{p}.api_keys.0.sha256_prefix: must be at least 8 hex digits"
    ]
    assert problems({"api_keys": [{"sha256_prefix": "3f1a9c0g", "team": "a"}]}) == [
        f"{p}.api_keys.0.sha256_prefix: must be hex digits only (the start of a sha256 hex digest)"
    ]
    assert problems({"api_keys": [{"sha256_prefix": 12345678, "team": "a"}]}) == [
        f"{p}.api_keys.0.sha256_prefix: must be a quoted string of hex digits"
    ]
    assert problems({"api_keys": [{"sha256_prefix": "3f1a9c0d", "team": ""}]}) == [
        f"{p}.api_keys.0.team: must not be empty"
    ]
    assert problems({"api_keys": [{"sha256_prefix": "3f1a9c0d", "team": "t" * 65}]}) == [
        f"{p}.api_keys.0.team: longer than 64 characters"
    ]
    assert problems({"header": "Authorization"}) == [
        f"{p}.header: carries a credential: its value would be exported as a label"
    ]
    assert problems({"from": ["header", "cookie"]})[0].startswith(f"{p}.from.1:")
    assert problems({"from": []})[0].startswith(f"{p}.from:")
    assert problems({"max_values": 0})[0].startswith(f"{p}.max_values:")
    assert problems({"bogus": 1}) == [f"{p}.bogus: unknown key"]
    keys = [{"sha256_prefix": "3f1a9c0d", "team": "payments"}]
    assert problems({"api_keys": keys, "allow": ["search"]}) == [
        f"{p}.allow: does not list the api_keys team(s) payments"
    ]
    twice = [*keys, {"sha256_prefix": "3F1A9C0D", "team": "search"}]
    assert problems({"api_keys": twice}) == [f"{p}.api_keys: prefix 3f1a9c0d is given two teams"]


def test_check_config_prints_one_line_per_problem(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "metrics:\n"
        "  attribution:\n"
        "    from: [header, api_key]\n"
        "    api_keys:\n"
        "      - {sha256_prefix: '3f1a', team: payments}\n"
        "      - {sha256_prefix: 'not-hex-at-all', team: ''}\n"
        "      - {sha256_prefix: '0123456789abcdef', team: search}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "trimgate", "check-config", str(f)],
        capture_output=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert out.returncode == 2
    assert out.stderr.decode().splitlines() == [
        "metrics.attribution.api_keys.0.sha256_prefix: must be at least 8 hex digits",
        "metrics.attribution.api_keys.1.sha256_prefix: must be hex digits only "
        "(the start of a sha256 hex digest)",
        "metrics.attribution.api_keys.1.team: must not be empty",
    ]
    f.write_text(
        "metrics:\n"
        "  attribution:\n"
        "    from: [api_key, header]\n"
        "    header: X-Team\n"
        "    api_keys: [{sha256_prefix: '3F1A9C0D', team: payments}]\n"
        "    allow: [payments, search]\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "trimgate", "check-config", str(f)],
        capture_output=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "from:\n    - api_key\n    - header\n" in text  # the key as written, not from_
    assert "header: x-team" in text and "sha256_prefix: 3f1a9c0d" in text
