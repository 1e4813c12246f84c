"""The server's workspace root per file follows the editor's folders, also after they change
(workspace/didChangeWorkspaceFolders), in process: no client, no jobs."""

from __future__ import annotations

import types

from kernelstitch.server.app import build_server
from lsprotocol import types as lsp


def _drain(result) -> None:
    """pygls' built-in handlers may be generators that yield the user's handler to call."""
    if isinstance(result, types.GeneratorType):
        for handler, args, _ in result:
            handler(*args)


def test_a_changed_workspace_folder_changes_the_root_of_an_open_file(tmp_path):
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    inner.mkdir(parents=True)
    source = inner / "m.py"
    source.write_text("")
    ls = build_server()
    _drain(ls.protocol.lsp_initialize(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(),
        workspace_folders=[lsp.WorkspaceFolder(uri=outer.as_uri(), name="outer")])))
    assert ls.root_for(source) == outer.resolve()
    _drain(ls.protocol.lsp_workspace__did_change_workspace_folders(lsp.DidChangeWorkspaceFoldersParams(
        event=lsp.WorkspaceFoldersChangeEvent(
            added=[lsp.WorkspaceFolder(uri=inner.as_uri(), name="inner")], removed=[]))))
    assert ls.root_for(source) == inner.resolve()  # not the cached root of before
