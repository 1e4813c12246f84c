"""End-to-end tests of the language server process through pytest-lsp (jobs: the fake job)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import (
    FORWARD_LINE,
    MODEL_LINE,
    NO_INPUTS_SOURCE,
    SOURCE,
    alive,
    code_actions,
    execute,
    final_status,
    hover_text,
    open_document,
    replace_text,
    server_config,
    start_client,
    wait_for,
)

pytestmark = [pytest.mark.asyncio(loop_scope="function"), pytest.mark.timeout(60)]


def write_source(root: Path, options: str = "delay=0.05", name: str = "problem.py") -> Path:
    path = root / name
    path.write_text(SOURCE.format(options=options))
    return path


@pytest_asyncio.fixture
async def client(tmp_path):
    client = await start_client(tmp_path, config=server_config(tmp_path / "jobs.log"))
    yield client
    await client.shutdown_session()
    await client.stop()


@pytest_asyncio.fixture
async def pull_client(tmp_path):
    client = await start_client(tmp_path, pull=True, config=server_config(tmp_path / "jobs.log"))
    yield client
    await client.shutdown_session()
    await client.stop()


def titles(actions: list[lsp.CodeAction]) -> list[str]:
    return [a.title.removeprefix("KernelStitch: ") for a in actions]


async def test_actions_listed_lazily_and_resolved(client, tmp_path):
    uri = open_document(client, write_source(tmp_path))
    listed = await code_actions(client, uri, MODEL_LINE)
    assert titles(listed) == ["Generate CUDA implementation", "Profile this module"]
    assert all(a.command is None and a.edit is None for a in listed)  # filled in by resolve
    resolved = await client.code_action_resolve_async(listed[0])
    assert resolved.command.command == "kernelstitch.generate"
    assert list(resolved.command.arguments) == [uri, "Model"]
    # Also offered on `def forward`, not inside other lines of the body.
    assert titles(await code_actions(client, uri, FORWARD_LINE))[0].startswith("Generate")
    assert await code_actions(client, uri, FORWARD_LINE + 1) == []
    assert await code_actions(client, uri, 0) == []


async def test_add_example_inputs_scaffold_is_valid_python(client, tmp_path):
    path = tmp_path / "blocks.py"
    path.write_text(NO_INPUTS_SOURCE)
    uri = open_document(client, path)
    diags = await wait_for(lambda: client.diagnostics.get(uri))
    hints = [d for d in diags if d.code == "no-example-inputs"]
    assert {d.data["module"] for d in hints} == {"Block", "Other"}
    assert all(d.severity == lsp.DiagnosticSeverity.Information for d in hints)

    listed = await code_actions(client, uri, 4)  # class Block
    assert titles(listed) == ["Add example inputs"]
    action = await client.code_action_resolve_async(listed[0])
    edit = action.edit.changes[uri][0]
    lines = NO_INPUTS_SOURCE.splitlines()
    # Apply the edit as an editor would and check the result is a valid problem file.
    row, col = edit.range.start.line, edit.range.start.character
    new_text = "\n".join(lines[:row] + [lines[row][:col] + edit.new_text + lines[row][col:]]
                         + lines[row + 1:]) + "\n"
    compile(new_text, "blocks.py", "exec")
    from kernelstitch.core.problem import scan_source

    block = scan_source(new_text).module("Block")
    assert block.inputs_fn == "get_inputs_Block"
    assert block.init_inputs_fn == "get_init_inputs_Block"
    # x goes straight into nn.Linear(features, features), features being the scaffold's 16.
    assert "torch.randn(batch, 16),  # x: what self.lin (nn.Linear(features, features)) takes" \
        in edit.new_text
    assert "torch.randn(batch, 16),  # mask: placeholder shape" in edit.new_text
    assert "16,  # features" in edit.new_text and "0.1,  # dropout (default)" in edit.new_text

    # The command form applies the same edit through workspace/applyEdit.
    result = await execute(client, "kernelstitch.addExampleInputs", uri, "Other")
    assert result["applied"] is True
    applied = client.applied_edits[-1].edit.changes[uri][0].new_text
    assert "def get_inputs_Other():" in applied and "get_init_inputs_Other" not in applied


async def test_pushed_diagnostics_follow_an_edit_answered_inside_the_debounce(client, tmp_path):
    """Issue 25: a request inside the 150 ms debounce scans the new text at once; the delayed
    re-scan then found nothing new and published nothing, leaving the old diagnostics up."""
    path = tmp_path / "blocks.py"
    path.write_text(NO_INPUTS_SOURCE)
    uri = open_document(client, path)

    def hinted() -> set[str]:
        return {d.data["module"] for d in client.diagnostics.get(uri, []) if d.code == "no-example-inputs"}

    await wait_for(lambda: hinted() == {"Block", "Other"})
    without_other = NO_INPUTS_SOURCE[:NO_INPUTS_SOURCE.index("class Other")]
    for version, text in enumerate([without_other, NO_INPUTS_SOURCE, without_other], start=2):
        replace_text(client, uri, text, version)
        await hover_text(client, uri, 4)  # answered before the debounce fires: scans the new text
        want = {"Block"} if text == without_other else {"Block", "Other"}
        await wait_for(lambda want=want: hinted() == want, timeout=1.0)


async def test_text_python_cannot_parse_keeps_the_server_answering(client, tmp_path):
    """Issue 25: a lone UTF-16 surrogate and nesting past the parser's limits made scan_source
    raise (no actions, hover or diagnostics for the file); now they are a parse error like any."""
    cases = {"surrogate.py": SOURCE.format(options="delay=0.05") + "\nname = '\ud800'\n",
             "deep.py": "x = " + "-" * 100_000 + "1\n",
             "parens.py": "x = " + "(" * 5000 + ")" * 5000 + "\n"}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        uri = open_document(client, path, text)
        await code_actions(client, uri, MODEL_LINE)  # answered (the test times out otherwise)
        await hover_text(client, uri, MODEL_LINE)
    # The surrogate is scanned as U+FFFD: the module is found and its actions offered.
    uri = (tmp_path / "surrogate.py").as_uri()
    assert titles(await code_actions(client, uri, MODEL_LINE))[:1] == ["Generate CUDA implementation"]


async def test_generate_progress_result_and_documents(client, tmp_path):
    uri = open_document(client, write_source(tmp_path, "delay=0.05 steps=3 speedup=1.75 "
                                                       "verdict=accepted"))
    started = await execute(client, "kernelstitch.generate", uri, "Model")
    job_id = started["jobId"]
    done = await wait_for(lambda: final_status(client, job_id))
    assert done["state"] == "done"

    token = f"kernelstitch/{job_id}"
    reports = await wait_for(lambda: (r := client.progress_reports.get(token)) and
                             r[-1].kind == "end" and r)
    assert reports[0].kind == "begin" and reports[0].cancellable
    messages = [r.message for r in reports if r.kind == "report"]
    assert "coding step 2/3: fused kernel 2" in messages
    assert any(m.startswith("compiling") for m in messages)
    assert any(m.startswith("verifying") for m in messages)
    stages = [s["stage"] for s in client.job_status if s["jobId"] == job_id]
    assert stages[0] == "queued" and "planning" in stages and stages[-1] == "done"

    # The candidate and the report are opened; a summary names the verdict and speedup.
    shown = await wait_for(lambda: len(client.shown_documents) >= 2 and client.shown_documents)
    assert shown[0].uri.endswith("report.md") and shown[1].uri.endswith("model_new.py")
    assert shown[1].take_focus
    assert any("accepted: 1.75x" in m.message for m in client.messages)

    # Hover on the class: verdict, speedup and plan summary.
    text = await hover_text(client, uri, MODEL_LINE)
    assert "accepted" in text and "1.75x" in text and "fused kernel 3" in text
    # Now that a candidate exists, Verify and Insert are offered.
    offered = titles(await code_actions(client, uri, MODEL_LINE))
    assert "Verify generated implementation" in offered
    assert "Insert ModelNew into this file" in offered


async def test_second_request_for_same_module_says_already_running(client, tmp_path):
    uri = open_document(client, write_source(tmp_path, "delay=0.5"))
    first = await execute(client, "kernelstitch.generate", uri, "Model")
    second = await execute(client, "kernelstitch.profile", uri, "Model")
    assert second["alreadyRunning"] and second["jobId"] == first["jobId"]
    assert any("already has a generate job" in m.message for m in client.messages)
    # While it runs, the only action offered is cancelling it.
    assert titles(await code_actions(client, uri, MODEL_LINE)) == ["Cancel the running job"]
    await execute(client, "kernelstitch.cancel", first["jobId"])
    assert (await wait_for(lambda: final_status(client, first["jobId"])))["state"] == "cancelled"


async def test_jobs_queue_fifo_one_at_a_time(client, tmp_path):
    uris = [open_document(client, write_source(tmp_path, "delay=0.15", f"p{i}.py"))
            for i in range(3)]
    ids = [(await execute(client, "kernelstitch.generate", u, "Model"))["jobId"] for u in uris]
    queued = [s for s in client.job_status if s["state"] == "queued"]
    assert {s["jobId"] for s in queued} >= set(ids[1:])
    assert any("queued behind" in s["message"] for s in queued)
    for job_id in ids:
        await wait_for(lambda job_id=job_id: final_status(client, job_id), timeout=20)
    # Never two running at once: replay the status stream.
    running: set[str] = set()
    for status in client.job_status:
        if status["state"] == "running":
            running.add(status["jobId"])
        elif status["state"] in ("done", "failed", "cancelled"):
            running.discard(status["jobId"])
        assert len(running) <= 1
    starts = [s["jobId"] for s in client.job_status if s["state"] == "running"]
    assert list(dict.fromkeys(starts)) == ids  # FIFO


async def test_cancel_from_progress_kills_job_process(client, tmp_path):
    uri = open_document(client, write_source(tmp_path, "delay=2 steps=5"))
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    loading = await wait_for(lambda: [s for s in client.job_status if s["jobId"] == job_id
                                      and s["message"].startswith("pid=")])
    pid = int(loading[0]["message"].split("=")[1])
    assert alive(pid)
    # The server answers while the job runs (the job, 5 steps of 2 s, is still running then).
    assert "Model" in await hover_text(client, uri, MODEL_LINE)
    assert alive(pid) and final_status(client, job_id) is None
    client.window_work_done_progress_cancel(
        lsp.WorkDoneProgressCancelParams(token=f"kernelstitch/{job_id}"))
    assert (await wait_for(lambda: final_status(client, job_id)))["state"] == "cancelled"
    await wait_for(lambda: not alive(pid), timeout=5)


async def test_job_ignoring_sigterm_is_killed(client, tmp_path):
    uri = open_document(client, write_source(tmp_path, "delay=30 ignore_term=1"))
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    loading = await wait_for(lambda: [s for s in client.job_status if s["jobId"] == job_id
                                      and s["message"].startswith("pid=")])
    pid = int(loading[0]["message"].split("=")[1])
    assert (await execute(client, "kernelstitch.cancel", uri, "Model"))["cancelled"]
    # kill_after_s is 5 s: the process goes, the job ends cancelled.
    assert (await wait_for(lambda: final_status(client, job_id), timeout=10))["state"] == \
        "cancelled"
    assert not alive(pid)


async def test_failed_job_reports_error(client, tmp_path):
    uri = open_document(client, write_source(tmp_path, "fail=1"))
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    assert (await wait_for(lambda: final_status(client, job_id)))["state"] == "failed"
    await wait_for(lambda: any(m.type == lsp.MessageType.Error and "fake failure" in m.message
                               for m in client.messages))


async def test_findings_published_then_cleared_when_module_changes(client, tmp_path):
    path = write_source(tmp_path, "findings=13,14")
    uri = open_document(client, path)
    job_id = (await execute(client, "kernelstitch.profile", uri, "Model"))["jobId"]
    await wait_for(lambda: final_status(client, job_id))
    diags = await wait_for(lambda: [d for d in client.diagnostics.get(uri, [])
                                    if d.code == "profile:Model"])
    assert sorted(d.range.start.line for d in diags) == [12, 13]
    assert diags[0].severity == lsp.DiagnosticSeverity.Warning
    assert "fuse the elementwise chain" in diags[0].message
    # Hover on a finding's line shows its detail.
    text = await hover_text(client, uri, 12)
    assert "slow kernel on line 13" in text and "12% of peak" in text

    # Editing another module's text would keep them; editing this module drops them.
    edited = path.read_text().replace("return y + 1", "return y + 2")
    replace_text(client, uri, edited, 2)
    await wait_for(lambda: not [d for d in client.diagnostics.get(uri, [])
                                if d.code == "profile:Model"])
    assert await hover_text(client, uri, 12) == ""
    # Reverting does not bring them back: only a new run does.
    replace_text(client, uri, path.read_text(), 3)
    await hover_text(client, uri, MODEL_LINE)  # flushes the debounced re-scan
    assert not [d for d in client.diagnostics.get(uri, []) if d.code == "profile:Model"]


async def test_verification_diagnostics_on_generated_file(client, tmp_path):
    uri = open_document(client, write_source(tmp_path, "verdict=rejected reason_line=9"))
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    await wait_for(lambda: final_status(client, job_id))
    shown = await wait_for(lambda: [d.uri for d in client.shown_documents
                                    if d.uri.endswith("model_new.py")])
    candidate_uri = shown[0]
    diags = await wait_for(lambda: client.diagnostics.get(candidate_uri))
    assert diags[0].range.start.line == 8 and diags[0].code == "wrong_output"
    assert diags[0].severity == lsp.DiagnosticSeverity.Error
    # Hover on the generated file's class line: the verdict.
    candidate = Path(lsp_path(candidate_uri))
    open_document(client, candidate)
    text = await hover_text(client, candidate_uri, 4)
    assert "rejected" in text and "wrong_output" in text


def lsp_path(uri: str) -> str:
    from pygls.uris import to_fs_path

    return to_fs_path(uri)


async def test_did_save_reverifies_debounced(client, tmp_path):
    path = write_source(tmp_path, "verdict=accepted speedup=2.0")
    uri = open_document(client, path)
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    await wait_for(lambda: final_status(client, job_id))
    count = len(client.job_status)
    for _ in range(4):  # a burst of saves
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))
    await wait_for(lambda: [s for s in client.job_status[count:] if s["kind"] == "verify"
                            and s["state"] == "done"], timeout=10)
    log = (tmp_path / "jobs.log").read_text().splitlines()
    assert [line for line in log if '"verify"' in line].__len__() == 1
    # Background runs do not pop up message boxes or progress.
    assert not any("(verify)" in m.message for m in client.messages)
    verify_id = next(s["jobId"] for s in client.job_status[count:] if s["kind"] == "verify")
    assert f"kernelstitch/{verify_id}" not in client.progress_reports

    # Saving the generated file re-verifies that file against its source.
    candidate = next((tmp_path / ".kernelstitch").rglob("model_new.py"))
    candidate_uri = open_document(client, candidate)
    count = len(client.job_status)
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=candidate_uri)))
    await wait_for(lambda: [s for s in client.job_status[count:] if s["kind"] == "verify"
                            and s["state"] == "done"], timeout=10)
    import json

    request = json.loads((tmp_path / "jobs.log").read_text().splitlines()[-1])
    assert request["kind"] == "verify" and request["candidate_path"] == str(candidate)
    assert request["source_path"] == str(path.resolve())


async def test_a_save_during_a_running_job_is_verified_when_it_ends(client, tmp_path):
    """Issue 25: a save made while a job ran was dropped; the running job had read the file before."""
    path = write_source(tmp_path, "verdict=accepted speedup=2.0")
    uri = open_document(client, path)
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    await wait_for(lambda: final_status(client, job_id))
    path.write_text(SOURCE.format(options="delay=3 steps=3 verdict=accepted"))  # slower than the save debounce
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    first = await wait_for(lambda: [s for s in client.job_status if s["kind"] == "verify"
                                    and s["message"].startswith("pid=")], timeout=10)  # it read the file
    path.write_text(SOURCE.format(options="delay=0.05 verdict=accepted"))  # saved while it runs
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    done = await wait_for(lambda: {s["jobId"] for s in client.job_status if s["kind"] == "verify"
                                   and s["state"] == "done"} - {first[0]["jobId"]}, timeout=15)
    assert len(done) == 1  # one follow-up verify, after the first ended
    log = [line for line in (tmp_path / "jobs.log").read_text().splitlines() if '"verify"' in line]
    assert len(log) == 2


async def test_did_save_does_nothing_when_watch_is_off(tmp_path):
    client = await start_client(tmp_path, settings={"watch": {"onSave": False}},
                                config=server_config(tmp_path / "jobs.log"))
    try:
        path = write_source(tmp_path)
        uri = open_document(client, path)
        job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
        await wait_for(lambda: final_status(client, job_id))
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))
        await asyncio.sleep(1.6)  # past the 1 s debounce
        assert not [s for s in client.job_status if s["kind"] == "verify"]
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_pull_diagnostics(pull_client, tmp_path):
    path = tmp_path / "blocks.py"
    path.write_text(NO_INPUTS_SOURCE)
    uri = open_document(pull_client, path)
    report = await pull_client.text_document_diagnostic_async(lsp.DocumentDiagnosticParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert {d.data["module"] for d in report.items} == {"Block", "Other"}
    assert uri not in pull_client.diagnostics  # no pushes to a pull client


async def test_configuration_reaches_the_job(tmp_path):
    settings = {"gpu": {"device": 3}, "coder": "llm", "profilers": ["ncu", "bogus"],
                "llm": {"model": "m1", "apiKeyEnv": "MY_KEY"}, "budget": {"iterations": 7}}
    client = await start_client(tmp_path, settings=settings,
                                config=server_config(tmp_path / "jobs.log"))
    try:
        uri = open_document(client, write_source(tmp_path))
        job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
        await wait_for(lambda: final_status(client, job_id))
        import json

        config = json.loads((tmp_path / "jobs.log").read_text().splitlines()[-1])["config"]
        assert config["device"] == 3 and config["coder"] == "llm"
        assert config["profilers"] == ["ncu"]
        assert config["llm"]["model"] == "m1" and config["llm"]["api_key_env"] == "MY_KEY"
        assert config["budget"]["iterations"] == 7
        # didChangeConfiguration with null settings makes the server pull again.
        client.set_configuration({"gpu": {"device": 1}}, section="kernelstitch")
        client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings=None))
        await hover_text(client, uri, MODEL_LINE)  # a round trip for the pull to finish
        job_id = (await execute(client, "kernelstitch.profile", uri, "Model"))["jobId"]
        await wait_for(lambda: final_status(client, job_id))
        config = json.loads((tmp_path / "jobs.log").read_text().splitlines()[-1])["config"]
        assert config["device"] == 1 and config["coder"] == "builtin"
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_initialization_options_survive_a_null_configuration_answer(tmp_path):
    """Issue 25: a client that supports workspace/configuration but answers null (no settings for
    the section) reset every setting to its default, on-save re-verify back on included."""
    client = await (server_config(tmp_path / "jobs.log")).start()  # no settings set: it answers [null]
    client.job_status = []

    @client.feature("kernelstitch/jobStatus")
    def _job_status(params) -> None:
        client.job_status.append(params if isinstance(params, dict) else dict(params._asdict()))

    try:
        from lsp_helpers import capabilities

        await client.initialize_session(lsp.InitializeParams(
            capabilities=capabilities(), root_uri=tmp_path.as_uri(),
            initialization_options={"watch": {"onSave": False}, "budget": {"iterations": 5}}))
        path = write_source(tmp_path, "verdict=accepted speedup=2.0")
        uri = open_document(client, path)
        job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
        await wait_for(lambda: final_status(client, job_id))
        import json

        config = json.loads((tmp_path / "jobs.log").read_text().splitlines()[-1])["config"]
        assert config["budget"]["iterations"] == 5
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
        await asyncio.sleep(1.5)  # past the save debounce: nothing may start
        assert len((tmp_path / "jobs.log").read_text().splitlines()) == 1
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_results_survive_a_restart(tmp_path):
    """Hover after a restart reads the run store the jobs wrote: verdict, plan, kernels."""
    path = write_source(tmp_path, "findings=13 verdict=accepted speedup=1.5")
    config = server_config(tmp_path / "jobs.log")
    first = await start_client(tmp_path, config=config)
    try:
        uri = open_document(first, path)
        for command in ("kernelstitch.generate", "kernelstitch.profile"):
            job_id = (await execute(first, command, uri, "Model"))["jobId"]
            assert (await wait_for(lambda job_id=job_id: final_status(first, job_id)))["state"] == "done"
        text = await hover_text(first, uri, 12)  # the profiled line: kernel table from the store
        assert "triton_fused_relu_mul" in text and "40%" in text
    finally:
        await first.shutdown_session()
        await first.stop()

    second = await start_client(tmp_path, config=config)
    try:
        uri = open_document(second, path)
        text = await hover_text(second, uri, MODEL_LINE)
        assert "accepted" in text and "1.50x" in text and "fused kernel 1" in text
        assert "triton_fused_relu_mul" in text  # the file did not change since the profile
        diags = await wait_for(lambda: [d for d in second.diagnostics.get(uri, [])
                                        if d.code == "profile:Model"])
        assert [d.range.start.line for d in diags] == [12]
        offered = titles(await code_actions(second, uri, MODEL_LINE))
        assert "Verify generated implementation" in offered
        # Opening the generated file first also finds its verdict (third server).
    finally:
        await second.shutdown_session()
        await second.stop()

    third = await start_client(tmp_path, config=config)
    try:
        candidate = next((tmp_path / ".kernelstitch").rglob("model_new.py"))
        candidate_uri = open_document(third, candidate)
        text = await hover_text(third, candidate_uri, 4)  # class ModelNew
        assert "generated for `Model`" in text and "1.50x" in text
    finally:
        await third.shutdown_session()
        await second.stop()


async def test_uris_of_fifos_and_devices_are_refused_not_read(client, tmp_path):
    """Issue 25: a FIFO's URI froze the server in open(); /dev/zero was read until memory ran out.
    Requests on them are answered (nothing to offer) and the server keeps working."""
    import os

    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    for uri in (fifo.as_uri(), "file:///dev/zero"):
        assert await code_actions(client, uri, 0) == []
        await hover_text(client, uri, 0)
        for command in ("kernelstitch.generate", "kernelstitch.verify", "kernelstitch.addExampleInputs"):
            result = await asyncio.wait_for(execute(client, command, uri, "Model"), 10)
            assert "not a regular file" in str(result) or "cannot read" in str(result), (command, result)
    uri = open_document(client, write_source(tmp_path))
    assert titles(await code_actions(client, uri, MODEL_LINE))[0] == "Generate CUDA implementation"
