# What an agent gets from each real error body: a growing session replayed against it.
#
#   python -m bench.recovery                    # every overflow and look-alike, all rules
#   TRIMGATE_PURE=1 python -m bench.recovery --tables-off   # (from a tree without the
#                                               # compiled core) as for a server nobody listed
#   python -m bench.recovery --only hb12-clova-40003-textlong --verbose
#
# Recognition is scored on each body alone (tests/providers/test_overflow.py); this runs
# trimgate whole, in process, in front of a fake provider on loopback, and plays one session
# per body of tests/data/error_corpus.yaml and error_heldout.yaml: an OpenAI Chat
# conversation that grows a turn (about 600 tokens) at a time. The fake answers a success
# while the request body is under --threshold bytes, and that body's own error (its status,
# its bytes; a stream entry as a 200 event stream) from the first turn past it:
#
#   overflow    answered for every request over the threshold, so a trim fixes it. The
#               turn is "recovered" when the client gets a 200 (a recognised overflow
#               retried, or a suspect probed: a plain 400/413/422 past the largest body
#               that passed), "lost" when it gets the provider's error back.
#   look-alike  answered for every request from the first one over the threshold on,
#               whatever its size (a rate limit, a quota, a bad parameter does not go away
#               when the prompt shrinks). The turn is "relayed" when the client gets that
#               body back; the upstream calls it took beyond one are the probes' cost.
#
# Each body gets its own model name, so what trimgate learns (the largest success, a probe's
# verdict) stays with its session. --tables-off empties the table of listed wordings before
# the app starts (the pure-Python core only: compiled, the table is a constant), so the
# generic readers and the probes are all that read the bodies, as for a server no table
# knows. Loopback only; one session at a time, each at most --turns past the threshold.

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass

import orjson
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

import trimgate
from tests.data_files import CORPUS_PATH, HELDOUT_PATH, load_entries
from trimgate.config import parse_config
from trimgate.providers import overflow_read
from trimgate.proxy.app import create_app

TURN_CHARS = 2400  # one user and one assistant message together, about 600 tokens
SUCCESS_ID = b"chatcmpl-recovery-ok"  # the fake's success answer, told from any error body


@dataclass
class Entry:
    ident: str
    status: int
    stream: bool
    body: bytes
    overflow: bool


def load(only: set[str]) -> list[Entry]:
    entries = []
    for path in (CORPUS_PATH, HELDOUT_PATH):
        for e in load_entries(path):
            if only and e["id"] not in only:
                continue
            body = e["body"].encode()
            if e["stream"] and not body.endswith(b"\n\n"):
                body = body.rstrip(b"\n") + b"\n\n"  # the YAML keeps no trailing blank line
            entries.append(Entry(e["id"], e["status"], e["stream"], body, e["overflow"]))
    return entries


