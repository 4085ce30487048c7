"""decode_raw (the OpenAI Chat body sized from its bytes, ``_chatscan.c``) against decode.

The rule it must keep: for any bytes, ``decode_raw`` either returns None (the proxy then
parses the body) or exactly what ``decode(orjson.loads(raw))`` returns, and the same
encoded body for any plan. It must also return a result for the shapes agents send, or
it saves nothing: those cases assert it is not None.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import shutil
import subprocess
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from trimgate.errors import DecodeError
from trimgate.providers.base import Decoded, DecodeOptions
from trimgate.providers.common import RawItems
from trimgate.providers.openai_chat import CODEC, _scan
from trimgate.trimming import Policy, plan

CRUMB = "[earlier turns omitted]"
OPTIONS = DecodeOptions(breadcrumb=CRUMB)
PATH = "/v1/chat/completions"

needs_scan = pytest.mark.skipif(_scan is None, reason="pure-Python install: no _chatscan")


def parsed(raw: bytes, tool_texts: bool = True) -> Decoded | None:
    """decode(orjson.loads(raw)); None where the proxy would skip the body."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    try:
        decoded = CODEC.decode(body, path=PATH, options=OPTIONS)
    except DecodeError:
        return None
    if not tool_texts:  # what decode_raw leaves out when told to
        for m in decoded.conversation.messages:
            m.tool_texts = ()
    return decoded


def fast(raw: bytes, tool_texts: bool = True) -> Decoded | None:
    return CODEC.decode_raw(raw, path=PATH, options=OPTIONS, tool_texts=tool_texts)


def assert_same(raw: bytes, *, tool_texts: bool = True, budgets: tuple[int, ...] = ()) -> bool:
    """decode_raw agrees with the parsed decode on ``raw``; True when it answered."""
    got = fast(raw, tool_texts)
    if got is None:
        return False
    want = parsed(raw, tool_texts)
    assert want is not None, "decode_raw accepted a body that the parsed decode refuses"
    if not tool_texts:  # items decode_raw parsed may carry them all the same
        for m in got.conversation.messages:
            m.tool_texts = ()
    assert got.conversation.messages == want.conversation.messages
    assert got.conversation.overhead == want.conversation.overhead
    assert got.conversation.pending_calls_ok == want.conversation.pending_calls_ok
    assert (got.model, got.output_limit, got.stream, got.hoistable, got.skip) == (
        want.model,
        want.output_limit,
        want.stream,
        want.hoistable,
        want.skip,
    )
    assert isinstance(got.body["messages"], RawItems)
    assert list(got.body) == list(want.body)
    # Kept items go out as the bytes they came as: the same JSON as the parsed encode
    # (but for integers beyond 64 bits, which orjson reads as floats: kept exact, and
    # equal once both are read by orjson), and the same bytes where the body is already
    # what orjson writes.
    canonical = orjson.dumps(orjson.loads(raw)) == raw
    for budget in budgets:
        for policy in policies(budget, tool_texts):
            p_got, p_want = plan(got.conversation, policy), plan(want.conversation, policy)
            assert p_got == p_want
            sent = orjson.dumps(CODEC.encode(got, p_got, breadcrumb=CRUMB))
            expected = orjson.dumps(CODEC.encode(want, p_want, breadcrumb=CRUMB))
            assert orjson.loads(sent) == orjson.loads(expected)
            if canonical:
                assert sent == expected
    return True


def policies(budget: int, tool_texts: bool) -> list[Policy]:
    """Every way the rebuild changes a kept item: none, merge, hoist, cap (strip: the
    orphan sweep, on in each)."""
    out = [
        Policy(budget=budget, breadcrumb_tokens=8),
        Policy(budget=budget, breadcrumb_tokens=8, placement="merge", hoist=True),
    ]
    if tool_texts:  # capping reads the texts decode_raw leaves out otherwise
        out.append(Policy(budget=budget, breadcrumb_tokens=8, max_tool_result_chars=5))
    return out


# -- bodies ------------------------------------------------------------------------------

# Texts: ASCII, escapes, every plane; orjson writes non-ASCII raw, json.dumps as \u escapes
texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from('ab "\\/\n\t\x00\x1f\x7fé→😀\u2028'), max_size=30),
    st.just(CRUMB),
    st.text(min_size=60, max_size=90),  # long enough to be capped at max_tool_result_chars=5
)
ids = st.one_of(st.sampled_from(["call_1", "call_2", "c3", "é", 'q"'])).map(str)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), texts)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "type", "text", "id"]), inner, max_size=3)
    ),
    max_leaves=6,
)
# what a field may hold: mostly the shapes the scanner handles, sometimes anything
maybe_text = st.one_of(texts, st.none(), junk)

