"""A numpy model of cuda/pool/kernel.cu's row form (cl4r / cl4rt), line for line: thread ->
(c0, ow-group, oh), one load per distinct column of a window row (clamped and masked outside the
input), the prologue once per loaded value, per-column accumulation into the V windows that hold
it, torch's divisor in the kernel's 32-bit form, and the NCHW tile's groups / P0..P1 runs (every
output written exactly once); and cl4r's strip form (R output rows a thread: each input row of
the strip loaded once, reduced into every output row whose window holds it, rows past the output
not stored).  `check` compares it with torch's max_pool2d / avg_pool2d on random
geometries (tests/test_pool.py; `python tests/pool_row_model.py N` for more)."""
from __future__ import annotations

import random
import sys

import numpy as np
import torch
import torch.nn.functional as F
from kernelstitch.agents.coder.codegen.pool import _row_window
from kernelstitch.agents.plan.kernel_spec import PoolSpec, TensorArg

TP, TG = 32, 32  # KS_POOL_TP, KS_POOL_TG
TILE = TP * (4 * TG + 4)  # KS_POOL_TILE


def row_window(kind, k, s, p, d):
    spec = PoolSpec("m", kind, (TensorArg("x", "float32"),), 2, "float32", kernel=k, stride=s, padding=p,
                    dilation=d if kind == "max" else (1, 1))
    return _row_window(spec, 1)


