"""Shared pieces of the language-server tests: a pytest-lsp client against the real server
process (`python -m kernelstitch.server`), jobs played by tests/lsp/fake_job.py unless a test
asks for the real pipeline."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

HERE = Path(__file__).parent
FAKE_JOB = HERE / "fake_job.py"
JOB_STATUS = "kernelstitch/jobStatus"

SOURCE = '''import torch
import torch.nn as nn

# fake-job: {options}


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.relu(x) * self.scale
        return y + 1


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return [2.0]
'''
MODEL_LINE = 6  # 0-based line of `class Model`
FORWARD_LINE = 11

NO_INPUTS_SOURCE = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, features: int, dropout=0.1):
        super().__init__()
        self.lin = nn.Linear(features, features)

    def forward(self, x, mask):
        return self.lin(x) * mask


class Other(nn.Module):
    def forward(self, x):
        return x
'''


def capabilities(pull: bool = False) -> lsp.ClientCapabilities:
    """A VS Code-like client: progress, showDocument, configuration, applyEdit."""
    return lsp.ClientCapabilities(
        window=lsp.WindowClientCapabilities(
            work_done_progress=True,
            show_document=lsp.ShowDocumentClientCapabilities(support=True),
            show_message=lsp.ShowMessageRequestClientCapabilities(),
        ),
        workspace=lsp.WorkspaceClientCapabilities(
            configuration=True,
            apply_edit=True,
            workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=False),
            diagnostics=lsp.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
            if pull else None,
            did_change_configuration=lsp.DidChangeConfigurationClientCapabilities(),
        ),
        text_document=lsp.TextDocumentClientCapabilities(
            code_action=lsp.CodeActionClientCapabilities(
                code_action_literal_support=lsp.ClientCodeActionLiteralOptions(
                    code_action_kind=lsp.ClientCodeActionKindOptions(value_set=[
                        lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.Refactor,
                        lsp.CodeActionKind.RefactorRewrite, lsp.CodeActionKind.Source])),
                resolve_support=lsp.ClientCodeActionResolveOptions(
                    properties=["edit", "command"]),
                data_support=True,
            ),
            hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown]),
            publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(),
            diagnostic=lsp.DiagnosticClientCapabilities() if pull else None,
            synchronization=lsp.TextDocumentSyncClientCapabilities(did_save=True),
        ),
    )


def server_config(job_log: Path | None = None, real_job: bool = False,
                  extra_env: dict[str, str] | None = None) -> ClientServerConfig:
    env = dict(os.environ)
    env.pop("KERNELSTITCH_JOB_COMMAND", None)
    if not real_job:
        env["KERNELSTITCH_JOB_COMMAND"] = f"{sys.executable} {FAKE_JOB}"
    if job_log is not None:
        env["FAKE_JOB_LOG"] = str(job_log)
    env.update(extra_env or {})
    return ClientServerConfig(server_command=[sys.executable, "-m", "kernelstitch.server"],
                              server_env=env)


async def start_client(root: Path, *, pull: bool = False, settings: dict | None = None,
                       config: ClientServerConfig | None = None) -> LanguageClient:
    """Start the server, initialize it on `root`, and record what it sends."""
    client = await (config or server_config()).start()
    client.job_status = []  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]

    @client.feature(JOB_STATUS)
    def _job_status(params: Any) -> None:
        client.job_status.append(_as_dict(params))  # type: ignore[attr-defined]

    @client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def _apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        client.applied_edits.append(params)  # type: ignore[attr-defined]
        return lsp.ApplyWorkspaceEditResult(applied=True)

    if settings is not None:
        client.set_configuration(settings, section="kernelstitch")
    client.initialize_result = await client.initialize_session(lsp.InitializeParams(  # type: ignore[attr-defined]
        capabilities=capabilities(pull),
        root_uri=root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="ws")],
    ))
    return client


def _as_dict(params: Any) -> dict[str, Any]:
    if isinstance(params, dict):
        return params
    if hasattr(params, "_asdict"):
        return dict(params._asdict())
    return dict(vars(params))


def open_document(client: LanguageClient, path: Path, text: str | None = None,
                  version: int = 1) -> str:
    text = path.read_text() if text is None else text
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version,
                                           text=text)))
    return uri


def replace_text(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0,
                   interval: float = 0.02) -> Any:
    """Poll until `predicate()` is truthy (the client records notifications as they come)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")


def final_status(client: LanguageClient, job_id: str) -> dict[str, Any] | None:
    for status in reversed(client.job_status):  # type: ignore[attr-defined]
        if status.get("jobId") == job_id and status.get("state") in (
                "done", "failed", "cancelled"):
            return status
    return None


async def execute(client: LanguageClient, command: str, *args: Any) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=command, arguments=list(args)))


async def code_actions(client: LanguageClient, uri: str, line: int,
                       diagnostics: list[lsp.Diagnostic] | None = None
                       ) -> list[lsp.CodeAction]:
    result = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        range=lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
        context=lsp.CodeActionContext(diagnostics=diagnostics or [])))
    return [a for a in result or [] if isinstance(a, lsp.CodeAction)]


async def hover_text(client: LanguageClient, uri: str, line: int, character: int = 8) -> str:
    result = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=lsp.Position(line, character)))
    if result is None:
        return ""
    contents = result.contents
    return contents.value if isinstance(contents, lsp.MarkupContent) else str(contents)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): look at its state.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


Waiter = Callable[[], Awaitable[Any]]