MISSING = object()


def fields(**strategies: Any) -> st.SearchStrategy[dict[str, Any]]:
    """An object of optional fields: each strategy's value, or the field left out."""
    return st.fixed_dictionaries({}, optional=dict(strategies.items()))


function = fields(name=maybe_text, arguments=maybe_text, extra=junk)
call = st.one_of(
    fields(
        id=st.one_of(ids, junk),
        type=st.just("function"),
        function=st.one_of(function, st.none(), junk),
        custom=junk,
    ),
    junk,
)
message = st.builds(
    lambda role, rest: {"role": role, **rest} if role is not MISSING else rest,
    st.one_of(
        st.sampled_from(["user", "assistant", "tool", "system", "developer"]),
        st.sampled_from(["function", "other", MISSING]),
        junk,
    ),
    fields(
        content=st.one_of(texts, st.none(), junk),
        tool_calls=st.one_of(st.lists(call, max_size=3), st.none(), junk),
        tool_call_id=st.one_of(ids, st.none(), junk),
        refusal=maybe_text,
        reasoning_content=maybe_text,
        reasoning=maybe_text,
        audio=st.one_of(st.none(), junk),
        function_call=st.one_of(st.none(), junk),
        name=texts,
        annotations=junk,
    ),
)
top = fields(
    model=st.one_of(st.just("gpt-4o"), junk),
    stream=st.one_of(st.booleans(), junk),
    max_tokens=st.one_of(st.integers(0, 10**6), junk),
    tools=junk,
    temperature=st.floats(0, 2),
)


@st.composite
def bodies(
    draw: st.DrawFn,
    messages: st.SearchStrategy[Any] = message,
    fields: st.SearchStrategy[dict[str, Any]] = top,
) -> bytes:
    body = draw(fields)
    body["messages"] = draw(st.lists(messages, max_size=8))
    keys = list(body)
    order = draw(st.permutations(keys))
    body = {k: body[k] for k in order}
    style = draw(st.sampled_from(["orjson", "ascii", "indent"]))
    if style == "orjson":
        try:
            return orjson.dumps(body)
        except TypeError:  # an integer beyond 64 bits: json writes it
            style = "ascii"
    # json writes NaN and Infinity too, which are not JSON: both decoders must refuse
    text = json.dumps(body, ensure_ascii=True, indent=2 if style == "indent" else None)
    return text.encode()


SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))


@needs_scan
@SETTINGS
@given(bodies(), st.booleans())
def test_decode_raw_is_none_or_the_parsed_decode(raw: bytes, tool_texts: bool) -> None:
    assert_same(raw, tool_texts=tool_texts, budgets=(1, 40, 10**6))


# The shapes agents send, which it must answer for
common_call = st.fixed_dictionaries(
    {
        "id": ids,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": texts, "arguments": texts}),
    }
)
common_message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "developer"]), "content": texts},
        optional={"name": texts},
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.one_of(texts, st.none())},
        optional={
            "tool_calls": st.one_of(st.lists(common_call, max_size=3), st.none()),
            "refusal": st.one_of(texts, st.none()),
            "audio": st.none(),
            "function_call": st.none(),
            "reasoning_content": st.one_of(texts, st.none()),
            "annotations": st.just([]),
        },
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "content": st.one_of(texts, st.none())},
        optional={"tool_call_id": st.one_of(ids, st.none())},
    ),
)


