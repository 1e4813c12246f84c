"""A numpy model of cuda/pool/kernel.cu's contiguous-input plane kernel, line for line: thread q
of a plane -> (strip of PR output rows, group of V columns), the strip's input rows (row_at /
holds / used: each loaded and prologued once for every output row whose window holds it), the
warp-voted inside form (whole warps of windows inside the input: no masks, a constant divisor)
and the masked form (rows and positions outside the input take no part; torch's window bounds
and divisor through ks_pool_window / ks_pool_finish), every output written exactly once.
`check` compares it with torch's max_pool2d / avg_pool2d on random 2-D geometries and strip
heights (tests/test_pool.py; `python tests/pool_plane_model.py N` for more)."""
from __future__ import annotations

import random
import sys

import numpy as np
import torch
import torch.nn.functional as F
from kernelstitch.agents.coder.codegen.pool import PLANE_OUTPUTS, _plane_fields, _plane_window
from kernelstitch.agents.plan.kernel_spec import PoolSpec, TensorArg
from pool_row_model import out_size, random_window

V = PLANE_OUTPUTS
WARP = 32


def plane_fields(kind, k, s, p, d, rows):
    """The kernel's template fields for this window and asked strip height, or None where the
    plane kernel does not take the window."""
    spec = PoolSpec("m", kind, (TensorArg("x", "float32"),), 2, "float32", kernel=k, stride=s, padding=p,
                    dilation=d if kind == "max" else (1, 1))
    window = _plane_window(spec, 1)
    return None if window is None else _plane_fields(window, rows)


def _max(a, b):
    """ks_max: NaN-propagating."""
    return np.float32(np.nan) if np.isnan(a) or np.isnan(b) else np.float32(max(a, b))


def pool_window(kind, o, size, k, s, p, dil):
    """ks_pool_window: (lo, hi, step, padded) of output o along one dim."""
    if kind == "avg":
        start = o * s - p
        end = min(start + k, size + p)
        return max(start, 0), min(end, size), 1, end - start
    start = o * s - p
    end = start + (k - 1) * dil + 1
    while start < 0:
        start += dil
    return start, min(end, size), dil, 0


def pool_finish(kind, acc, wh, ww, cip, div):
    """ks_pool_finish with the plane kernel's wd = {0, 1, 1, 1}."""
    if kind == "max":
        return acc
    taps = (wh[1] - wh[0]) * (ww[1] - ww[0])
    divide = div if div else (wh[3] * ww[3] if cip else taps)
    return np.float32(acc / np.float32(divide)) if taps > 0 else np.float32(0.0)


