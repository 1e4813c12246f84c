"""Layout passes per forward of level-3 CNN default plans: NCHW->NHWC input copies that move data,
conv outputs copied back, elementwise steps that transpose (read NHWC, write NCHW), with and
without the kept elementwise outputs."""
import json
import sys
import time
from pathlib import Path

from kernelstitch.agents.coder.layout import ChannelsLastReaders
from kernelstitch.agents.inprocess import generate_builtin


def counts(plan, graph):
    lay = ChannelsLastReaders(plan, graph)
    nhwc = lay.channels_last_tensors()
    kept = lay.kept_steps()
    convs = [s for s in plan.steps if lay.is_conv(s)]
    back = [s for s in convs if s.outputs[0] not in nhwc]
    swap_in = {s.inputs[0] for s in convs if s.inputs[0] not in nhwc}  # one copy a tensor (program.py)
    transposing = [s for s in plan.steps if s.technique == "fused_elementwise" and s.id not in kept
                   and any(i in nhwc for i in s.inputs)]
    return len(convs), len(swap_in), len(back), len(transposing), len(kept)


for f in sys.argv[1:]:
    p = Path(f)
    out = Path("/tmp/layout_passes") / p.stem
    t = time.time()
    try:
        c = generate_builtin(p, None, out / "model_new.py")
    except Exception as e:
        print(p.stem, "FAILED", type(e).__name__, str(e)[:100])
        continue
    plan = c.plan
    convs, swap_in, back, trans, kept = counts(plan, plan.graph)
    print(json.dumps({"problem": p.stem, "cl_convs": convs, "input_copies": swap_in, "copies_back": back,
                      "transposing_elementwise": trans, "kept_nhwc_steps": kept}), flush=True)