common_top = fields(
    model=st.just("gpt-4o"),
    stream=st.booleans(),
    max_tokens=st.integers(0, 10**6),
    tools=st.just([{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    temperature=st.floats(0, 2),
    seed=st.integers(-(2**63), 2**63 - 1),
)


@needs_scan
@SETTINGS
@given(bodies(common_message, common_top))
def test_decode_raw_answers_for_the_common_shapes(raw: bytes) -> None:
    assume(b'"q\\"' not in raw and b"\\u00e9" not in raw)  # escaped ids: left to the parse
    assert assert_same(raw, budgets=(1, 30, 10**6))


def mutations(raw: bytes) -> st.SearchStrategy[bytes]:
    at = st.integers(0, len(raw))
    byte = st.sampled_from(b'{}[]":,\\ntfu0e-.\x00\x80\xc3\xed\xf4 ')
    return st.one_of(
        st.builds(lambda i: raw[:i], at),  # truncated
        st.builds(lambda i, b: raw[:i] + bytes([b]) + raw[i:], at, byte),  # inserted
        st.builds(lambda i, b: raw[:i] + bytes([b]) + raw[i + 1 :], at, byte),  # replaced
        st.builds(lambda i: raw[:i] + raw[i + 1 :], at),  # deleted
    )


@needs_scan
@SETTINGS
@given(bodies(common_message, common_top).flatmap(mutations))
def test_decode_raw_never_accepts_what_the_parse_refuses(raw: bytes) -> None:
    assert_same(raw, budgets=(1, 10**6))


BASE: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "result é→😀"},
        {"role": "user", "content": CRUMB},
    ],
}
BASE_RAW = orjson.dumps(BASE)


@needs_scan
def test_a_plain_body_is_answered_and_sized_as_parsed() -> None:
    assert assert_same(BASE_RAW, budgets=(1, 10**6))
    assert assert_same(json.dumps(BASE, indent=4, ensure_ascii=True).encode())
    got = fast(BASE_RAW)
    assert got is not None
    assert got.conversation.messages[4].breadcrumb  # the breadcrumb found from bytes too


@needs_scan
def test_kept_items_go_out_as_they_came_unless_changed() -> None:
    messages = BASE["messages"]
    body = {**BASE, "messages": [*messages[:3], {**messages[3], "content": "x" * 200}]}
    # spaces and escapes that orjson would not write: kept as they are
    raw = json.dumps(body, ensure_ascii=True).encode()
    got = fast(raw)
    assert got is not None
    kept = plan(got.conversation, Policy(budget=10**6, breadcrumb_tokens=8, hoist=True))
    sent_raw = orjson.dumps(CODEC.encode(got, kept, breadcrumb=CRUMB))
    for item in body["messages"]:
        assert json.dumps(item, ensure_ascii=True).encode() in sent_raw
    capped = plan(got.conversation, Policy(budget=10**6, max_tool_result_chars=50))
    sent = orjson.loads(orjson.dumps(CODEC.encode(got, capped, breadcrumb=CRUMB)))
    assert sent["messages"][:3] == body["messages"][:3]
    assert sent["messages"][3]["content"].startswith("x" * 33 + "\n\n[... 150 characters")


@needs_scan
@pytest.mark.parametrize(
    "raw",
    [
        # a key with an escape may spell one the codec reads
        BASE_RAW.replace(b'"content":"hi"', b'"con\\u0074ent":"hi"'),
        BASE_RAW.replace(b'"id":"c1"', b'"i\\u0064":"c1"'),
        # a repeated key the codec reads: orjson keeps the last
        BASE_RAW.replace(b'"content":"hi"', b'"content":"hi","content":"ho"'),
        BASE_RAW.replace(b'"role":"user"', b'"role":"user","role":"tool"', 1),
        BASE_RAW.replace(b'"name":"f"', b'"name":"f","name":"gg"'),
        BASE_RAW.replace(b'"id":"c1"', b'"id":"c1","id":"c2"'),
        # shapes sized by the parsed decode
        BASE_RAW.replace(b'"content":"hi"', b'"content":[{"type":"text","text":"hi"}]'),
        BASE_RAW.replace(
            b'"content":"hi"', b'"content":[{"type":"text","text":"%s"}]' % CRUMB.encode()
        ),
        BASE_RAW.replace(b'"content":"hi"', b'"content":[{"type":"image_url","image_url":{}}]'),
        BASE_RAW.replace(b'"content":"be brief"', b'"content":7'),
        BASE_RAW.replace(b'"role":"system"', b'"role":"sys\\u0074em"'),
        BASE_RAW.replace(b'"content":null', b'"content":null,"audio":{"id":"a"}'),
        BASE_RAW.replace(b'"content":null', b'"content":null,"refusal":false'),
        BASE_RAW.replace(b'"arguments":"{}"', b'"input":"{}"'),
        BASE_RAW.replace(b'"id":"c1"', b'"id":"c\\u0031"'),
        BASE_RAW.replace(b'"function":{', b'"custom":{'),
        BASE_RAW.replace(b'"content":"result', b'"content":[{"type":"text","text":"r"}],"x":"'),
    ],
)
def test_a_message_of_another_shape_is_parsed_alone(raw: bytes) -> None:
    assert assert_same(raw, budgets=(1, 10**6))
    assert _scan is not None
    found = _scan(raw)
    assert found is not None
    roles = [row[2] for row in found[2]]
    assert roles.count(4) == 1 and len(roles) == len(BASE["messages"])  # 4: parse this one


