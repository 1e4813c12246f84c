"""The language server driving the real job process (`python -m kernelstitch.agents.job`).

Slow: each job imports torch.  On a machine without a GPU the generate job still plans and
codes, and its verdict is could_not_verify; profiling says there is no CUDA device.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import (
    execute,
    final_status,
    hover_text,
    open_document,
    server_config,
    start_client,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="function"),
              pytest.mark.timeout(600)]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "elementwise_chain.py"


def _builtin_pipeline_available() -> bool:
    try:
        return all(importlib.util.find_spec(name) is not None for name in (
            "kernelstitch.agents.planner.builtin", "kernelstitch.agents.coder.builtin",
            "kernelstitch.agents.planner.capture"))
    except ModuleNotFoundError:
        return False


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest_asyncio.fixture
async def client(tmp_path):
    client = await start_client(tmp_path, config=server_config(real_job=True))
    yield client
    await client.shutdown_session()
    await client.stop()


def _model_line(path: Path) -> int:
    from kernelstitch.core.problem import scan_source

    return scan_source(path.read_text()).module("Model").line - 1


async def test_real_profile_job(client, tmp_path):
    path = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, path)
    uri = open_document(client, path)
    job_id = (await execute(client, "kernelstitch.profile", uri, "Model"))["jobId"]
    status = await wait_for(lambda: final_status(client, job_id), timeout=300)
    stages = [s["stage"] for s in client.job_status if s["jobId"] == job_id]
    assert "profiling" in stages
    if _cuda_available():
        assert status["state"] == "done"
    else:
        assert status["state"] == "failed" and "no CUDA device" in status["message"]


@pytest.mark.skipif(not _builtin_pipeline_available(),
                    reason="the built-in planner/coder (agents/planner, agents/coder) not there")
async def test_real_generate_job(client, tmp_path):
    path = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, path)
    uri = open_document(client, path)
    job_id = (await execute(client, "kernelstitch.generate", uri, "Model"))["jobId"]
    status = await wait_for(lambda: final_status(client, job_id), timeout=500)
    assert status["state"] == "done", status
    stages = {s["stage"] for s in client.job_status if s["jobId"] == job_id}
    assert {"planning", "coding"} <= stages
    shown = await wait_for(lambda: [d.uri for d in client.shown_documents
                                    if d.uri.endswith("model_new.py")])
    assert shown
    candidate = next((tmp_path / ".kernelstitch").rglob("model_new.py"))
    assert "class ModelNew" in candidate.read_text()
    text = await hover_text(client, uri, _model_line(path))
    if _cuda_available():
        assert "Verdict" in text
    else:
        assert "could not verify" in text
