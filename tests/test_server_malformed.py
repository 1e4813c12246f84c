"""Issue 25: every request is answered, malformed ones with -32602, and the server survives; a
client that vanishes takes the server's jobs with it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import MODEL_LINE, SOURCE  # noqa: E402
from raw_client import RawClient  # noqa: E402

pytestmark = pytest.mark.timeout(120)

INVALID_PARAMS = -32602


@pytest.fixture
def raw(tmp_path):
    client = RawClient(tmp_path)
    yield client
    client.close()


def _doc(raw: RawClient, tmp_path: Path) -> str:
    path = tmp_path / "problem.py"
    path.write_text(SOURCE.format(options="delay=0.05"))
    uri = path.as_uri()
    raw.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                         "text": path.read_text()}})
    return uri


def test_malformed_requests_get_invalid_params_and_the_server_keeps_working(raw, tmp_path):
    uri = _doc(raw, tmp_path)
    doc = {"uri": uri}
    cases = {
        "negative position": ("textDocument/hover", {"textDocument": doc, "position": {"line": -1, "character": 0}}),
        "line >= 2^31": ("textDocument/hover", {"textDocument": doc, "position": {"line": 2**31, "character": 0}}),
        "range null": ("textDocument/codeAction", {"textDocument": doc, "range": None, "context": {"diagnostics": []}}),
        "no context": ("textDocument/codeAction", {"textDocument": doc, "range": {
            "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}),
        "resolve without title": ("codeAction/resolve", {"kind": "quickfix"}),
        "params not an object": ("textDocument/hover", 5),
    }
    for name, (method, params) in cases.items():
        reply = raw.request(method, params)
        assert reply.get("error", {}).get("code") == INVALID_PARAMS, (name, reply)
    # A notification that cannot apply is dropped: a change to a document never opened.
    raw.notify("textDocument/didChange", {"textDocument": {"uri": "file:///nowhere.py", "version": 2},
                                          "contentChanges": [{"text": "x = 1"}]})
    reply = raw.request("textDocument/codeAction", {"textDocument": doc, "range": {
        "start": {"line": MODEL_LINE, "character": 0}, "end": {"line": MODEL_LINE, "character": 0}}, "context": {"diagnostics": []}})
    assert "result" in reply and reply["result"], reply  # the module's actions, as before
    assert raw.proc.poll() is None


def test_commands_with_arguments_of_the_wrong_type_get_their_usual_error(raw, tmp_path):
    for command in ("kernelstitch.generate", "kernelstitch.verify", "kernelstitch.profile",
                    "kernelstitch.addExampleInputs", "kernelstitch.openGenerated", "kernelstitch.cancel"):
        for arguments in ([{"uri": 5}], [5, None], [None], [[1, 2]], []):
            reply = raw.request("workspace/executeCommand", {"command": command, "arguments": arguments})
            assert "result" in reply and "error" in reply["result"], (command, arguments, reply)
    assert raw.proc.poll() is None


def test_a_client_that_vanishes_without_shutdown_takes_the_jobs_with_it(tmp_path):
    """stdin closes (the editor crashed or was killed): the server exits and kills its job
    process groups, which used to keep running."""
    import time

    from lsp_helpers import FAKE_JOB, alive

    raw = RawClient(tmp_path, env={"KERNELSTITCH_JOB_COMMAND": f"{sys.executable} {FAKE_JOB}"})
    path = tmp_path / "problem.py"
    path.write_text(SOURCE.format(options="delay=30 steps=5 ignore_term=1"))
    raw.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                         "version": 1, "text": path.read_text()}})
    reply = raw.request("workspace/executeCommand", {"command": "kernelstitch.generate",
                                                     "arguments": [path.as_uri(), "Model"]})
    assert "jobId" in reply["result"], reply
    status = raw.wait_for(lambda m: m.get("method") == "kernelstitch/jobStatus"
                          and str(m["params"].get("message", "")).startswith("pid="), timeout=30)
    pid = int(status["params"]["message"].split("=")[1])
    assert alive(pid)
    raw.proc.stdin.close()
    assert raw.proc.wait(timeout=20) is not None
    end = time.monotonic() + 10
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(pid), f"job process {pid} outlived the server"
