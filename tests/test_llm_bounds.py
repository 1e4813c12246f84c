"""Bounded replies, prompts and stored texts (agents/llm/limits.py): one reply cannot flood the
next prompt, the report or the run store, and every cut says so."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kernelstitch.agents.llm.client import LlmClient
from kernelstitch.agents.llm.config import LlmConfig
from kernelstitch.agents.llm.limits import MAX_REPLY_BYTES, MAX_REPLY_CHARS, bound_messages, clip
from kernelstitch.agents.pipeline import PipelineConfig, run_generate
from llm_scripts import EXAMPLE, GOOD, KEY_ENV, SECRET, ScriptedVerifier, fenced, plan_json
from llm_scripts import stub_client as client_for
from llm_stub_server import StubLLM

from kernelstitch.core.workspace import Workspace

ASK = [{"role": "user", "content": "write the file"}]


@pytest.fixture
def stub():
    with StubLLM() as server:
        yield server


def test_clip_keeps_the_start_and_says_what_it_cut():
    assert clip("abc", 3) == "abc"
    assert clip("x" * 5_000_000, 20_000) == (
        "x" * 20_000 + " [truncated: 5,000,000 chars, kept the first 20,000]")


def test_bound_messages_cuts_the_longest_message_and_says_so():
    system = {"role": "system", "content": "s" * 5_000}
    messages = [system, {"role": "user", "content": "u" * 500_000}]
    bounded = bound_messages(messages, 100_000)
    assert sum(len(m["content"]) for m in bounded) <= 100_000
    assert bounded[0] == system and "[truncated: 500,000 chars, kept the first" in \
        bounded[1]["content"]
    assert messages[1]["content"] == "u" * 500_000  # the caller's list is left alone
    assert bound_messages([system], 100_000) == [system]


def test_an_oversized_reply_is_a_failed_reply_and_is_stored_bounded(stub):
    records: list[Any] = []
    stub.reply("x" * 5_000_000).reply("y" * (MAX_REPLY_CHARS + 10)).reply("fine")
    client = client_for(stub, records)
    over_bytes = client.chat(ASK, purpose="coder", label="coder-1")
    assert over_bytes.refused and "bytes of HTTP body" in over_bytes.refused
    assert f"the limit is {MAX_REPLY_BYTES:,}" in over_bytes.refused
    assert "x" * 100 not in over_bytes.text and len(over_bytes.text) < 500
    over_chars = client.chat(ASK, purpose="coder", label="coder-2")
    assert over_chars.refused == (f"the reply was too long ({MAX_REPLY_CHARS + 10:,} chars; "
                                  f"the limit is {MAX_REPLY_CHARS:,}) and was not used: answer "
                                  "again, much shorter")
    assert len(over_chars.text) < 500
    fine = client.chat(ASK, purpose="coder", label="coder-3")
    assert (fine.text, fine.refused) == ("fine", None)
    assert records[0].reply is None and records[0].error == over_bytes.refused
    stored = records[1].reply["text"]
    assert stored.endswith(f"kept the first {MAX_REPLY_CHARS:,}]")
    assert len(stored) < MAX_REPLY_CHARS + 100


def test_a_body_without_length_stops_being_read_at_the_limit():
    """No Content-Length (the body ends when the connection closes): reading stops at the
    limit instead of taking everything the server sends."""
    sent = {"bytes": 0}

    class Endless(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                self.wfile.write(b'{"id": "x", "object": "chat.completion", "created": 0, '
                                 b'"model": "m", "choices": [{"index": 0, "message": '
                                 b'{"role": "assistant", "content": "')
                for _ in range(2_000):  # 20 MB if nobody stops reading
                    self.wfile.write(b"z" * 10_000)
                    sent["bytes"] += 10_000
                self.wfile.write(b'"}, "finish_reason": "stop"}]}')
            except OSError:
                pass  # the client hung up: what the test wants

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = LlmConfig(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                           model="m", api_key_env="", max_retries=0)
        with LlmClient(config) as client:
            reply = client.chat(ASK, purpose="coder", label="coder-1")
    finally:
        server.shutdown()
        server.server_close()
    assert reply.refused and f"more than {MAX_REPLY_BYTES:,} bytes" in reply.refused
    assert sent["bytes"] < 20_000_000


def test_a_5mb_planner_note_reaches_neither_the_coder_prompt_nor_the_store(stub, tmp_path,
                                                                          monkeypatch):
    """The issue's flood: a 5 MB planner note.  It is refused as too long (the planner asks
    again); a 90,000-char note, under the reply limit, is cut to MAX_NOTE_CHARS in the
    Coder's prompt; a Coder reply over the limit is answered like a malformed one."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    source = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, source)
    stub.reply(plan_json(notes=["N" * 5_000_000]))
    stub.reply(plan_json(notes=["M" * 90_000]))
    stub.reply("z" * (MAX_REPLY_CHARS + 10)).reply(fenced(GOOD))
    config = PipelineConfig(coder="llm", llm={"model": "m", "api_key_env": KEY_ENV,
                                              "base_url": stub.base_url, "backoff_s": 0.05},
                            budget={"iterations": 2})
    result = run_generate(source, None, Workspace(tmp_path), config, lambda _e: None,
                          verifier=ScriptedVerifier(builtin_ms=1.0))
    assert result.status == "succeeded", result.message
    assert Path(result.candidate_path).read_text() == GOOD
    requests = stub.chat_requests()
    assert len(requests) == 4
    # received request sizes: the 5 MB note in none (the coder's requests carry the built-in
    # seed program, whose kernels' CUDA text grows with the kernel forms: ~100 KB here)
    assert max(len(json.dumps(r.body)) for r in requests) < 400_000
    assert "the reply was too long (5,0" in requests[1].last_user  # the planner's retry
    coder_task = requests[2].messages[1]["content"]
    assert "M" * 2_000 + " [truncated: 90,000 chars, kept the first 2,000]" in coder_task
    assert "M" * 2_001 not in coder_task
    assert f"too long ({MAX_REPLY_CHARS + 10:,} chars" in requests[3].last_user
    report = Path(result.report_path).read_text()
    assert "planner reply 1 rejected: the reply was too long" in report
    assert "| 1 | task 1/1 | malformed | the reply was too long" in report
    stored = sum(p.stat().st_size for p in (tmp_path / ".kernelstitch").glob("runs.sqlite*"))
    assert stored < 2_000_000, stored


def test_the_documented_limits_are_the_ones_in_force():
    from kernelstitch.agents.llm import limits
    from kernelstitch.agents.report import MAX_REPORT_CHARS

    from kernelstitch.core import runstore

    root = Path(__file__).resolve().parents[1]
    table = (root / "agents" / "llm" / "README.md").read_text()
    values = [limits.MAX_REPLY_BYTES, limits.MAX_REPLY_CHARS, limits.MAX_NOTE_CHARS,
              limits.MAX_PLAN_CHARS, limits.MAX_FEEDBACK_CHARS, limits.MAX_ERROR_CHARS,
              limits.MAX_PROMPT_CHARS, MAX_REPORT_CHARS, runstore.MAX_TEXT_CHARS,
              runstore.MAX_JSON_STRING_CHARS, runstore.MAX_JSON_CHARS,
              runstore.MAX_RUN_STRING_CHARS, runstore.MAX_RUN_JSON_CHARS]
    assert [v for v in values if f"| {v:,} " not in table] == []
    overview = (root / "README.md").read_text()
    assert f"{limits.MAX_REPLY_CHARS:,} chars (or {limits.MAX_REPLY_BYTES:,} bytes" in overview
