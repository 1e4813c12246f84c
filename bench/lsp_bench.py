"""Language-server latency: start-up, and codeAction/hover on a 5,000-line file.

    .venv/bin/python bench/lsp_bench.py [--lines 5000] [--requests 400]

Drives the real server process (`python -m kernelstitch.server`) over stdio with pygls's
client and prints p50/p90/p99/max in milliseconds.  Target: codeAction listing p99 < 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

MODULE = '''

class Block{i}(nn.Module):
    """Block {i}: a small MLP with a residual."""

    def __init__(self, features: int = 64, hidden: int = 256):
        super().__init__()
        self.up = nn.Linear(features, hidden)
        self.down = nn.Linear(hidden, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = torch.nn.functional.gelu(h)
        h = self.down(h)
        h = h * 0.5
        h = h + x
        h = torch.relu(h)
        h = h.clamp(-10, 10)
        return h / (1 + h.abs())


def get_inputs_Block{i}():
    return [torch.randn(32, 64)]


def get_init_inputs_Block{i}():
    return [64, 256]
'''


def make_source(lines: int) -> tuple[str, list[int]]:
    """A file of about `lines` lines; returns it and the 0-based `class` lines."""
    parts = ["import torch\nimport torch.nn as nn\n"]
    class_lines = []
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        class_lines.append(sum(p.count("\n") for p in parts) + 2)
        parts.append(MODULE.format(i=i))
        i += 1
    return "".join(parts), class_lines


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return (f"n={len(samples)} p50={statistics.median(ordered):.2f} p90={pick(0.9):.2f} "
            f"p99={pick(0.99):.2f} max={ordered[-1]:.2f} ms")


async def timed(samples: list[float], coro) -> object:
    started = time.perf_counter()
    result = await coro
    samples.append((time.perf_counter() - started) * 1000)
    return result


async def run(lines: int, requests: int) -> int:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source, class_lines = make_source(lines)
        path = root / "big.py"
        path.write_text(source)
        uri = path.as_uri()

        client = LanguageClient("lsp-bench", "0")
        started = time.perf_counter()
        await client.start_io(sys.executable, "-m", "kernelstitch.server")
        await client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri()))
        startup_ms = (time.perf_counter() - started) * 1000
        client.initialized(lsp.InitializedParams())

        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1,
                                               text=source)))

        def action_params(line: int) -> lsp.CodeActionParams:
            return lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
                context=lsp.CodeActionContext(diagnostics=[]))

        # First request pays for the initial scan of the opened document.
        first: list[float] = []
        await timed(first, client.text_document_code_action_async(action_params(0)))

        listing: list[float] = []
        offered = 0
        for _ in range(requests):
            line = rng.choice(class_lines) if rng.random() < 0.7 else rng.randrange(lines)
            result = await timed(listing, client.text_document_code_action_async(
                action_params(line)))
            offered += bool(result)

        resolving: list[float] = []
        for _ in range(min(requests, 100)):
            actions = await client.text_document_code_action_async(
                action_params(rng.choice(class_lines)))
            await timed(resolving, client.code_action_resolve_async(actions[0]))

        hovering: list[float] = []
        for _ in range(requests):
            line = rng.choice(class_lines) if rng.random() < 0.5 else rng.randrange(lines)
            await timed(hovering, client.text_document_hover_async(lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line, 8))))

        # An edit, then an action at once: pays the (debounced) re-scan inside the request.
        after_edit: list[float] = []
        text = source
        for version in range(2, 2 + min(requests, 60)):
            text = text.replace("return h / (1 + h.abs())", "return h / (2 + h.abs())", 1)
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))
            await timed(after_edit, client.text_document_code_action_async(
                action_params(rng.choice(class_lines))))

        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()

    print(f"# lsp_bench {date.today()} on {platform.node()} ({platform.processor() or 'cpu'}), "
          f"python {platform.python_version()}")
    print(f"file: {source.count(chr(10))} lines, {len(class_lines)} module classes")
    print(f"start-up (spawn to initialize result): {startup_ms:.0f} ms")
    print(f"first codeAction (initial scan):       {first[0]:.2f} ms")
    print(f"codeAction listing:                    {percentiles(listing)} "
          f"({offered} with actions)")
    print(f"codeAction/resolve:                    {percentiles(resolving)}")
    print(f"hover:                                 {percentiles(hovering)}")
    print(f"codeAction right after a full edit:    {percentiles(after_edit)}")
    p99 = sorted(listing)[min(len(listing) - 1, int(0.99 * len(listing)))]
    print(f"listing p99 < 50 ms: {'yes' if p99 < 50 else 'NO'}")
    return 0 if p99 < 50 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    return asyncio.run(run(args.lines, args.requests))


if __name__ == "__main__":
    sys.exit(main())
