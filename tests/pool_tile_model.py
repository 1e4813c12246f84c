"""A numpy model of cuda/pool/kernel.cu's tile kernel (contiguous input, overlapping windows),
index for index: a block's TOH x TOW output tile, its input rows staged as IR x IC values (load
i -> row i / IC, column i % IC, neutral outside the input, the prologue once per value), outputs
q -> (q / TOW, q % TOW) reading their taps from the tile, torch's divisor as ks_pool_finish, and
every output written exactly once over the plane's tiles.  `check` compares it with torch's
max_pool / avg_pool (1-D and 2-D) on random geometries (tests/test_pool.py;
`python tests/pool_tile_model.py N` for more)."""
from __future__ import annotations

import random
import sys

import numpy as np
import torch
import torch.nn.functional as F
from kernelstitch.agents.coder.codegen.pool import _plane_window, _tile_window
from kernelstitch.agents.plan.kernel_spec import PoolSpec, TensorArg
from pool_row_model import out_size

THREADS = 256


def windows(kind, nd, k, s, p, d):
    """(plane window, tile) as the emitter chooses them, or None where no tile kernel is built."""
    spec = PoolSpec("m", kind, (TensorArg("x", "float32"),), nd, "float32", kernel=k, stride=s, padding=p,
                    dilation=d if kind == "max" else (1,) * nd)
    plane = _plane_window(spec, 1)
    tile = _tile_window(spec, plane)
    return (plane, tile) if tile else None


def run_tile(x, pro, kind, plane, tile, cip, div, OH, OW):
    """x: one [IH, IW] plane; the tile kernel's output [OH, OW]."""
    KH, KW, SH, SW, PH, PW, DH, DW = plane
    TOH, TOW = tile
    IH, IW = x.shape
    IR, IC = (TOH - 1) * SH + (KH - 1) * DH + 1, (TOW - 1) * SW + (KW - 1) * DW + 1
    loads, outs = -(-IR * IC // THREADS), TOH * TOW // THREADS
    assert TOW % 32 == 0 and TOH * TOW % THREADS == 0
    neutral = np.float32(-np.inf if kind == "max" else 0.0)
    tiles_w = -(-OW // TOW)
    out = np.full((OH, OW), 12345.0, np.float32)
    written = np.zeros((OH, OW), int)
    for t in range(-(-OH // TOH) * tiles_w):
        th = t // tiles_w
        oh0, ow0 = th * TOH, (t - th * tiles_w) * TOW
        ih0, iw0 = oh0 * SH - PH, ow0 * SW - PW
        i = np.arange(loads * THREADS)
        i = i[i < IR * IC]
        row = i // IC
        ih, iw = ih0 + row, iw0 + (i - row * IC)
        inside = (ih >= 0) & (ih < IH) & (iw >= 0) & (iw < IW)
        raw = np.where(inside, x[np.clip(ih, 0, IH - 1), np.clip(iw, 0, IW - 1)], np.float32(0))
        smem = np.where(inside, pro(raw), neutral).astype(np.float32)
        q = np.arange(outs * THREADS)
        tr, tc = q // TOW, q % TOW
        oh, ow = oh0 + tr, ow0 + tc
        keep = (oh < OH) & (ow < OW)
        tr, tc, oh, ow = tr[keep], tc[keep], oh[keep], ow[keep]
        acc = np.full(tr.shape, neutral, np.float32)
        for kh in range(KH):
            for kw in range(KW):
                idx = (tr * SH + kh * DH) * IC + tc * SW + kw * DW
                assert idx.size == 0 or idx.max() < IR * IC
                v = smem[idx]
                if kind == "max":
                    acc = np.where(np.isnan(acc) | np.isnan(v), np.float32(np.nan), np.maximum(acc, v))
                else:
                    acc = acc + v
        if kind == "avg":  # ks_pool_finish
            hs, ws = oh * SH - PH, ow * SW - PW
            hend, wend = np.minimum(hs + KH, IH + PH), np.minimum(ws + KW, IW + PW)
            taps = (np.minimum(hend, IH) - np.maximum(hs, 0)) * (np.minimum(wend, IW) - np.maximum(ws, 0))
            divide = np.full(taps.shape, div) if div else ((hend - hs) * (wend - ws) if cip else taps)
            acc = np.where(taps > 0, acc / np.maximum(divide, 1).astype(np.float32), np.float32(0))
        out[oh, ow] = acc
        np.add.at(written, (oh, ow), 1)
    assert (written == 1).all()
    return out


def _prologue(v):
    return np.tanh(v * np.float32(1.5)).astype(np.float32)


def _case(rng):
    """A random pooling geometry: (kind, nd, k, s, p, d, ceil, cip, div, IH, IW)."""
    kind, nd = rng.choice(["max", "avg"]), rng.choice([1, 2])
    k = tuple(rng.randint(1, 8 if nd == 1 else 4) for _ in range(nd))
    s = tuple(rng.randint(1, 2) for _ in range(nd))
    p = tuple(rng.randint(0, kk // 2) for kk in k)
    d = tuple(rng.randint(1, 3) for _ in range(nd)) if kind == "max" else (1,) * nd
    ceil, cip = rng.random() < 0.5, rng.random() < 0.5
    div = rng.choice([0, 0, 0, 3]) if kind == "avg" else 0
    IH, IW = (1, rng.randint(1, 2500)) if nd == 1 else (rng.randint(1, 40), rng.randint(1, 150))
    return kind, nd, k, s, p, d, ceil, cip, div, IH, IW


def check(n_cases=200, seed=0):
    """The model against torch on n_cases random geometries with a tile kernel; the mismatches."""
    rng = random.Random(seed)
    fails = checked = 0
    while checked < n_cases:
        kind, nd, k, s, p, d, ceil, cip, div, IH, IW = _case(rng)
        k2, s2, p2, d2 = ((1,) * (2 - nd) + k, (1,) * (2 - nd) + s, (0,) * (2 - nd) + p, (1,) * (2 - nd) + d)
        OH, OW = (out_size(n, k2[i], s2[i], p2[i], d2[i], ceil) for i, n in enumerate((IH, IW)))
        chosen = windows(kind, nd, k, s, p, d)
        if OH < 1 or OW < 1 or chosen is None:
            continue
        xt = torch.randn(IH, IW, generator=torch.Generator().manual_seed(rng.randint(0, 2**31)))
        if kind == "max" and rng.random() < 0.3:
            xt.view(-1)[::7] = float("nan")
        x = xt.numpy()
        ref_in = torch.from_numpy(_prologue(x))[None, None]
        if kind == "max":
            want = F.max_pool2d(ref_in, k2, s2, p2, d2, ceil_mode=ceil)[0, 0]
        else:
            want = F.avg_pool2d(ref_in, k2, s2, p2, ceil_mode=ceil, count_include_pad=cip,
                                divisor_override=div or None)[0, 0]
        assert tuple(want.shape) == (OH, OW), (kind, nd, k2, s2, p2, d2, ceil, IH, IW, want.shape, OH, OW)
        got = torch.from_numpy(run_tile(x, _prologue, kind, *chosen, cip, div, OH, OW))
        try:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        except AssertionError as e:
            fails += 1
            print("FAIL", kind, nd, k, s, p, d, ceil, cip, div, IH, IW, str(e)[:200])
        checked += 1
    print(f"checked {checked} geometries, {fails} failures")
    return fails


if __name__ == "__main__":
    sys.exit(1 if check(int(sys.argv[1]) if len(sys.argv) > 1 else 200) else 0)
