"""server/early_initialize.py: `initialize` answered from the cache of an earlier start before
pygls loads, once, with pygls' own answer; misses and odd first messages fall back to pygls."""

from __future__ import annotations

import io
import json
import queue
import sys
import time
from pathlib import Path

import pytest
from kernelstitch.server import early_initialize

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import MODEL_LINE, SOURCE  # noqa: E402
from raw_client import RawClient  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _drain(client: RawClient, seconds: float = 0.5) -> list[dict]:
    end, out = time.monotonic() + seconds, []
    while time.monotonic() < end:
        try:
            out.append(client.messages.get(timeout=0.05))
        except queue.Empty:
            pass
    return out


def _stop(client: RawClient) -> list[dict]:
    assert client.request("shutdown", None)["result"] is None
    late = _drain(client)
    client.notify("exit", None)
    client.proc.wait(10)
    return late


@pytest.fixture
def cache(tmp_path: Path) -> dict[str, str]:
    return {early_initialize.CACHE_ENV: str(tmp_path / "cache")}


def test_a_second_start_answers_from_the_cache_once_and_then_serves(tmp_path, cache):
    first = RawClient(tmp_path, env=cache)
    _stop(first)
    saved = list((tmp_path / "cache" / "initialize").glob("*.json"))
    assert len(saved) == 1
    assert json.loads(saved[0].read_text())["result"] == first.initialize_reply["result"]

    second = RawClient(tmp_path, env=cache)
    assert second.initialize_reply == first.initialize_reply  # same capabilities, same id
    path = tmp_path / "problem.py"
    path.write_text(SOURCE.format(options="delay=0.05"))
    uri = path.as_uri()
    second.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                              "text": path.read_text()}})
    at = {"line": MODEL_LINE, "character": 0}
    actions = second.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": at, "end": at},
                                                          "context": {"diagnostics": []}})
    assert actions["result"], actions  # the module's actions: pygls took over the stream
    late = _stop(second)
    assert [m for m in late if m.get("id") == 1 and "method" not in m] == []  # pygls' own answer dropped


def test_other_client_capabilities_miss_the_cache(tmp_path, cache):
    _stop(RawClient(tmp_path, env=cache))
    other = RawClient(tmp_path, env=cache, capabilities={"general": {"positionEncodings": ["utf-8"]}})
    assert other.initialize_reply["result"]["capabilities"]["positionEncoding"] == "utf-8"
    _stop(other)
    assert len(list((tmp_path / "cache" / "initialize").glob("*.json"))) == 2


def test_a_corrupt_cached_answer_is_a_miss_and_is_replaced(tmp_path, cache):
    first = RawClient(tmp_path, env=cache)
    _stop(first)
    (saved,) = (tmp_path / "cache" / "initialize").glob("*.json")
    saved.write_text("{not json")
    again = RawClient(tmp_path, env=cache)
    assert again.initialize_reply == first.initialize_reply
    _stop(again)
    assert json.loads(saved.read_text())["result"] == first.initialize_reply["result"]


def test_a_first_message_that_is_not_initialize_reaches_pygls_unchanged():
    data = _frame({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}) + b"rest"
    out = io.BytesIO()
    early = early_initialize.start(io.BytesIO(data), out)
    assert out.getvalue() == b"" and early.answered_id is None and early.initialize_id is None
    reader = early_initialize.ReplayReader(early.prefix, io.BytesIO(b"rest"))
    assert reader.readline() == data.split(b"\r\n")[0] + b"\r\n"
    assert reader.readline() == b"\r\n"
    assert reader.read(len(data) - len(b"rest") - early.prefix.index(b"{")) + reader.read(4) == \
        data[early.prefix.index(b"{"):]


def test_garbage_before_the_first_message_is_replayed_byte_for_byte():
    data = b"Content-Length: x\r\n\r\n{}"
    early = early_initialize.start(io.BytesIO(data), io.BytesIO())
    reader = early_initialize.ReplayReader(early.prefix, io.BytesIO(data[len(early.prefix):]))
    assert reader.read(-1) == data


def test_the_filter_drops_only_the_answer_already_given(tmp_path):
    out = io.BytesIO()
    early = early_initialize.EarlyStart(prefix=b"", answered_id=1, initialize_id=1)
    sink = early_initialize.AnswerFilter(out, early)
    sink.write(_frame({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "m"}}))
    sink.write(_frame({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}}))
    sink.write(_frame({"jsonrpc": "2.0", "id": 1, "result": None}))  # a later reply with a reused id passes
    assert out.getvalue().count(b'"id": 1') == 1 and b"logMessage" in out.getvalue()


def test_disabled_by_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(early_initialize.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(early_initialize.DISABLE_ENV, "1")
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
    key = early_initialize.answer_key({})
    (tmp_path / "initialize").mkdir()
    (tmp_path / "initialize" / f"{key}.json").write_text(json.dumps({"result": {"capabilities": {}}}))
    out = io.BytesIO()
    early = early_initialize.start(io.BytesIO(_frame(message)), out)
    assert out.getvalue() == b"" and early.answered_id is None
