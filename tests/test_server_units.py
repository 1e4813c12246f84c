"""In-process tests of the server's pieces: settings, discovery, scaffold, insertion, jobs."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kernelstitch.server.actions import (
    anchors_match,
    can_insert,
    candidate_facts,
    insert_candidate_edit,
)
from kernelstitch.server.config import ServerConfig
from kernelstitch.server.discovery import DocumentIndex
from kernelstitch.server.jobs import AlreadyActive, JobManager, JobSpec, _decode
from kernelstitch.server.scaffold import build_scaffold
from lsprotocol import types as lsp

from kernelstitch.core.problem import scan_source

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import FAKE_JOB, SOURCE

pytestmark = pytest.mark.timeout(60)


# -- settings ------------------------------------------------------------------------------------
def test_settings_nested_dotted_and_wrong_types():
    config = ServerConfig.from_settings({
        "llm": {"baseUrl": "http://x", "model": "m", "apiKeyEnv": "KEY_VAR"},
        "gpu.device": "2", "budget": {"timeSeconds": "oops", "iterations": True},
        "profilers": ["nsys", "perf"], "watch": {"onSave": "yes"}, "coder": "gpt",
    })
    assert (config.llm_base_url, config.llm_model, config.llm_api_key_env) == \
        ("http://x", "m", "KEY_VAR")
    assert config.gpu_device == 2
    assert config.budget_time_s == ServerConfig().budget_time_s  # bad value: default
    assert config.budget_iterations == ServerConfig().budget_iterations  # bool is not an int
    assert config.profilers == ("nsys",)
    assert config.watch_on_save is True and config.coder == "builtin"
    job = config.job_config()
    assert job["device"] == 2 and job["llm"]["api_key_env"] == "KEY_VAR"
    assert "device" not in ServerConfig.from_settings(None).job_config()


def test_search_settings_reach_the_pipeline_config():
    from kernelstitch.agents.pipeline import PipelineConfig

    default = PipelineConfig.from_dict(ServerConfig().job_config())
    assert (default.search, default.variants, default.search_time_s) == (True, 4, 180.0)
    config = ServerConfig.from_settings({"search": {"enabled": False, "variants": 99,
                                                    "timeSeconds": 30}})
    pipeline = PipelineConfig.from_dict(config.job_config())
    assert (pipeline.search, pipeline.variants, pipeline.search_time_s) == (False, 16, 30.0)
    assert ServerConfig.from_settings({"search.variants": 0}).search_variants == 1


# -- discovery ------------------------------------------------------------------------------------
def test_discovery_keeps_last_good_scan_and_skips_unchanged_text():
    index = DocumentIndex()
    text = SOURCE.format(options="")
    first = index.update("file:///a.py", text, 1)
    assert [m.name for m in first.scan.modules] == ["Model"]
    assert index.update("file:///a.py", text, 2).scan is first.scan  # not re-parsed
    broken = index.update("file:///a.py", text + "\ndef (", 3)
    assert broken.has_syntax_error and broken.scan is first.scan
    fixed = index.update("file:///a.py", text.replace("y + 1", "y + 3"), 4)
    assert not fixed.has_syntax_error
    info = fixed.module("Model")
    assert fixed.fingerprint(info) != first.fingerprint(first.module("Model"))


def test_anchor_check_decides_when_a_rescan_is_needed():
    index = DocumentIndex()
    text = SOURCE.format(options="")
    doc = index.update("file:///a.py", text)
    at_class = lsp.Range(lsp.Position(6, 0), lsp.Position(6, 0))
    typed = text.replace("y + 1", "y + 12345")  # inside forward: nothing moved
    assert anchors_match(doc, typed.splitlines(), at_class)
    shifted = "\n" + text  # every line moved down
    assert not anchors_match(doc, shifted.splitlines(), at_class)
    new_class = text.splitlines()
    new_class[0] = "class Fresh(nn.Module):"
    assert not anchors_match(doc, new_class, lsp.Range(lsp.Position(0, 0),
                                                       lsp.Position(0, 0)))


# -- scaffold -------------------------------------------------------------------------------------
def _with_scaffold(source: str, name: str) -> str:
    scaffold = build_scaffold(source, name)
    assert scaffold is not None
    return source + "\n\n" + scaffold.text + "\n"


def test_scaffold_for_model_uses_plain_names_and_runs():
    source = (
        "import torch\nfrom torch import nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, dim: int, eps: float, *, bias=True):\n"
        "        super().__init__()\n"
        "    def forward(self, x, y, scale: float):\n"
        "        return x\n"
    )
    full = _with_scaffold(source, "Model")
    info = scan_source(full).module("Model")
    assert (info.inputs_fn, info.init_inputs_fn) == ("get_inputs", "get_init_inputs")
    namespace: dict = {}
    exec(compile(full, "m.py", "exec"), namespace)  # noqa: S102 - our own scaffold, not user code
    assert namespace["get_init_inputs"]() == [16, 1.0]  # keyword-only `bias` left out
    x, y, scale = namespace["get_inputs"]()
    assert tuple(x.shape) == tuple(y.shape) == (16, 16) and scale == 1.0


def test_scaffold_inherits_init_and_imports_torch_when_missing():
    source = (
        "from torch import nn\n\n"
        "class Base(nn.Module):\n"
        "    def __init__(self, features, hidden=32):\n"
        "        super().__init__()\n\n"
        "class Head(Base):\n"
        "    def forward(self, x):\n"
        "        return x\n"
    )
    scaffold = build_scaffold(source, "Head")
    assert scaffold.inputs_fn == "get_inputs_Head"
    assert scaffold.init_inputs_fn == "get_init_inputs_Head"
    assert "    import torch\n" in scaffold.text
    assert "16,  # features" in scaffold.text and "32,  # hidden (default)" in scaffold.text
    compile(_with_scaffold(source, "Head"), "m.py", "exec")
    assert build_scaffold("class (", "Head") is None


# -- inserting the generated class ------------------------------------------------------------------
CANDIDATE = (
    "from __future__ import annotations\nimport torch\nfrom torch import nn\n\n"
    "_SRC = 'kernel'\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
)


def test_insert_candidate_when_simple(tmp_path):
    candidate = tmp_path / "model_new.py"
    candidate.write_text(CANDIDATE)
    user = SOURCE.format(options="")
    doc = DocumentIndex().update("file:///p.py", user)
    assert can_insert(doc, candidate, "problem")
    edit = insert_candidate_edit("file:///p.py", user, candidate, "problem")
    new_text = edit.changes["file:///p.py"][0].new_text
    assert "from __future__" not in new_text
    combined = user + new_text
    compile(combined, "p.py", "exec")
    assert scan_source(combined).module("ModelNew") is not None


@pytest.mark.parametrize("body", [
    "from .helpers import k\nclass ModelNew: pass\n",  # relative import
    "from problem import Model\nclass ModelNew(Model): pass\n",  # imports the user's file
    "class ModelNew: pass\ndef get_inputs():\n    return []\n",  # would shadow the user's
    "x = 1\n",  # no ModelNew at all
])
def test_insert_refused_when_not_simple(tmp_path, body):
    candidate = tmp_path / "model_new.py"
    candidate.write_text(body)
    doc = DocumentIndex().update("file:///p.py", SOURCE.format(options=""))
    assert not can_insert(doc, candidate, "problem")
    assert candidate_facts(tmp_path / "missing.py") is None


# -- jobs -----------------------------------------------------------------------------------------
def test_job_event_decoding_tolerates_new_fields_and_noise():
    progress = _decode('{"type":"progress","stage":"coding","message":"m","step":1,"total":2,'
                       '"eta_s":3}')
    assert progress.stage == "coding" and progress.total == 2
    assert _decode("compiling kernel.cu ...") is None
    assert _decode("[1, 2]") is None
    assert _decode('{"type":"result"}') is None  # missing required fields


class Recorder:
    def __init__(self) -> None:
        self.changes: list[tuple[str, str, str]] = []
        self.finished: list[tuple[str, str]] = []

    def job_changed(self, job) -> None:
        self.changes.append((job.id, job.state, job.stage))

    def job_finished(self, job) -> None:
        self.finished.append((job.id, job.state))


def _spec(tmp_path: Path, name: str, options: str) -> JobSpec:
    source = tmp_path / f"{name}.py"
    source.write_text(SOURCE.format(options=options))
    return JobSpec(kind="generate", uri=source.as_uri(), source_path=str(source),
                   module="Model", workspace=str(tmp_path))


def test_job_manager_queue_dedupe_and_cancel_queued(tmp_path):
    async def scenario():
        recorder = Recorder()
        manager = JobManager(recorder, command=[sys.executable, str(FAKE_JOB)])
        first = manager.submit(_spec(tmp_path, "a", "delay=0.2"))
        second = manager.submit(_spec(tmp_path, "b", "delay=0.01"))
        with pytest.raises(AlreadyActive):
            manager.submit(_spec(tmp_path, "a", "delay=0.01"))
        assert manager.queue_position(second) == 0
        assert manager.cancel(second.id)
        await asyncio.wait_for(first.finished.wait(), 30)
        await asyncio.wait_for(second.finished.wait(), 1)
        return recorder, first, second

    recorder, first, second = asyncio.run(scenario())
    assert first.state == "done" and first.result.candidate_path
    assert second.state == "cancelled" and second.pid is None  # never started
    assert ("job-1", "running", "coding") in recorder.changes
    assert recorder.finished == [("job-2", "cancelled"), ("job-1", "done")]


def test_job_without_result_line_fails_with_stderr(tmp_path):
    async def scenario():
        manager = JobManager(Recorder(), command=[
            sys.executable, "-c", ("import sys; sys.stdin.readline(); "
                                   "print('boom: no module named foo', file=sys.stderr); "
                                   "sys.exit(3)")])
        job = manager.submit(_spec(tmp_path, "a", ""))
        await asyncio.wait_for(job.finished.wait(), 30)
        return job

    job = asyncio.run(scenario())
    assert job.state == "failed"
    assert "status 3" in job.message and "boom: no module named foo" in job.message


# -- entry point ----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tcp_mode_answers_initialize(tmp_path):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "kernelstitch.server", "--tcp",
                               "--port", str(port)], stderr=subprocess.PIPE)
    try:
        async def talk():
            from pygls.lsp.client import LanguageClient

            client = LanguageClient("t", "0")
            deadline = time.monotonic() + 20
            while True:  # pygls serves one TCP connection: no probing, connect when it listens
                try:
                    await client.start_tcp("127.0.0.1", port)
                    break
                except OSError:
                    assert time.monotonic() < deadline, "server did not listen"
                    await asyncio.sleep(0.1)
            result = await client.initialize_async(lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(), root_uri=tmp_path.as_uri()))
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()
            return result

        result = asyncio.run(talk())
        assert result.server_info.name == "kernelstitch"
        assert "kernelstitch.generate" in result.capabilities.execute_command_provider.commands
        assert result.capabilities.code_action_provider.resolve_provider is True
    finally:
        server.terminate()
        server.wait(10)


def test_a_kept_original_withdraws_the_candidate_and_the_hover_says_so(tmp_path):
    from kernelstitch.agents.job_protocol import JobResult
    from kernelstitch.server.hover import selection_line
    from kernelstitch.server.results import ResultStore

    store = ResultStore()
    source = tmp_path / "m.py"
    delivered = JobResult(status="succeeded", message="accepted", kind="generate",
                          source_path=str(source), module="Model",
                          candidate_path=str(tmp_path / "model_new.py"),
                          selection={"decision": "deliver", "winner": "nchw",
                                     "original_ms": {"median": 2.0},
                                     "original_graph": {"name": "original-graph",
                                                        "time_ms": {"median": 1.9}},
                                     "variants": [{"name": "nchw", "time_ms": {"median": 1.0}}],
                                     "why": "nchw was the fastest verified variant" + "!" * 900})
    entry = store.record(delivered, None)
    assert entry.candidate_path and store.for_candidate(entry.candidate_path) is entry
    line = selection_line(entry.selection)
    assert "Delivered `nchw`" in line
    assert "original 2.000 ms, original-graph 1.900 ms, nchw 1.000 ms" in line
    assert "Why: nchw was the fastest verified variant" in line and len(line) < 700
    kept = JobResult(status="succeeded", message="kept the original", kind="generate",
                     source_path=str(source), module="Model",
                     selection={"decision": "keep_original", "winner": None,
                                "original_ms": {"median": 2.0},
                                "variants": [{"name": "default", "time_ms": {"median": 2.5}},
                                             {"name": "broken", "time_ms": None}]})
    entry = store.record(kept, None)
    assert entry.candidate_path is None
    assert store.for_candidate(str(tmp_path / "model_new.py")) is None
    assert selection_line(entry.selection).startswith("**Kept your module**")
    assert selection_line(None) is None