@needs_scan
@pytest.mark.parametrize(
    ("before", "listed", "after", "answered"),
    [
        (22, 8, 30, True),
        (0, 9, 100, True),  # a few at the start do not decide
        (0, 20, 0, True),  # a small body: parsed item by item
        (21, 11, 0, False),
        (0, 32, 0, False),
    ],
)
def test_a_body_of_many_other_shapes_is_parsed_whole(
    before: int, listed: int, after: int, answered: bool
) -> None:
    # from the 32nd message on, more than a third of those read so far to parse: cheaper
    # parsed whole (counted as the scan goes, so a body of them is given up early)
    one = {"role": "user", "content": "text"}
    other = {"role": "user", "content": [{"type": "text", "text": "text"}]}
    raw = orjson.dumps({"messages": [one] * before + [other] * listed + [one] * after})
    assert assert_same(raw, budgets=(1, 10**6)) is answered


@needs_scan
@pytest.mark.parametrize(
    "twice",
    [
        b'"content":"%s","content":"short"' % (b"x" * 4000),
        b'"content":"%s","con\\u0074ent":"short"' % (b"x" * 4000),
    ],
    ids=["repeated", "escaped"],
)
def test_a_message_that_gives_a_key_twice_goes_out_with_it_once(twice: bytes) -> None:
    # trimgate reads the last value, as orjson does; a provider's parser might read the
    # first: the kept message goes out re-encoded, with the value trimgate sized
    raw = b'{"messages":[{"role":"user","content":"a"},{"role":"user",%s}]}' % twice
    assert assert_same(raw, budgets=(1, 10**6))
    got = fast(raw)
    assert got is not None and got.conversation.messages[1].text_bytes == len("short")
    kept = plan(got.conversation, Policy(budget=10**6))
    sent = orjson.dumps(CODEC.encode(got, kept, breadcrumb=CRUMB))
    assert sent == b'{"messages":[{"role":"user","content":"a"},{"role":"user","content":"short"}]}'


@needs_scan
@pytest.mark.parametrize(
    "raw",
    [
        # a key with an escape at the top level may spell one the codec reads
        BASE_RAW.replace(b'"model"', b'"m\\u006fdel"'),
        BASE_RAW[:-1] + b',"messages":[]}',
        # legacy function calls pair across messages
        BASE_RAW.replace(b'"role":"system"', b'"role":"function"'),
        BASE_RAW.replace(b'"content":null', b'"content":null,"function_call":{"name":"f"}'),
        # a message the decode refuses: the parse says why
        BASE_RAW.replace(b'"tool_call_id":"c1"', b'"tool_call_id":1'),
        BASE_RAW.replace(b'"role":"system"', b'"role":"other"'),
        b'{"messages":"no"}',
        b'{"messages":[1]}',
        b'[{"messages":[]}]',
        # JSON that orjson refuses or may read differently
        b'{"messages":[{"role":"user","content":"\\ud800"}]}',
        b'{"messages":[{"role":"user","content":"\\udc00\\ud800"}]}',
        b'{"messages":[{"role":"user","content":"\xed\xa0\x80"}]}',
        b'{"messages":[{"role":"user","content":"\xc0\xaf"}]}',
        b'{"messages":[{"role":"user","content":"\xf4\x90\x80\x80"}]}',
        b'{"messages":[{"role":"user","content":"a\x01"}]}',
        b'{"messages":[{"role":"user","content":"a","x":1e400}]}',
        b'{"messages":[{"role":"user","content":"a","x":1e-10000}]}',
        b'{"messages":[{"role":"user","content":"a","x":12345678901234567890123456789012345}]}',
        b'{"messages":[{"role":"user","content":"a","x":01}]}',
        b'{"messages":[{"role":"user","content":"a","x":[' + b"[" * 200 + b"]" * 200 + b"]}]}",
        b'\xef\xbb\xbf{"messages":[]}',
        b'{"messages":[]} x',
        b'{"messages":[],}',
        b'{"messages":[{"role":"user","content":"a"},]}',
        b'{"messages":[{"role":"user","content":"a"}]',
    ],
)
def test_what_it_leaves_to_the_parse(raw: bytes) -> None:
    assert fast(raw) is None


