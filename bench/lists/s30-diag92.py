"""Thirtieth session, call 2: level2/92's captured graph and built-in plan on the GPU machine
(the group_norm-keeps-NHWC plan: conv without its bias, no copy back to NCHW), printed before
its Nsight Compute run.  Writes the graph under $OUT/c."""
import json
import os
import sys
from pathlib import Path

import torch
from kernelstitch.agents.coder.layout import ChannelsLastReaders
from kernelstitch.agents.plan.graph import Graph
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.variants import propose_variants

from kernelstitch.bench.coverage import capture_in_worker

out = Path(os.environ.get("OUT", "/tmp/ks_out")) / "c"
out.mkdir(parents=True, exist_ok=True)
path = Path(sys.argv[1])
response = capture_in_worker(path, None, 150)
if not response.ok:
    print("capture failed:", response.error)
    sys.exit(1)
(out / f"graph_{path.stem[:12]}.json").write_text(json.dumps(response.result))
graph = Graph.from_json(response.result)
print("torch", torch.__version__)
for node in graph.nodes:
    print("node", node.name, node.op, [getattr(a, "node", a) for a in node.args][:6])
plan = plan_builtin(graph)
for step in plan.steps:
    print("step", step.id, step.technique, step.nodes, step.inputs)
print("notes", plan.notes)
for variant in propose_variants(graph, limit=None):
    if variant.name == "default" and variant.plan.host.channels_last:
        print("nhwc", sorted(ChannelsLastReaders(variant.plan, variant.plan.graph).channels_last_tensors()))
