"""The language server: LSP features wired to discovery, actions, jobs, diagnostics and hover.

Handlers run on the asyncio loop and stay short: scanning is a cached `ast.parse`, jobs are
child processes read asynchronously.  No handler imports torch or runs user code.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from kernelstitch.server import actions, diagnostics, hover, layout, progress
from kernelstitch.server.config import SECTION, ServerConfig, flatten_settings
from kernelstitch.server.debounce import Debouncer
from kernelstitch.server.discovery import DocumentIndex, DocumentScan, module_fingerprint
from kernelstitch.server.files import read_source
from kernelstitch.server.jobs import AlreadyActive, Job, JobManager, JobSpec
from kernelstitch.server.persisted import latest_runs, profile_of_run
from kernelstitch.server.protocol import ValidatingProtocol
from kernelstitch.server.results import (
    ModuleResults,
    ResultStore,
    verdict_speedup,
    verdict_status,
)
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, PyglsError
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from kernelstitch import __version__
from kernelstitch.core.problem import (
    CANDIDATE_CLASS,
    DEFAULT_CLASS,
    ModuleInfo,
    SourceScan,
    scan_source,
)

log = logging.getLogger(__name__)

JOB_STATUS = "kernelstitch/jobStatus"
RESCAN_DELAY_S = 0.15  # typing pauses longer than this re-scan the document
SAVE_DELAY_S = 1.0  # bursts of saves (format-on-save, save-all) verify once
NOTEBOOK_CELL_SCHEME = "vscode-notebook-cell"
CLIENT_REQUEST_TIMEOUT_S = 30.0  # a command waiting on the editor (applyEdit, showDocument) answers by then
_TIME_LIMIT_GRACE_S = 120.0  # on top of budget.timeSeconds before the server stops a job


class KernelStitchServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kernelstitch", __version__, protocol_cls=ValidatingProtocol)
        self.index = DocumentIndex()
        self.results = ResultStore()
        self.config = ServerConfig()
        self.initial_settings: dict[str, Any] = {}  # initializationOptions, under later settings
        self.jobs = JobManager(listener=self)
        self.rescans = Debouncer(RESCAN_DELAY_S)
        self.saves = Debouncer(SAVE_DELAY_S)
        self.pull_diagnostics = False
        self.refresh_support = False
        self.progress_support = False
        self.show_document_support = False
        self.configuration_support = False
        self._progress: dict[str, progress.JobProgress] = {}
        self._token_job: dict[str, str] = {}
        self._roots: dict[str, Path] = {}
        self._loaded: set[tuple[str, str]] = set()  # (source, module) read from the run store
        self._scanning: dict[str, str] = {}  # uri -> text a background scan is parsing
        self._published: dict[str, tuple[int | None, str]] = {}  # uri -> (version, text hash) pushed last
        self._saved_during_job: dict[tuple[str, str], str] = {}  # (source, module) -> uri saved meanwhile
        self.config_ready = asyncio.Event()  # set once the first settings pull has answered

    # -- documents ------------------------------------------------------------------------------
    def document(self, uri: str) -> DocumentScan | None:
        """The scan of an open document as it is now (a request must not see older text)."""
        self.rescans.flush(uri)
        if uri in self._scanning:  # a background scan is still parsing: do it here instead
            return self.scan_document(uri)
        return self.index.get(uri)

    def text_of(self, uri: str) -> str | None:
        """The editor's text of a document (the file on disk when it is not open)."""
        try:
            # pygls keys open documents by the unquoted URI (a notebook cell's `...#W0sZmlsZQ%3D%3D`)
            documents = self.workspace.text_documents
            document = documents.get(uri) or documents.get(unquote(uri))
            if document is not None:  # open in the editor: its text, not the file's
                return document.source
            path = _path(uri)
            return read_source(path) if path is not None else None
        except (OSError, ValueError):  # unreadable, not a regular file, not UTF-8, bad URI
            return None

    def rescan_later(self, uri: str) -> None:
        """Re-scan after the edit burst, parsing in a thread so requests keep being answered."""
        text = self.text_of(uri)
        if text is None:
            return
        self._scanning[uri] = text
        asyncio.ensure_future(self._rescan_in_thread(uri, text))

    async def _rescan_in_thread(self, uri: str, text: str) -> None:
        try:
            scan = await asyncio.to_thread(self.index.scanner(uri).scan, text)
        finally:
            if self._scanning.get(uri) is text:
                del self._scanning[uri]
        current = self.text_of(uri)
        if current != text or self.index.get(uri) is None:
            return  # edited again (a newer scan is scheduled) or closed
        doc = self.scan_document(uri, scan)
        # Publish whenever the client has not been sent this text's diagnostics: a request that
        # arrived inside the debounce window scanned the text already (so `doc` is not new), but
        # it published nothing (issue 25: pushed diagnostics went stale).
        if doc is not None and self._published.get(uri) != (doc.version, doc.text_hash):
            self.publish(uri)

    def current_enough(self, uri: str, rng: lsp.Range) -> DocumentScan | None:
        """The scan for a code-action request, re-scanning only when it could be wrong.

        Right after an edit a re-scan is pending (debounced).  Parsing a 5,000-line file costs
        ~100 ms, so when the cached scan's anchors still match the text at the requested lines
        (typing inside a method moves nothing) the cached scan answers; otherwise scan now.
        """
        doc = self.index.get(uri)
        if doc is None or not (self.rescans.pending(uri) or uri in self._scanning):
            return doc
        text = self.text_of(uri)
        if text is not None and actions.anchors_match(doc, text.splitlines(), rng):
            return doc
        return self.document(uri)

    def scan_document(self, uri: str, scan: SourceScan | None = None) -> DocumentScan | None:
        text = self.text_of(uri)
        if text is None:
            return None
        previous = self.index.get(uri)
        version = self.workspace.get_text_document(uri).version
        doc = self.index.update(uri, text, version, scan)
        if doc is not previous:
            self._drop_stale_findings(doc)
        return doc

    def _drop_stale_findings(self, doc: DocumentScan) -> None:
        """A module's text changed: its findings (tied to lines) are gone until a new run."""
        path = _path(doc.uri)
        if path is None or doc.has_syntax_error:
            return
        for entry in self.results.for_source(str(path)):
            info = doc.module(entry.module)
            if entry.fingerprint is None and entry.findings:
                entry.fingerprint = doc.fingerprint(info) if info else None
            if info is None or entry.fingerprint != doc.fingerprint(info):
                self.results.drop_findings(entry.source_path, entry.module)

    def forget_roots(self) -> None:
        self._roots.clear()

    def root_for(self, path: Path) -> Path:
        key = str(path)
        if key not in self._roots:
            folders = [Path(p) for p in (to_fs_path(f.uri) for f in
                                         self.workspace.folders.values()) if p]
            root_path = getattr(self.workspace, "root_path", None)
            if root_path:
                folders.append(Path(root_path))
            self._roots[key] = layout.workspace_root(path, folders)
        return self._roots[key]

    def candidate_for(self, path: Path, module: str) -> Path | None:
        """The generated file of a module, if one exists."""
        entry = self.results.get(str(path), module)
        if entry is not None and entry.candidate_path and os.path.exists(entry.candidate_path):
            return Path(entry.candidate_path)
        guess = layout.candidate_path(self.root_for(path), path, module)
        return guess if guess.exists() else None

    def load_persisted(self, path: Path, modules: list[ModuleInfo]) -> bool:
        """Read back earlier runs once per module (hover after a restart); True if any."""
        path = path.resolve()
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return False
        root = self.root_for(path)
        found = False
        for info in modules:
            key = (str(path), info.name)
            if key in self._loaded:
                continue
            self._loaded.add(key)
            for run in latest_runs(root, path, info.name):  # oldest first: newer ones win
                entry = self.results.entry(str(path), info.name)
                entry.from_store, entry.run_id, found = True, run.run_id, True
                entry.plan = run.plan or entry.plan
                entry.verdict = run.verdict if run.kind != "profile" else entry.verdict
                if run.profile and run.finished_at is not None and run.finished_at >= mtime:
                    # Measured on the file as it is on disk now: tie findings to that text.
                    entry.findings = []
                    self.results.set_profile(entry, run.profile)
                    entry.fingerprint = _disk_fingerprint(path, info.name)
            entry = self.results.get(str(path), info.name)
            if entry is not None:
                out = layout.output_dir(root, path, info.name)
                if (out / layout.CANDIDATE_FILE).is_file() and not entry.candidate_path:
                    self.results.set_candidate(entry, str(out / layout.CANDIDATE_FILE))
                if (out / layout.REPORT_FILE).is_file() and not entry.report_path:
                    entry.report_path = str(out / layout.REPORT_FILE)
        return found

    def load_source_of(self, candidate: Path) -> None:
        """A generated file opened before its source: find the source and read its runs."""
        found = layout.source_of_candidate(candidate)
        if found is None:
            return
        source, module = found
        try:
            info = scan_source(read_source(source)).module(module)
        except (OSError, ValueError):
            return
        if info is not None:
            self.load_persisted(source, [info])

    # -- diagnostics ----------------------------------------------------------------------------
    def diagnostics_for(self, uri: str) -> list[lsp.Diagnostic]:
        doc = self.document(uri)
        path = _path(uri)
        if doc is None:
            return []
        if path is None:  # a notebook cell or an unsaved editor: no findings, no results
            return diagnostics.missing_inputs(doc)
        if layout.is_generated_file(path):
            entry = self.results.for_candidate(str(path))
            return diagnostics.verification(doc.lines, entry) if entry else []
        return (diagnostics.missing_inputs(doc)
                + diagnostics.findings(doc, self.results.for_source(str(path))))

    def publish(self, uri: str) -> None:
        # VS Code's client pulls diagnostics only for documents shown in a tab of their own,
        # which a notebook's cells are not: their diagnostics are pushed.
        if self.pull_diagnostics and not uri.startswith(NOTEBOOK_CELL_SCHEME + ":"):
            return  # the client asks (textDocument/diagnostic); refresh() tells it when
        found = self.diagnostics_for(uri)  # scans the current text first
        doc = self.index.get(uri)
        if doc is not None:
            self._published[uri] = (doc.version, doc.text_hash)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, diagnostics=found, version=doc.version if doc else None))

    def publish_candidate(self, candidate: str, entry: ModuleResults) -> None:
        """Verification diagnostics on a generated file, open or not (push clients show both)."""
        uri = from_fs_path(candidate)
        if uri is None:
            return
        if self.index.get(uri) is not None:
            self.publish(uri)
        elif not self.pull_diagnostics:
            try:
                lines = read_source(candidate).splitlines()
            except (OSError, ValueError):  # unreadable, not a regular file, not UTF-8
                lines = []
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                uri=uri, diagnostics=diagnostics.verification(lines, entry)))

    def refresh(self) -> None:
        """Results changed: push again, or ask a pull client to pull again."""
        if self.pull_diagnostics:
            if self.refresh_support:
                self.workspace_diagnostic_refresh(None)
            return
        for uri in self.index.uris():
            self.publish(uri)

    # -- jobs -----------------------------------------------------------------------------------
    def submit(self, kind: str, uri: str, module: str | None, trigger: str = "user"
               ) -> dict[str, Any]:
        """Start a job for a module; the answer is what executeCommand returns."""
        target = self._resolve_target(uri, module)
        if isinstance(target, str):
            self.tell(target, lsp.MessageType.Warning, trigger)
            return {"error": target}
        source, info, candidate = target
        if not info.has_inputs:
            message = (f"{info.name} has no example inputs: use 'Add example inputs' first.")
            self.tell(message, lsp.MessageType.Warning, trigger)
            return {"error": message}
        if kind == "verify":
            candidate = candidate or self.candidate_for(source, info.name)
            if candidate is None:
                message = f"{info.name} has no generated implementation yet: generate it first."
                self.tell(message, lsp.MessageType.Warning, trigger)
                return {"error": message}
        root = self.root_for(source)
        spec = JobSpec(
            kind=kind,  # type: ignore[arg-type]
            uri=uri,
            source_path=str(source),
            module=info.name,
            workspace=str(root),
            candidate_path=str(candidate) if candidate else None,
            config=self.config.job_config(),
            fingerprint=_disk_fingerprint(source, info.name),
            time_limit_s=self.config.budget_time_s + _TIME_LIMIT_GRACE_S,
            trigger=trigger,
        )
        self._warn_if_unsaved(source, trigger)
        try:
            job = self.jobs.submit(spec)
        except AlreadyActive as exc:
            message = (f"{info.name} already has a {exc.job.spec.kind} job {exc.job.state} "
                       f"({exc.job.id}): cancel it first or wait for it.")
            self.tell(message, lsp.MessageType.Info, trigger)
            return {"error": message, "jobId": exc.job.id, "state": exc.job.state,
                    "alreadyRunning": True}
        return {"jobId": job.id, "state": job.state}

    def _resolve_target(self, uri: str, module: str | None
                        ) -> tuple[Path, ModuleInfo, Path | None] | str:
        """(source file, module, candidate) for a command's arguments, or why not."""
        path = _path(uri)
        if path is None:
            return f"not a file: {uri}"
        candidate = None
        if layout.is_generated_file(path):  # acting on the generated file: find its source
            entry = self.results.for_candidate(str(path))
            if entry is None:
                return f"{path.name}: cannot tell which module it was generated for"
            candidate, path, module = path, Path(entry.source_path), entry.module
        try:
            text = read_source(path)
        except (OSError, ValueError) as exc:
            return f"cannot read {path}: {exc.strerror or exc}"
        scan = scan_source(text)
        if scan.error is not None:
            open_doc = self.index.get(from_fs_path(str(path)) or uri) or self.index.get(uri)
            if open_doc is None:
                return f"{path.name}:{scan.error.line}: {scan.error.message}"
            scan = open_doc.scan
        problems = scan.problems()
        if module:
            info = scan.module(module)
            if info is None:
                return f"{path.name} has no nn.Module class {module!r} (saved on disk)"
        elif len(problems) == 1 or scan.module(DEFAULT_CLASS):
            info = scan.module(DEFAULT_CLASS) or problems[0]
        else:
            return f"{path.name}: name the module to use ({', '.join(m.name for m in problems)})"
        return path.resolve(), info, candidate

    def _warn_if_unsaved(self, source: Path, trigger: str) -> None:
        uri = from_fs_path(str(source))
        doc = self.index.get(uri) if uri else None
        if doc is None:
            return
        try:
            disk = read_source(source)
            current = self.workspace.get_text_document(uri).source
        except (OSError, KeyError, ValueError):
            return
        if disk != current:
            self.tell(f"{source.name} has unsaved changes: the job uses the saved file.",
                      lsp.MessageType.Warning, trigger)

    def cancel(self, args: list[Any]) -> dict[str, Any]:
        job: Job | None = None
        if len(args) == 1 and isinstance(args[0], str):
            job = self.jobs.get(args[0])
        elif len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
            path = _path(args[0])
            if path is not None:
                if layout.is_generated_file(path):
                    entry = self.results.for_candidate(str(path))
                    path = Path(entry.source_path) if entry else path
                job = self.jobs.active_for(str(path.resolve()), args[1])
        if job is None or job.is_final:
            return {"cancelled": False, "error": "no such job running"}
        return {"cancelled": self.jobs.cancel(job.id), "jobId": job.id}

    def tell(self, message: str, kind: lsp.MessageType, trigger: str = "user") -> None:
        """User-triggered: a message box; background (watch-on-save): the output log only."""
        if trigger == "user":
            self.window_show_message(lsp.ShowMessageParams(type=kind, message=message))
        else:
            self.window_log_message(lsp.LogMessageParams(type=kind, message=message))

    # JobListener ----------------------------------------------------------------------------
    def job_changed(self, job: Job) -> None:
        self._notify_status(job)
        handle = self._progress.get(job.id)
        # Background (watch-on-save) jobs only update the status bar, through jobStatus.
        if handle is None and self.progress_support and job.spec.trigger == "user":
            title = f"KernelStitch {job.spec.kind}: {job.spec.module}"
            handle = progress.start(self.work_done_progress, job, title)
            self._progress[job.id] = handle
            self._token_job[handle.token] = job.id
        if handle is not None:
            handle.update(job)

    def job_finished(self, job: Job) -> None:
        self._notify_status(job)
        handle = self._progress.pop(job.id, None)
        if handle is not None:
            handle.end(job)
            self._token_job.pop(handle.token, None)
        result = job.result
        entry = self.results.record(result, job.spec.fingerprint) if result else None
        if entry is not None and result is not None and result.kind == "profile":
            self.results.set_profile(entry, profile_of_run(Path(job.spec.workspace),
                                                           result.run_id))
        if entry is not None:
            self._loaded.add((entry.source_path, entry.module))
            self.refresh()
            if entry.candidate_path:
                self.publish_candidate(entry.candidate_path, entry)
        self._report(job, entry)
        self._verify_saves_made_during(job)

    def _report(self, job: Job, entry: ModuleResults | None) -> None:
        name = f"{job.spec.module} ({job.spec.kind})"
        if job.state == "cancelled":
            self.tell(f"KernelStitch: {name} cancelled.", lsp.MessageType.Info, job.spec.trigger)
            return
        if job.state == "failed":
            self.tell(f"KernelStitch: {name} failed: {job.message}", lsp.MessageType.Error,
                      job.spec.trigger)
            return
        text = f"KernelStitch: {name}: {job.message}"
        status = verdict_status(entry.verdict) if entry else None
        speedup = verdict_speedup(entry.verdict) if entry else None
        if status and status not in job.message:
            text += f" (verdict: {status}"
            text += f", {speedup:.2f}x vs eager)" if speedup is not None else ")"
        kind = lsp.MessageType.Warning if status == "rejected" else lsp.MessageType.Info
        self.tell(text, kind, job.spec.trigger)
        if job.spec.trigger == "user" and job.spec.kind == "generate" and job.result:
            asyncio.ensure_future(self._open_results(job.result.report_path,
                                                     job.result.candidate_path))

    async def _open_results(self, report: str | None, candidate: str | None) -> None:
        if not self.show_document_support:
            return
        for path, focus in ((report, False), (candidate, True)):
            uri = from_fs_path(path) if path else None
            if uri is None:
                continue
            try:
                await asyncio.wait_for(self.window_show_document_async(
                    lsp.ShowDocumentParams(uri=uri, take_focus=focus)), CLIENT_REQUEST_TIMEOUT_S)
            except (JsonRpcException, PyglsError, asyncio.TimeoutError) as exc:  # the message says where
                log.info("showDocument %s failed: %s", uri, exc)

    def _notify_status(self, job: Job) -> None:
        self.protocol.notify(JOB_STATUS, {
            "jobId": job.id, "uri": job.spec.uri, "module": job.spec.module,
            "kind": job.spec.kind, "stage": job.stage, "message": progress.stage_text(job),
            "state": job.state, "step": job.step, "total": job.total,
        })

    def job_for_token(self, token: Any) -> str | None:
        return self._token_job.get(str(token))

    # -- watch on save --------------------------------------------------------------------------
    def saved(self, uri: str) -> None:
        if not self.config.watch_on_save:
            return
        self.saves.trigger(uri, lambda: self._reverify(uri))

    def _reverify(self, uri: str) -> None:
        """Re-verify every module of the saved file that has a generated implementation."""
        path = _path(uri)
        if path is None:
            return
        if layout.is_generated_file(path):
            entry = self.results.for_candidate(str(path))
            if entry is None:
                return
            source, modules = Path(entry.source_path), [entry.module]
        else:
            doc = self.index.get(uri)
            source = path.resolve()
            modules = [m.name for m in (doc.scan.problems() if doc else ())
                       if m.has_inputs and self.candidate_for(source, m.name)]
        for module in modules:
            if self.jobs.active_for(str(source), module) is not None:
                # The active job may have read the file before this save: verify once more when
                # it ends (several saves meanwhile: once).  Dropping it left a saved syntax error
                # hidden behind the old verdict (issue 25).
                log.info("%s: a job is active; the save is verified when it ends", module)
                self._saved_during_job[(str(source), module)] = uri
                continue
            self.submit("verify", uri, module, trigger="save")

    def _verify_saves_made_during(self, job: Job) -> None:
        key = (job.spec.source_path, job.spec.module)
        uri = self._saved_during_job.pop(key, None)
        if uri is None or not self.config.watch_on_save or self.jobs.active_for(*key) is not None:
            return
        if self.candidate_for(Path(job.spec.source_path), job.spec.module) is not None:
            self.submit("verify", uri, job.spec.module, trigger="save")

    # -- configuration --------------------------------------------------------------------------
    def apply_settings(self, settings: Any, initial: bool = False) -> None:
        """Settings from the client over those of initializationOptions (`initial`).  Anything
        but an object (a client that supports workspace/configuration may answer null) leaves
        the settings as they are: defaults used to replace initializationOptions then."""
        if isinstance(settings, dict) and isinstance(settings.get(SECTION), dict):
            settings = settings[SECTION]
        if not isinstance(settings, dict):
            log.info("configuration: %r is not an object; settings unchanged", settings)
            return
        if initial:
            self.initial_settings = flatten_settings(settings)
        self.config = ServerConfig.from_settings({**self.initial_settings, **flatten_settings(settings)})
        log.info("configuration: %s", self.config)

    async def pull_configuration(self) -> None:
        try:
            if self.configuration_support:
                values = await self.workspace_configuration_async(lsp.ConfigurationParams(
                    items=[lsp.ConfigurationItem(section=SECTION)]))
                if values:
                    self.apply_settings(values[0])
        except (JsonRpcException, PyglsError) as exc:
            log.info("workspace/configuration failed: %s", exc)
        finally:
            self.config_ready.set()

    async def settings_known(self, timeout_s: float = 2.0) -> None:
        """Jobs started right after start-up must not run with default settings."""
        try:
            await asyncio.wait_for(self.config_ready.wait(), timeout_s)
        except asyncio.TimeoutError:
            log.warning("no answer to workspace/configuration: using current settings")