def run_plane(x, pro, kind, f, cip, div, OH, OW):
    """One plane x [IH, IW] through the kernel with template fields f: the [OH, OW] output and
    the number of warps that took the inside form."""
    KH, KW, SH, SW = f["plane_kh"], f["plane_kw"], f["plane_sh"], f["plane_sw"]
    PH, PW, DH, DW, PR = f["plane_ph"], f["plane_pw"], f["plane_dh"], f["plane_dw"], f["plane_rows"]
    IH, IW = x.shape
    SPAN = (V - 1) * SW + (KW - 1) * DW + 1
    NR = KH if PR == 1 else (PR - 1) * SH + (KH - 1) * DH + 1
    groups = (OW + V - 1) // V
    per_plane = (OH + PR - 1) // PR * groups

    def row_at(i):
        return i * DH if PR == 1 else i

    def holds(i, rr):
        return PR == 1 or any(i == rr * SH + kh * DH for kh in range(KH))

    def used(i):
        return any(holds(i, rr) for rr in range(PR))

    def thread(q):
        strip = 0 if OH == 1 else q // groups
        ow0 = (q - strip * groups) * V
        oh = strip * PR
        return oh, ow0, oh * SH - PH, ow0 * SW - PW

    def inside(q):
        oh, ow0, ih0, iw0 = thread(q)
        return (ih0 >= 0 and ih0 + row_at(NR - 1) < IH and iw0 >= 0 and iw0 + SPAN - 1 < IW
                and ow0 + V <= OW and (PR == 1 or oh + PR <= OH))

    fill = -np.inf if kind == "max" else 0.0
    out = np.full((OH, OW), 12345.0, np.float32)
    written = np.zeros((OH, OW), int)
    whole_warps = 0
    for w0 in range(0, per_plane, WARP):  # a warp: the active threads of 32 consecutive q
        active = range(w0, min(w0 + WARP, per_plane))
        whole = all(inside(q) for q in active)  # __all_sync over __activemask()
        whole_warps += whole
        for q in active:
            oh, ow0, ih0, iw0 = thread(q)
            accs = np.full((PR, V), fill, np.float32)
            for i in range(NR):
                ih = ih0 + row_at(i)
                if not used(i) or (not whole and not 0 <= ih < IH):
                    continue
                xs = []
                for j in range(SPAN):
                    iw = iw0 + j
                    xs.append(pro(np.float32(x[ih, iw])) if whole or 0 <= iw < IW else np.float32(fill))
                for rr in range(PR):
                    if not holds(i, rr):
                        continue
                    for o in range(V):
                        for kw in range(KW):
                            v = xs[o * SW + kw * DW]
                            accs[rr, o] = _max(accs[rr, o], v) if kind == "max" else np.float32(accs[rr, o] + v)
            if whole:  # the inside form: every window whole, a constant divisor
                for rr in range(PR):
                    for j in range(V):
                        acc = accs[rr, j]
                        if kind == "avg":
                            acc = np.float32(acc / np.float32(div if div else KH * KW))
                        out[oh + rr, ow0 + j] = acc
                        written[oh + rr, ow0 + j] += 1
                continue
            for rr in range(PR):
                if PR > 1 and oh + rr >= OH:
                    break
                wh = pool_window(kind, oh + rr, IH, KH, SH, PH, DH)
                for j in range(V):
                    ow = ow0 + j
                    if ow >= OW:
                        break
                    ww = pool_window(kind, ow, IW, KW, SW, PW, DW)
                    out[oh + rr, ow] = pool_finish(kind, accs[rr, j], wh, ww, cip, div)
                    written[oh + rr, ow] += 1
    assert (written == 1).all()
    return out, whole_warps


def _prologue(v):
    return np.float32(np.tanh(v * np.float32(1.5)))


def check(n_cases=200, seed=0):
    """The model against torch on n_cases random geometries; the number of mismatches."""
    rng = random.Random(seed)
    fails = checked = strips = strip_warps_inside = 0
    while checked < n_cases:
        kind, k, s, p, d, ceil, cip, div = random_window(rng, max_stride=3)
        # widths up to 300: rows of 32+ column groups put whole warps inside the input
        IH, IW = rng.randint(1, 30), rng.choice([rng.randint(1, 40), rng.randint(100, 300)])
        OH = out_size(IH, k[0], s[0], p[0], d[0], ceil)
        OW = out_size(IW, k[1], s[1], p[1], d[1], ceil)
        f = plane_fields(kind, k, s, p, d, rng.choice([1, 2, 3, 4]))
        if OH < 1 or OW < 1 or f is None:
            continue
        xt = torch.randn(IH, IW, generator=torch.Generator().manual_seed(rng.randint(0, 2**31)))
        if kind == "max" and rng.random() < 0.3:
            xt.view(-1)[::7] = float("nan")
        x = xt.numpy()
        ref_in = torch.from_numpy(np.tanh(x * np.float32(1.5)).astype(np.float32))[None, None]
        if kind == "max":
            want = F.max_pool2d(ref_in, k, s, p, d, ceil_mode=ceil)[0, 0]
        else:
            want = F.avg_pool2d(ref_in, k, s, p, ceil_mode=ceil, count_include_pad=cip, divisor_override=div or None)[0, 0]
        assert tuple(want.shape) == (OH, OW)
        out, whole_warps = run_plane(x, _prologue, kind, f, cip, div, OH, OW)
        got = torch.from_numpy(out)
        strips += f["plane_rows"] > 1
        strip_warps_inside += whole_warps if f["plane_rows"] > 1 else 0
        try:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        except AssertionError as e:
            fails += 1
            print("FAIL", kind, k, s, p, d, ceil, cip, div, IH, IW, f["plane_rows"], str(e)[:200])
        checked += 1
    print(f"checked {checked} geometries ({strips} with strips of 2-4 rows, {strip_warps_inside} of their "
          f"warps in the inside form), {fails} failures")
    assert strips and strip_warps_inside, "the strips and their inside form went unchecked"
    return fails


if __name__ == "__main__":
    sys.exit(1 if check(int(sys.argv[1]) if len(sys.argv) > 1 else 200) else 0)
