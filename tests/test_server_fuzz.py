"""Issue 25's fuzz run: random edits and malformed requests against the server (bounded in count
and time); every request is answered and the server survives."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import NO_INPUTS_SOURCE, SOURCE  # noqa: E402
from raw_client import RawClient  # noqa: E402

pytestmark = pytest.mark.timeout(180)

REQUESTS = ["textDocument/hover", "textDocument/codeAction", "codeAction/resolve", "textDocument/diagnostic",
            "workspace/executeCommand"]
JUNK = [None, 0, -1, 2**31, 2**63, 1.5, "", "x", "\ud800", [], {}, [None], {"uri": 5}, True, "file:///dev/zero"]


def _junk(rng: random.Random, depth: int = 0):
    if depth > 2 or rng.random() < 0.5:
        return rng.choice(JUNK)
    if rng.random() < 0.5:
        return [_junk(rng, depth + 1) for _ in range(rng.randrange(3))]
    keys = ["uri", "line", "character", "textDocument", "position", "range", "context", "title", "command",
            "arguments", "start", "end", "diagnostics"]
    return {rng.choice(keys): _junk(rng, depth + 1) for _ in range(rng.randrange(4))}


def _mutate(rng: random.Random, text: str) -> str:
    cut = rng.randrange(len(text) + 1)
    choice = rng.random()
    if choice < 0.3:
        return text[:cut] + text[cut + rng.randrange(1, 40):]  # delete
    if choice < 0.6:
        return text[:cut] + rng.choice(["(", ")", ":", "\n    ", "class X(nn.Module):\n", "'''", "\t", "é"]) + text[cut:]
    return rng.choice([SOURCE.format(options="delay=0.05"), NO_INPUTS_SOURCE, "", "x = (" * 50])


@pytest.mark.parametrize("seed", [1234, 7, 99])
def test_random_edits_and_malformed_requests_are_all_answered(tmp_path, seed):
    rng = random.Random(seed)
    raw = RawClient(tmp_path)
    try:
        path = tmp_path / "problem.py"
        text = SOURCE.format(options="delay=0.05")
        path.write_text(text)
        uri = path.as_uri()
        raw.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": text}})
        version, answered, deadline = 1, 0, time.monotonic() + 40
        for step in range(400):
            if time.monotonic() > deadline:
                break
            kind = rng.random()
            if kind < 0.4:  # an edit, well-formed
                version += 1
                text = _mutate(rng, text)
                raw.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                      "contentChanges": [{"text": text}]})
            elif kind < 0.5:  # a notification with junk
                raw.notify(rng.choice(["textDocument/didChange", "textDocument/didSave", "textDocument/didClose",
                                       "workspace/didChangeConfiguration", "$/cancelRequest"]), _junk(rng))
            else:  # a request: well-formed about the document, or junk
                method = rng.choice(REQUESTS)
                line = rng.randrange(0, 40)
                good = {"textDocument": {"uri": uri}, "position": {"line": line, "character": rng.randrange(0, 30)},
                        "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}},
                        "context": {"diagnostics": []}}
                params = good if rng.random() < 0.5 else _junk(rng)
                if method == "workspace/executeCommand" and params is good:
                    params = {"command": "kernelstitch.addExampleInputs", "arguments": [uri, rng.choice(["Model", 3])]}
                reply = raw.request(method, params, timeout=15)  # TimeoutError: a request went unanswered
                assert "result" in reply or "error" in reply, (step, method, reply)
                assert reply.get("error", {}).get("code") != -32603, (step, method, params, reply)  # no crash
                answered += 1
        assert answered > 50
        assert raw.proc.poll() is None, "the server died"
        reply = raw.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        assert "result" in reply
    finally:
        raw.close()
