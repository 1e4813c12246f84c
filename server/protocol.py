"""One validation layer in front of every handler: requests whose parameters do not match the LSP
schema get a -32602 (invalid params) reply, and notifications that cannot apply are dropped with
a log line, instead of pygls' unanswered request and error pop-up (issue 25: negative positions,
line >= 2^31, `range: null`, a code action without `context`, resolve without a title; didChange
for a document that was never opened).  A malformed *response* of the client to one of the
server's requests (`null` for workspace/applyEdit) fails that request instead of leaving it
pending forever (the command waiting on it was never answered: found by the fuzz test)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MalformedMessage:
    """A message whose parameters failed the schema: what to answer it with."""

    id: Any  # None for a notification
    method: str
    error: JsonRpcException


@dataclass(frozen=True)
class MalformedResponse:
    """The client's answer to a server request, which failed the schema."""

    id: Any
    error: JsonRpcException


class ValidatingProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and isinstance(data.get("method"), str):
                return MalformedMessage(data.get("id"), data["method"], exc)
            if isinstance(data, dict) and "id" in data:
                return MalformedResponse(data["id"], exc)
            raise

    def handle_message(self, message):
        if isinstance(message, MalformedResponse):
            error = JsonRpcInvalidRequest(f"the client's response to request {message.id} does not match "
                                          "the LSP schema")
            self._handle_response(message.id, None, error.to_response_error())
            return
        if isinstance(message, MalformedMessage):
            if message.id is None:
                log.warning("dropped %s notification: its parameters do not match the LSP schema",
                            message.method)
                return
            error = JsonRpcInvalidParams(f"{message.method}: the parameters do not match the LSP "
                                         f"schema ({type(message.error.__cause__ or message.error).__name__})")
            self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        if params.text_document.uri not in self.workspace.text_documents:
            log.warning("didChange for %s, which is not open: ignored", params.text_document.uri)
            return
        yield from super().lsp_text_document__did_change(params)
