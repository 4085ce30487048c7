# Held-out batches of real error bodies: first score, and every reading for a diff.
#
#   python -m bench.heldout score BATCH.yaml       # a new batch's first score
#   python -m bench.heldout readings > before.jsonl   # every reading of every known body
#   python -m bench.heldout merge --to-corpus ID,ID BATCH.yaml ...   # file the batches
#
# A batch is a YAML list in the schema of tests/data/error_corpus.yaml (whose header gives
# the labelling rules), collected by someone who has not read the rules. `score` drops the
# bodies the corpus or the held-out set already hold (whitespace aside) and reads the rest
# as tests/providers/test_overflow.py::test_heldout_figures does: recognised overflows,
# false positives, counts that differ from the labels, and the misses a probe would resend
# (worded suspects), and the misses the relay reads for the request their source shows
# (an answer stopped at "length" before any output, the entry followed by the comment
# ``# request: no output limit``). Score a batch on the commit it was collected against,
# before any rule changes for it: that is the figure the held-out header records.
#
# `readings` prints, for each body of the corpus, the held-out set and any batch files
# named, what every reader says of it (detect_overflow, detect_suspect plain and worded,
# detect_unfixable at its status and at 200, 400, 413 and 500; both stream readers), one
# JSON line per body. Run it before and after a change to the wordings and diff the two
# files: a change meant to read new wordings should change no reading of a known body,
# or only those it meant to.
#
# `merge` appends scored batches to the data files, bodies already known dropped: the ids
# given to --to-corpus (misses a fix now reads, and their servers' other bodies) to
# error_corpus.yaml under a heading, the rest to error_heldout.yaml. Each entry is written
# in the files' own layout, and the comment lines after it in the batch (``# unsure:``)
# stay with it. The held-out header's paragraph for the batches is written by hand.

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.data_files import CORPUS_PATH, HELDOUT_PATH, load_entries
from trimgate.providers.overflow import (
    Overflow,
    detect_bare_stream_overflow,
    detect_overflow,
    detect_stream_event_overflow,
    detect_stream_overflow,
    detect_suspect,
    detect_unfixable,
    detect_unspent_stop,
    stream_event_has_output,
)
from trimgate.proxy import relay

KNOWN = (CORPUS_PATH, HELDOUT_PATH)


# the comment a collector writes after an answer stopped at "length" before any output
# when its source shows the request set no output limit: the relay reads those
_UNCAPPED = "# request: no output limit"


def _key(body: str) -> str:
    return re.sub(r"\s+", "", body)


def _known() -> set[str]:
    """The keys of the bodies the corpus and the held-out set already hold."""
    return {_key(e["body"]) for path in KNOWN for e in load_entries(path)}


def _read(entry: dict[str, Any]) -> Overflow | None:
    body = entry["body"].encode()
    if entry["stream"]:
        return detect_stream_overflow(body, wire_format=entry["format"]) or (
            detect_bare_stream_overflow(body, wire_format=entry["format"])
        )
    return detect_overflow(entry["status"], body, wire_format=entry["format"])


def unspent_stop(entry: dict[str, Any]) -> bool:
    """Whether the relay reads an entry as an answer stopped before any output, for a
    request that set no output limit: a whole 200 answer, or a stream's event before any
    that carries output or states an error, judged by what follows it as the relay judges
    it (``relay._stop_usage``, ``relay._unspent_stop_stands``)."""
    body = entry["body"].encode()
    if not entry["stream"]:
        return entry["status"] == 200 and detect_unspent_stop(body) is not None
    events = body.replace(b"\r\n", b"\n").split(b"\n\n")
    for i, event in enumerate(events):
        if detect_stream_event_overflow(event, output_started=False, wire_format="openai"):
            return False
        if detect_unspent_stop(event) is not None:
            counted = relay._stop_usage(event, True)
            if counted is not None:
                return counted
            for later in events[i + 1 :]:
                stands = relay._unspent_stop_stands(later, True)
                if stands is not None:
                    return stands
            return bool(relay._unspent_stop_stands(b"", True, ended=True))
        if stream_event_has_output(event):
            return False
    return False


def score(batch: Path) -> int:
    known = _known()
    fresh: list[dict[str, Any]] = []
    dropped: list[str] = []
    uncapped: set[str] = set()
    for entry, comments in _with_comments(batch):
        key = _key(entry["body"])
        if key in known:
            dropped.append(entry["id"])
            continue
        known.add(key)
        fresh.append(entry)
        if any(line.startswith(_UNCAPPED) for line in comments):
            uncapped.add(entry["id"])
    overflows = [e for e in fresh if e["overflow"]]
    by_id = {e["id"]: e for e in fresh}
    missed: list[str] = []
    false: list[str] = []
    counts: list[str] = []
    probed: list[str] = []
    for entry in fresh:
        got = _read(entry)
        if entry["overflow"] and got is None:
            missed.append(entry["id"])
            body = entry["body"].encode()
            if not entry["stream"] and detect_suspect(entry["status"], body) is not None:
                probed.append(entry["id"])
        elif not entry["overflow"] and got is not None:
            false.append(f"{entry['id']} {got}")
        elif got is not None and ("real" in entry or "maximum" in entry):
            labelled = Overflow(entry.get("real"), entry.get("maximum"))
            if got != labelled:
                counts.append(f"{entry['id']}: read {got}, labelled {labelled}")
    print(f"{len(dropped)} bodies already known: {dropped}")
    print(
        f"{len(overflows) - len(missed)}/{len(overflows)} overflows recognised, "
        f"{len(false)}/{len(fresh) - len(overflows)} false positives"
    )
    for line in [f"missed {i}" for i in missed] + [f"false positive {f}" for f in false]:
        print(line)
    for line in counts:
        print(f"counts {line}")
    print(f"misses a probe would resend: {probed}")
    relayed = [i for i in missed if i in uncapped and unspent_stop(by_id[i])]
    print(f"misses the relay reads, their requests setting no output limit: {relayed}")
    return 0