def _path(uri: str) -> Path | None:
    try:
        fs_path = to_fs_path(uri)
    except (ValueError, TypeError):
        return None
    return Path(fs_path) if fs_path else None


def _disk_fingerprint(path: Path, module: str) -> str | None:
    """Fingerprint of the module as saved: the job reads the file from disk."""
    try:
        text = read_source(path)
    except (OSError, ValueError):
        return None
    info = scan_source(text).module(module)
    return module_fingerprint(tuple(text.splitlines()), info) if info else None


# -- feature registration ------------------------------------------------------------------------
def build_server() -> KernelStitchServer:
    server = KernelStitchServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: KernelStitchServer, params: lsp.InitializeParams) -> None:
        caps = params.capabilities
        text_caps = caps.text_document
        window = caps.window
        ws = caps.workspace
        ls.pull_diagnostics = bool(text_caps and text_caps.diagnostic)
        ls.refresh_support = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
        ls.progress_support = bool(window and window.work_done_progress)
        ls.show_document_support = bool(window and window.show_document
                                         and window.show_document.support)
        ls.configuration_support = bool(ws and ws.configuration)
        options = params.initialization_options
        if isinstance(options, dict):
            ls.apply_settings(options, initial=True)

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: KernelStitchServer, params: lsp.InitializedParams) -> None:
        await ls.pull_configuration()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(ls: KernelStitchServer,
                                     params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        ls.forget_roots()  # pygls has updated the folders; each file's root is found again

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: KernelStitchServer,
                                       params: lsp.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get(SECTION), dict):
            ls.apply_settings(settings)
        else:  # VS Code sends null and expects the server to pull
            await ls.pull_configuration()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: KernelStitchServer, params: lsp.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.scan_document(uri)
        path = _path(uri)
        if doc is not None and path is not None:
            if not layout.is_generated_file(path):
                ls.load_persisted(path, list(doc.scan.problems()))
            elif ls.results.for_candidate(str(path)) is None:
                ls.load_source_of(path)
        ls.publish(uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: KernelStitchServer, params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.rescans.trigger(uri, lambda: ls.rescan_later(uri))

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: KernelStitchServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.saved(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: KernelStitchServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.rescans.cancel(uri)
        ls._scanning.pop(uri, None)
        ls._published.pop(uri, None)
        ls.index.remove(uri)
        if not ls.pull_diagnostics:
            ls.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, actions.KIND_GENERATE,
                           actions.KIND_RUN],
        resolve_provider=True))
    def code_action(ls: KernelStitchServer, params: lsp.CodeActionParams
                    ) -> list[lsp.CodeAction] | None:
        uri = params.text_document.uri
        doc = ls.current_enough(uri, params.range)
        path = _path(uri)
        if doc is None or (path is not None and layout.is_generated_file(path)):
            return None
        info = actions.module_for_range(doc, params.range)
        if info is None:
            info = _module_of_diagnostics(doc, params.context)
        if info is None:
            return None
        if path is None:
            # A notebook cell or an unsaved editor: no file for a job to read, but the
            # example-inputs scaffold is an edit of the text itself.
            listed = actions.list_actions(doc, info, actions.ModuleState(None, False),
                                          params.context, "")
            return [a for a in listed if actions.action_data(a).get("action") == "addInputs"]
        source = path.resolve()
        state = actions.ModuleState(
            candidate_path=ls.candidate_for(source, info.name),
            job_active=ls.jobs.active_for(str(source), info.name) is not None,
        )
        return actions.list_actions(doc, info, state, params.context, path.stem)

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    def code_action_resolve(ls: KernelStitchServer, action: lsp.CodeAction) -> lsp.CodeAction:
        data = actions.action_data(action)
        text = ls.text_of(data["uri"]) if isinstance(data.get("uri"), str) else None
        return actions.resolve_action(action, text)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: KernelStitchServer, params: lsp.HoverParams) -> lsp.Hover | None:
        uri = params.text_document.uri
        doc = ls.document(uri)
        path = _path(uri)
        if doc is None or path is None:
            return None
        line = params.position.line + 1
        if layout.is_generated_file(path):
            entry = ls.results.for_candidate(str(path))
            info = doc.module(CANDIDATE_CLASS)
            if entry is None or info is None or line != info.line:
                return None
            return _markdown(hover.candidate_hover(entry))
        source = path.resolve()
        info = doc.module_at(line)
        if info is None or info.name == CANDIDATE_CLASS:
            return None
        entry = ls.results.get(str(source), info.name)
        current = entry is not None and entry.fingerprint in (None, doc.fingerprint(info))
        if line == info.line:
            job = ls.jobs.active_for(str(source), info.name)
            return _markdown(hover.module_hover(info, entry, job, current))
        if entry is not None and current:
            text = hover.line_hover(line, entry)
            return _markdown(text) if text else None
        return None

    @server.feature(lsp.TEXT_DOCUMENT_DIAGNOSTIC, lsp.DiagnosticOptions(
        identifier="kernelstitch", inter_file_dependencies=False, workspace_diagnostics=False))
    def pull_diagnostics(ls: KernelStitchServer, params: lsp.DocumentDiagnosticParams
                         ) -> lsp.DocumentDiagnosticReport:
        return lsp.RelatedFullDocumentDiagnosticReport(
            items=ls.diagnostics_for(params.text_document.uri))

    @server.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: KernelStitchServer, params: lsp.WorkDoneProgressCancelParams
                        ) -> None:
        job_id = ls.job_for_token(params.token)
        if job_id is not None:
            ls.jobs.cancel(job_id)

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: KernelStitchServer, params: Any) -> None:
        ls.rescans.cancel_all()
        ls.saves.cancel_all()
        await ls.jobs.shutdown()

    @server.command(actions.CMD_GENERATE)
    async def generate(ls: KernelStitchServer, *args: Any) -> dict[str, Any]:
        return await _run_command(ls, "generate", args)

    @server.command(actions.CMD_PROFILE)
    async def profile(ls: KernelStitchServer, *args: Any) -> dict[str, Any]:
        return await _run_command(ls, "profile", args)

    @server.command(actions.CMD_VERIFY)
    async def verify(ls: KernelStitchServer, *args: Any) -> dict[str, Any]:
        return await _run_command(ls, "verify", args)

    @server.command(actions.CMD_CANCEL)
    def cancel(ls: KernelStitchServer, *args: Any) -> dict[str, Any]:
        return ls.cancel(list(args))

    @server.command(actions.CMD_ADD_INPUTS)
    async def add_inputs(ls: KernelStitchServer, *args: Any) -> dict[str, Any]:
        uri, module = _uri_module(args)
        if uri is None or module is None:
            return {"applied": False, "error": "expected [uri, moduleName]"}
        text = ls.text_of(uri)
        if text is None:
            return {"applied": False, "error": f"cannot read {uri}"}
        edit = actions.add_inputs_edit(uri, text, module)
        if edit is None:
            return {"applied": False, "error": f"{module} not found, or the file does not parse"}
        try:
            result = await asyncio.wait_for(ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
                edit=edit, label=f"Add example inputs for {module}")), CLIENT_REQUEST_TIMEOUT_S)
        except (JsonRpcException, PyglsError, asyncio.TimeoutError) as exc:
            return {"applied": False, "error": f"the editor did not apply the edit: {exc or 'no answer'}"}
        return {"applied": bool(result and result.applied)}

    @server.command(actions.CMD_OPEN_GENERATED)
    async def open_generated(ls: KernelStitchServer, *args: Any) -> dict[str, Any]:
        uri, module = _uri_module(args)
        path = _path(uri) if uri else None
        candidate = ls.candidate_for(path.resolve(), module) if path and module else None
        if candidate is None:
            return {"opened": False, "error": "no generated implementation"}
        try:
            result = await asyncio.wait_for(ls.window_show_document_async(
                lsp.ShowDocumentParams(uri=from_fs_path(str(candidate)), take_focus=True)),
                CLIENT_REQUEST_TIMEOUT_S)
        except (JsonRpcException, PyglsError, asyncio.TimeoutError) as exc:
            return {"opened": False, "path": str(candidate),
                    "error": f"the editor did not open it: {exc or 'no answer'}"}
        return {"opened": bool(result and result.success), "path": str(candidate)}

    return server


