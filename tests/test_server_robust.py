"""The server survives what editors send mid-edit, starts fast and never imports torch."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import (
    MODEL_LINE,
    NO_INPUTS_SOURCE,
    SOURCE,
    code_actions,
    hover_text,
    open_document,
    replace_text,
    server_config,
    start_client,
)

pytestmark = pytest.mark.timeout(60)


@pytest_asyncio.fixture
async def client(tmp_path):
    client = await start_client(tmp_path, config=server_config())
    yield client
    await client.shutdown_session()
    await client.stop()


def test_server_modules_do_not_import_torch():
    code = (
        "import sys, json\n"
        "import kernelstitch.server, kernelstitch.server.app, kernelstitch.server.watch\n"
        "kernelstitch.server.app.build_server()\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or "
        "m.startswith('torch.') or m == 'numpy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []


def test_package_import_is_cheap():
    """`kernelstitch serve` imports the package before anything runs: no pygls, lsprotocol or
    torch yet (what start-up costs is measured by bench/lsp_latency.py, not asserted here)."""
    code = ("import sys; import kernelstitch.server, kernelstitch.server.early_initialize; "
            "print(*(m in sys.modules for m in ('pygls', 'lsprotocol', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "False"]


@pytest.mark.asyncio(loop_scope="function")
async def test_startup_time_to_first_answer(tmp_path):
    """The server starts and answers initialize with its capabilities; the time is printed for
    the record only (bench/lsp_latency.py measures start-up; a loaded CI box must not fail it)."""
    started = time.perf_counter()
    client = await start_client(tmp_path, config=server_config())
    elapsed = time.perf_counter() - started
    try:
        print(f"\nserver start-up to initialize result: {elapsed * 1000:.0f} ms")
        capabilities = client.initialize_result.capabilities
        assert capabilities is not None and capabilities.code_action_provider and capabilities.hover_provider
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio(loop_scope="function")
async def test_syntax_error_keeps_last_good_modules(client, tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(SOURCE.format(options=""))
    uri = open_document(client, path)
    broken = path.read_text().replace("def forward(self, x):", "def forward(self, x")
    replace_text(client, uri, broken, 2)
    actions = await code_actions(client, uri, MODEL_LINE)
    assert actions[0].title.endswith("Generate CUDA implementation")
    assert "Model" in await hover_text(client, uri, MODEL_LINE)
    # Syntax errors are not reported by us (the user's Python tooling does that).
    assert all(d.source != "kernelstitch" or d.code != "syntax"
               for d in client.diagnostics.get(uri, []))


def _random_edit(rng: random.Random, text: str) -> str:
    pieces = ["", "(", ")", ":", "class ", "def ", "nn.Module", "\n", "    ", "\t", "'''",
              '"', "\\", "\x00", "é", "🙂", "#", "@", "lambda", "forward", "self.", "\r\n",
              "import torch\n", "class X(nn.Module):\n  def forward(self):\n"]
    start = rng.randrange(len(text) + 1)
    end = min(len(text), start + rng.choice([0, 0, 1, 3, 20, 200]))
    insert = "".join(rng.choice(pieces) for _ in range(rng.randrange(4)))
    return text[:start] + insert + text[end:]


@pytest.mark.asyncio(loop_scope="function")
async def test_fuzzed_edits_never_crash_the_server(client, tmp_path):
    rng = random.Random(1234)
    path = tmp_path / "fuzz.py"
    text = SOURCE.format(options="") + NO_INPUTS_SOURCE
    path.write_text(text)
    uri = open_document(client, path, text)
    for version in range(2, 150):
        text = _random_edit(rng, text)
        replace_text(client, uri, text, version)
        if version % 10 == 0:
            lines = text.count("\n") + 1
            line = rng.randrange(lines + 3)  # sometimes past the end
            await code_actions(client, uri, line)
            await hover_text(client, uri, line, rng.randrange(80))
            for action in (await code_actions(client, uri, rng.randrange(lines)))[:2]:
                await client.code_action_resolve_async(action)
    # Incremental edits with ranges beyond the document, and garbage commands.
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=500),
        content_changes=[lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(10_000, 5), lsp.Position(10_001, 0)), text="x")]))
    result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="kernelstitch.generate", arguments=[42, None]))
    assert "error" in result
    result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="kernelstitch.cancel", arguments=["no-such-job"]))
    assert result["cancelled"] is False
    # Still answering, and discovery works on a fresh document.
    good = tmp_path / "good.py"
    good.write_text(SOURCE.format(options=""))
    good_uri = open_document(client, good)
    assert "Model" in await hover_text(client, good_uri, MODEL_LINE)
    assert client.error is None