def out_size(i, k, s, p, d, ceil):
    span = i + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
    o = (span // s if span >= 0 else -((-span + s - 1) // s)) + 1
    if ceil and (o - 1) * s >= i + p:
        o -= 1
    return o


def random_window(rng, max_stride=4):
    """A random 2-D pooling window: (kind, kernel, stride, padding, dilation, ceil_mode,
    count_include_pad, divisor_override) with kernels 1-5, strides 1-max_stride, padding up to
    half the kernel, dilation 1-2 (max), divisor 3 a quarter of the averages."""
    kind = rng.choice(["max", "avg"])
    k = (rng.randint(1, 5), rng.randint(1, 5))
    s = (rng.randint(1, max_stride), rng.randint(1, max_stride))
    p = (rng.randint(0, k[0] // 2), rng.randint(0, k[1] // 2))
    d = (rng.randint(1, 2), rng.randint(1, 2)) if kind == "max" else (1, 1)
    ceil = rng.random() < 0.5
    cip = rng.random() < 0.5
    div = rng.choice([0, 0, 0, 3]) if kind == "avg" else 0
    return kind, k, s, p, d, ceil, cip, div


def cl4_row(x, pro, kind, win, cip, div, c0, oh, ow0, OW, R=1):
    """x: [H, W, C] one sample NHWC; returns res[R][V][4] (output rows oh .. oh + R - 1; the
    prologue `pro` on each loaded value) and the number of 16-byte loads."""
    V, KH, KW, SH, SW, PH, PW, DH, DW = win
    IH, IW, _ = x.shape
    SPAN = (V - 1) * SW + (KW - 1) * DW + 1
    ih0, iw0 = oh * SH - PH, ow0 * SW - PW
    accs = np.full((R, V, 4), -np.inf if kind == "max" else 0.0, np.float32)
    col = [min(max(iw0 + m, 0), IW - 1) for m in range(SPAN)]
    inside = [0 <= iw0 + m < IW for m in range(SPAN)]
    loads = 0
    # R == 1: the window's rows kh * DH; R > 1: the strip's input rows i, each a tap of the output
    # rows rr with i == rr * SH + kh * DH
    rows_in = [kh * DH for kh in range(KH)] if R == 1 else list(range((R - 1) * SH + (KH - 1) * DH + 1))
    for i in rows_in:
        holders = [0] if R == 1 else [rr for rr in range(R) for kh in range(KH) if i == rr * SH + kh * DH]
        ih = ih0 + i
        if not holders or not 0 <= ih < IH:
            continue
        xs = [x[ih, col[m], c0:c0 + 4] for m in range(SPAN)]
        loads += SPAN
        for m in range(SPAN):
            v = pro(xs[m])
            if not inside[m]:
                v = np.full(4, -np.inf if kind == "max" else 0.0, np.float32)
            for rr in holders:
                acc = accs[rr]
                for u in range(V):
                    for kw in range(KW):
                        if u * SW + kw * DW == m:
                            if kind == "max":
                                nan = np.isnan(acc[u]) | np.isnan(v)
                                acc[u] = np.where(nan, np.nan, np.maximum(acc[u], v))
                            else:
                                acc[u] = acc[u] + v
    res = np.zeros((R, V, 4), np.float32)
    for rr in range(R):
        ihr = ih0 + rr * SH
        hend = min(ihr + KH, IH + PH)
        hpad, htaps = hend - ihr, min(hend, IH) - max(ihr, 0)
        for u in range(V):
            ws = iw0 + u * SW
            wend = min(ws + KW, IW + PW)
            wpad, wtaps = wend - ws, min(wend, IW) - max(ws, 0)
            a = accs[rr, u].copy()
            if kind == "avg":
                taps = htaps * wtaps
                divide = div if div else (hpad * wpad if cip else taps)
                a = a / np.float32(divide) if taps > 0 else np.zeros(4, np.float32)
            res[rr, u] = a
    return res, loads


def run_cl4r(x, pro, kind, win, cip, div, OH, OW, R=1):
    """NHWC out: the cl4r kernel's item loop (q -> c0, gw, strip of R rows from oh) over one sample."""
    IH, IW, C = x.shape
    V = win[0]
    c4, groups, strips = C // 4, (OW + V - 1) // V, (OH + R - 1) // R
    out = np.full((OH, OW, C), 12345.0, np.float32)
    written = np.zeros((OH, OW, C), int)
    for q in range(c4 * groups * strips):
        c0, rest = q % c4 * 4, q // c4
        gw, oh = rest % groups, rest // groups * R
        ow0 = gw * V
        res, _ = cl4_row(x, pro, kind, win, cip, div, c0, oh, ow0, OW, R)
        for rr in range(R):
            if oh + rr >= OH:
                break
            for u in range(V):
                if ow0 + u < OW:
                    out[oh + rr, ow0 + u, c0:c0 + 4] = res[rr, u]
                    written[oh + rr, ow0 + u, c0:c0 + 4] += 1
    assert (written == 1).all()
    return out


def tile_groups(c4, v):
    ng = min(c4, TG)
    return TILE // (v * (4 * ng + 4))


def run_cl4rt(x, pro, kind, win, cip, div, OH, OW):
    """NCHW out: the cl4rt kernel's tiles (groups of rows joined, shared tile, runs per channel)."""
    IH, IW, C = x.shape
    V = win[0]
    c4, S, groups = C // 4, OW * OH, (OW + V - 1) // V
    total = groups * OH
    c_tiles, tg = (c4 + TG - 1) // TG, tile_groups(c4, V)
    rs = 4 * min(c4, TG) + 4
    tiles = (total + tg - 1) // tg * c_tiles
    out = np.full(C * S, 12345.0, np.float32)
    written = np.zeros(C * S, int)
    for t in range(tiles):
        ct, st = t % c_tiles, t // c_tiles
        g0, ng = ct * TG, min(TG, c4 - ct * TG)
        G0, G1 = st * tg, min(st * tg + tg, total)
        P0 = G0 // groups * OW + G0 % groups * V
        P1 = G1 // groups * OW + G1 % groups * V
        tile = np.full(TILE, np.nan, np.float32)
        assert (P1 - P0) * rs <= TILE
        for k in range((G1 - G0) * ng):
            gl, gi = k // ng, k % ng
            G = G0 + gl
            oh, ow0 = G // groups, (G % groups) * V
            res, _ = cl4_row(x, pro, kind, win, cip, div, (g0 + gi) * 4, oh, ow0, OW)
            base = (oh * OW + ow0 - P0) * rs + gi * 4
            for u in range(V):
                if ow0 + u < OW:
                    assert 0 <= oh * OW + ow0 + u - P0 < P1 - P0
                    tile[base + u * rs: base + u * rs + 4] = res[0, u]
        dst = (g0 * 4) * S + P0
        for c in range(4 * ng):
            for p in range(P1 - P0):
                out[dst + c * S + p] = tile[p * rs + c]
                written[dst + c * S + p] += 1
    assert (written == 1).all()
    return out.reshape(C, OH, OW)


def _prologue(v):
    return np.tanh(v * np.float32(1.5)).astype(np.float32)


def check(n_cases=300, seed=0):
    """The model against torch on n_cases random geometries; the number of mismatches."""
    rng = random.Random(seed)
    pro = _prologue
    fails = checked = skipped = 0
    while checked < n_cases:
        kind, k, s, p, d, ceil, cip, div = random_window(rng)
        C = rng.choice([4, 8, 12, 16, 20, 136])
        IH, IW = rng.randint(1, 13), rng.randint(1, 19)
        OH = out_size(IH, k[0], s[0], p[0], d[0], ceil)
        OW = out_size(IW, k[1], s[1], p[1], d[1], ceil)
        if OH < 1 or OW < 1:
            continue
        win = row_window(kind, k, s, p, d)
        if win is None:
            skipped += 1
            continue
        xt = torch.randn(IH, IW, C, generator=torch.Generator().manual_seed(rng.randint(0, 2**31)))
        if kind == "max" and rng.random() < 0.3:
            xt.view(-1)[::7] = float("nan")
        x = xt.numpy()
        ref_in = torch.from_numpy(pro(x)).permute(2, 0, 1)[None]
        if kind == "max":
            want = F.max_pool2d(ref_in, k, s, p, d, ceil_mode=ceil)[0]
        else:
            want = F.avg_pool2d(ref_in, k, s, p, ceil_mode=ceil, count_include_pad=cip, divisor_override=div or None)[0]
        assert tuple(want.shape[1:]) == (OH, OW)
        rows = rng.choice([1, 2, 3, 4])  # cl4r's strip height (emit_pool(row_rows=...))
        got_nhwc = torch.from_numpy(run_cl4r(x, pro, kind, win, cip, div, OH, OW, rows)).permute(2, 0, 1)
        got_nchw = torch.from_numpy(run_cl4rt(x, pro, kind, win, cip, div, OH, OW))
        for label, got in ((f"cl4r R={rows}", got_nhwc), ("cl4rt", got_nchw)):
            try:
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
            except AssertionError as e:
                fails += 1
                print("FAIL", label, kind, k, s, p, d, ceil, cip, div, C, IH, IW, str(e)[:200])
        checked += 1
    print(f"checked {checked} geometries x 2 kernels, {fails} failures, {skipped} skipped (no row window)")
    return fails


if __name__ == "__main__":
    sys.exit(1 if check(int(sys.argv[1]) if len(sys.argv) > 1 else 300) else 0)