async def _run_command(ls: KernelStitchServer, kind: str, args: tuple[Any, ...]
                       ) -> dict[str, Any]:
    uri, module = _uri_module(args)
    if uri is None:
        return {"error": "expected [uri, moduleName]"}
    await ls.settings_known()
    return ls.submit(kind, uri, module)


def _uri_module(args: tuple[Any, ...] | list[Any]) -> tuple[str | None, str | None]:
    """[uri, moduleName] (VS Code), also [{uri, module}] for clients that send one object."""
    if len(args) == 1 and isinstance(args[0], dict):
        data = args[0]
        uri, module = data.get("uri"), data.get("module") or data.get("moduleName")
    else:
        uri = args[0] if args else None
        module = args[1] if len(args) > 1 else None
    # Anything but strings is the caller's mistake: the commands' usual error reply, not a crash.
    return (uri if isinstance(uri, str) and uri else None,
            module if isinstance(module, str) and module else None)


def _module_of_diagnostics(doc: DocumentScan, context: lsp.CodeActionContext
                           ) -> ModuleInfo | None:
    for diag in context.diagnostics:
        if diag.code == diagnostics.NO_INPUTS_CODE and isinstance(diag.data, dict):
            return doc.module(str(diag.data.get("module")))
    return None


def _markdown(text: str) -> lsp.Hover:
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))