class Fake:
    """The provider: a success under the threshold, the entry's error past it."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.entry: Entry | None = None
        self.crossed = False
        self.calls = 0

    def reset(self, entry: Entry) -> None:
        self.entry, self.crossed, self.calls = entry, False, 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.calls += 1
        entry = self.entry
        assert entry is not None
        over = len(raw) > self.threshold
        self.crossed = self.crossed or over
        if over or (self.crossed and not entry.overflow):
            if entry.stream:
                return web.Response(status=200, body=entry.body, content_type="text/event-stream")
            ctype = "application/json" if entry.body.lstrip()[:1] in (b"{", b"[") else "text/plain"
            return web.Response(status=entry.status, body=entry.body, content_type=ctype)
        doc = orjson.loads(raw)
        answer = {
            "id": SUCCESS_ID.decode(),
            "object": "chat.completion",
            "created": 1,
            "model": doc.get("model", "m"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": len(raw) // 4,
                "completion_tokens": 1,
                "total_tokens": len(raw) // 4 + 1,
            },
        }
        return web.json_response(answer)


def turn(i: int) -> list[dict[str, str]]:
    half = TURN_CHARS // 2
    return [
        {"role": "user", "content": f"question {i}: " + "lorem ipsum dolor " * (half // 18)},
        {"role": "assistant", "content": f"answer {i}: " + "sit amet consectetur " * (half // 21)},
    ]


@dataclass
class Outcome:
    ident: str
    overflow: bool
    status: int  # of the first turn past the threshold, as the client got it
    calls: int  # upstream calls that turn took
    answered: bool  # the fake's success came back (not the entry's body)


async def session(http: ClientSession, base: str, fake: Fake, entry: Entry, n: int) -> Outcome:
    model = f"rec-{n}"
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
    i = 0
    while True:
        i += 1
        messages += turn(i)
        body = {"model": model, "messages": [*messages, {"role": "user", "content": "go on"}]}
        raw = orjson.dumps(body)
        before = fake.calls
        async with http.post(
            base + "/v1/chat/completions",
            data=raw,
            headers={"content-type": "application/json", "authorization": "Bearer sk-rec"},
        ) as resp:
            answered = SUCCESS_ID in await resp.read()
            status = resp.status
        if len(raw) > fake.threshold or i > 400:
            return Outcome(entry.ident, entry.overflow, status, fake.calls - before, answered)
        if status != 200:
            raise RuntimeError(f"{entry.ident}: turn {i} under the threshold got {status}")


async def run(args: argparse.Namespace) -> list[Outcome]:
    if args.tables_off:
        if trimgate.compiled():
            sys.exit("--tables-off needs the pure-Python core (a tree without the .so files)")
        vars(overflow_read)["_PATTERNS"] = ()  # the readers look the table up at each call
    fake = Fake(args.threshold)
    fake_app = web.Application(client_max_size=64 * 1024 * 1024)
    fake_app.router.add_post("/v1/chat/completions", fake.handle)
    fake_server = TestServer(fake_app, host="127.0.0.1")
    await fake_server.start_server()
    config = parse_config(
        {
            "upstreams": {
                "openai": {
                    "provider": "openai",
                    "base_url": str(fake_server.make_url("")).rstrip("/"),
                }
            },
            "models": [{"match": "rec-*", "context_window": 4_000_000}],
        }
    )
    app = create_app(config, registry=CollectorRegistry())
    proxy = TestServer(app, host="127.0.0.1")
    await proxy.start_server()
    base = str(proxy.make_url("")).rstrip("/")
    outcomes = []
    try:
        async with ClientSession() as http:
            for n, entry in enumerate(load(set(args.only))):
                fake.reset(entry)
                outcome = await session(http, base, fake, entry, n)
                outcomes.append(outcome)
                if args.verbose:
                    print(outcome)
    finally:
        await proxy.close()
        await fake_server.close()
    return outcomes


def report(outcomes: list[Outcome], args: argparse.Namespace, seconds: float) -> None:
    over = [o for o in outcomes if o.overflow]
    looks = [o for o in outcomes if not o.overflow]
    recovered = [o for o in over if o.answered]
    relayed = [o for o in looks if not o.answered]
    probes = Counter(o.calls - 1 for o in looks)
    print(
        f"rules: {'generic readers and probes only (tables off)' if args.tables_off else 'all'}; "
        f"threshold {args.threshold} bytes; {seconds:.0f} s"
    )
    print(
        f"overflows: {len(recovered)}/{len(over)} sessions went on with a 200 "
        f"({100 * len(recovered) / max(1, len(over)):.1f}%); upstream calls on that turn "
        f"{dict(sorted(Counter(o.calls for o in recovered).items()))}"
    )
    print(f"  lost: {[o.ident for o in over if not o.answered]}")
    print(
        f"look-alikes: {len(relayed)}/{len(looks)} relayed as the provider sent them; extra "
        f"upstream calls (probes) {dict(sorted(probes.items()))}"
    )
    print(
        f"  answered (a probe passed a look-alike that stays whatever is sent): "
        f"{[o.ident for o in looks if o.answered]}"
    )
    print(f"  probed twice or more: {[(o.ident, o.calls - 1) for o in looks if o.calls > 2]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recovery")
    parser.add_argument(
        "--threshold", type=int, default=60_000, help="request bytes the fake accepts"
    )
    parser.add_argument("--tables-off", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # trimgate's log: a line per retry otherwise
    started = time.monotonic()
    outcomes = asyncio.run(run(args))
    report(outcomes, args, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
