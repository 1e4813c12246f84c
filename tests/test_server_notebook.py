"""Python notebook cells (vscode-notebook-cell URIs) and unsaved editors: scanned, hinted and
offered the example-inputs scaffold; no job actions, since no file on disk holds their text."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import (
    NO_INPUTS_SOURCE,
    SOURCE,
    code_actions,
    server_config,
    start_client,
    wait_for,
)

pytestmark = [pytest.mark.asyncio(loop_scope="function"), pytest.mark.timeout(60)]


@pytest_asyncio.fixture
async def client(tmp_path):
    client = await start_client(tmp_path, config=server_config(tmp_path / "jobs.log"))
    yield client
    await client.shutdown_session()
    await client.stop()


def _open(client, uri: str, text: str) -> None:
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))


@pytest.mark.parametrize("scheme_uri", [
    "vscode-notebook-cell:{root}/nb.ipynb#W1sZmlsZQ%3D%3D",
    "untitled:Untitled-1",
])
async def test_a_cell_gets_the_hint_and_the_scaffold_only(client, tmp_path, scheme_uri):
    uri = scheme_uri.format(root=tmp_path.as_posix())
    _open(client, uri, NO_INPUTS_SOURCE)
    diags = await wait_for(lambda: client.diagnostics.get(uri))
    assert {d.data["module"] for d in diags if d.code == "no-example-inputs"} == {"Block", "Other"}

    listed = await code_actions(client, uri, 4)  # class Block
    assert [a.title for a in listed] == ["KernelStitch: Add example inputs"]
    resolved = await client.code_action_resolve_async(listed[0])
    edit = resolved.edit.changes[uri][0]
    assert "def get_inputs_Block():" in edit.new_text


async def test_a_cell_with_inputs_is_offered_no_job(client, tmp_path):
    uri = f"vscode-notebook-cell:{tmp_path.as_posix()}/nb.ipynb#W2sZmlsZQ%3D%3D"
    _open(client, uri, SOURCE.format(options=""))
    await wait_for(lambda: uri in client.diagnostics)
    assert await code_actions(client, uri, 6) == []  # class Model: Generate needs a .py file


async def test_cells_get_pushed_diagnostics_from_a_pulling_client(tmp_path):
    # VS Code pulls diagnostics only for documents with a tab of their own; a cell has none.
    client = await start_client(tmp_path, pull=True, config=server_config(tmp_path / "jobs.log"))
    try:
        cell = f"vscode-notebook-cell:{tmp_path.as_posix()}/nb.ipynb#W0sZmlsZQ%3D%3D"
        _open(client, cell, NO_INPUTS_SOURCE)
        diags = await wait_for(lambda: client.diagnostics.get(cell))
        assert {d.data["module"] for d in diags} == {"Block", "Other"}
        # A file is still left to the pull.
        path = tmp_path / "m.py"
        path.write_text(NO_INPUTS_SOURCE)
        _open(client, path.as_uri(), NO_INPUTS_SOURCE)
        await asyncio.sleep(0.5)
        assert path.as_uri() not in client.diagnostics
    finally:
        await client.shutdown_session()
        await client.stop()