@needs_scan
@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages":[]}',
        b' \n{ "messages" : [ ] , "model" : "m" }\r\n',
        b'{"messages":[{"role":"user","content":"\\ud83d\\ude00 \\u00e9 \\n \\"","name":"x"}]}',
        b'{"messages":[{"role":"user","content":"a","x":{"y":[1,-2.5e-3,true,false,null]}}]}',
        b'{"messages":[{"role":"tool","content":"x"}]}',  # an anonymous result
        b'{"messages":[{"role":"user","content":"a","x":[1e-400,-2.2250738585072014e-308,1E+99]}]}',
        b'{"messages":[{"role":"assistant","tool_calls":[]}]}',
        b'{"messages":[{"role":"assistant","content":"","refusal":"no","reasoning":"r"}]}',
        b'{"x":"\\"messages\\":[","messages":[{"role":"user"}]}',
    ],
)
def test_what_it_answers(raw: bytes) -> None:
    assert assert_same(raw, budgets=(1, 10**6))


@needs_scan
@example(size=0).via("the empty text")
@given(st.integers(0, 70_000))
def test_long_texts_of_every_length_are_sized(size: int) -> None:
    # the vector loop's ends: texts of every length around its 16 / 8 byte steps
    for text in ("a" * size, "é" * (size // 2) + "a", "a" * size + "\n"):
        raw = orjson.dumps({"messages": [{"role": "user", "content": text}]})
        assert assert_same(raw)


@pytest.fixture(scope="module")
def portable_scan(tmp_path_factory: pytest.TempPathFactory) -> Callable[[bytes], Any]:
    """_chatscan built with its portable 8-byte loop (-DTRIMGATE_SWAR), as a machine
    without SSE2 (ARM) builds it; the installed one uses SSE2 on x86-64."""
    compiler = shutil.which(sysconfig.get_config_var("CC").split()[0]) or shutil.which("cc")
    if _scan is None or compiler is None:
        pytest.skip("no compiled _chatscan to compare with, or no C compiler")
    source = Path(__file__).parents[2] / "trimgate" / "providers" / "_chatscan.c"
    out = tmp_path_factory.mktemp("swar") / ("_chatscan" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    flags = ["-shared", "-fPIC", "-O2", "-DTRIMGATE_SWAR", f"-I{include}"]
    subprocess.run(
        [compiler, *flags, str(source), "-o", str(out)],
        check=True,
        timeout=120,
    )
    loader = importlib.machinery.ExtensionFileLoader("_chatscan", str(out))
    spec = importlib.util.spec_from_loader("_chatscan", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    scan: Callable[[bytes], Any] = module.scan
    return scan


ODD = [b"\x00", b"\x1f", b" ", b"\x7f", b'"', b"\\", b"\x80", b"\xc3\xa9", b"\xff", b"\\n"]


def inside_a_text(size: int, at: int, odd: bytes) -> bytes:
    """A body whose one text has ``odd`` (which may make it invalid) at byte ``at``."""
    text = bytes(ord("a") + i % 26 for i in range(size))
    at = min(at, size)
    return b'{"messages":[{"role":"user","content":"' + text[:at] + odd + text[at:] + b'"}]}'


@SETTINGS
@given(
    st.one_of(
        bodies(),
        bodies(common_message, common_top),
        bodies(common_message, common_top).flatmap(mutations),
        st.builds(inside_a_text, st.integers(0, 100), st.integers(0, 100), st.sampled_from(ODD)),
    )
)
def test_the_portable_build_answers_as_the_vector_one(
    portable_scan: Callable[[bytes], Any], raw: bytes
) -> None:
    assert _scan is not None
    assert portable_scan(raw) == _scan(raw)


def test_raw_items_parse_each_item_from_its_span() -> None:
    raw = b'[{"a":1}, {"b":[2]}]'
    items = RawItems(raw, [(1, 8), (10, 19)])
    assert len(items) == 2
    assert items[1] == {"b": [2]}
    assert items[0] == {"a": 1}


def test_a_pure_install_answers_none() -> None:
    if _scan is not None:
        pytest.skip("compiled: the scanner is there")
    assert fast(BASE_RAW) is None