def readings(extra: list[Path]) -> int:
    for path in (*KNOWN, *extra):
        for entry in load_entries(path):
            body = entry["body"].encode()
            said: dict[str, str] = {"id": entry["id"]}
            for status in sorted({entry["status"], 200, 400, 413, 500}):
                said[f"overflow {status}"] = repr(
                    detect_overflow(status, body, wire_format=entry["format"])
                )
                said[f"suspect {status}"] = repr(detect_suspect(status, body))
                said[f"plain suspect {status}"] = repr(detect_suspect(status, body, plain=True))
                said[f"unfixable {status}"] = repr(detect_unfixable(status, body))
            said["stream"] = repr(detect_stream_overflow(body, wire_format=entry["format"]))
            said["bare stream"] = repr(
                detect_bare_stream_overflow(body, wire_format=entry["format"])
            )
            sys.stdout.write(orjson.dumps(said).decode() + "\n")
    return 0


_FIELDS = ("id", "format", "server", "status", "stream", "body", "overflow", "real", "maximum")


def _entry_text(entry: dict[str, Any], comments: list[str]) -> str:
    """An entry as the data files write it; it must read back as the same mapping."""
    lines = [f"- id: {entry['id']}", f"  format: {entry['format']}"]
    lines += [f"  server: {orjson.dumps(entry['server']).decode()}"]
    lines += [f"  status: {entry['status']}", f"  stream: {str(entry['stream']).lower()}"]
    body: str = entry["body"]
    if body.endswith("\n\n") or body != body.lstrip(" ") or "\t" in body or "\r" in body:
        lines.append(f"  body: {orjson.dumps(body).decode()}")
    else:
        block = body[:-1] if body.endswith("\n") else body
        lines.append("  body: |" if body.endswith("\n") else "  body: |-")
        lines += [f"    {line}" if line else "" for line in block.split("\n")]
    lines.append(f"  overflow: {str(entry['overflow']).lower()}")
    lines += [f"  {key}: {entry[key]}" for key in ("real", "maximum") if key in entry]
    lines.append(f"  source: {orjson.dumps(entry['source']).decode()}")
    text = "\n".join(lines) + "\n"
    wanted = {key: entry[key] for key in (*_FIELDS, "source") if key in entry}
    assert yaml.safe_load(text) == [wanted], f"{entry['id']}: does not read back"
    return text + "".join(f"{line}\n" for line in comments)


def _with_comments(path: Path) -> list[tuple[dict[str, Any], list[str]]]:
    """A batch's entries, each with the comment lines written after it."""
    entries = load_entries(path)
    comments: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("- id:"):
            comments.append([])
        elif comments and line.lstrip().startswith("#") and not line.startswith("    "):
            comments[-1].append(line.strip())
    assert len(comments) == len(entries), f"{path}: one '- id:' line an entry"
    return list(zip(entries, comments, strict=True))


def merge(to_corpus: set[str], batches: list[Path]) -> int:
    known = _known()
    texts: dict[bool, list[str]] = {True: [], False: []}
    for batch in batches:
        for entry, comments in _with_comments(batch):
            if _key(entry["body"]) in known:
                continue
            known.add(_key(entry["body"]))
            texts[entry["id"] in to_corpus].append(_entry_text(entry, comments))
            to_corpus.discard(entry["id"])
    assert not to_corpus, f"not in the batches, or already known: {sorted(to_corpus)}"
    if texts[True]:
        names = ", ".join(b.stem for b in batches)
        heading = (
            f"# ===================== from {names}, after they were scored =====================\n"
        )
        with KNOWN[0].open("a", encoding="utf-8") as out:
            out.write("\n" + heading + "\n" + "\n".join(texts[True]))
    if texts[False]:
        with KNOWN[1].open("a", encoding="utf-8") as out:
            out.write("\n" + "\n".join(texts[False]))
    print(f"{len(texts[True])} to the corpus, {len(texts[False])} to the held-out set")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.heldout")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("score", help="a batch's first score").add_argument("batch", type=Path)
    more = sub.add_parser("readings", help="every reading of every known body, as JSON lines")
    more.add_argument("batches", nargs="*", type=Path)
    filing = sub.add_parser("merge", help="append scored batches to the data files")
    filing.add_argument("--to-corpus", default="", help="comma-separated ids")
    filing.add_argument("batches", nargs="+", type=Path)
    args = parser.parse_args()
    if args.command == "score":
        return score(args.batch)
    if args.command == "merge":
        return merge({i for i in args.to_corpus.split(",") if i}, args.batches)
    return readings(args.batches)


if __name__ == "__main__":
    sys.exit(main())
