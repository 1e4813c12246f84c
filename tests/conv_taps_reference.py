"""What the conv tap-means kernel computes (kernelstitch.conv_tap_means), derived from PyTorch's
own convolution with one-hot kernels, so it shares nothing with the kernel's index ranges."""

from __future__ import annotations

import torch

F = torch.nn.functional


def tap_means_reference(x: torch.Tensor, kernel, stride, padding, dilation, output_padding,
                        transposed: bool) -> torch.Tensor:
    """[C, N, kh * kw]: tap t = (i, j)'s input averaged over the conv's output positions, i.e.
    the spatial mean of the conv of each channel alone with the one-hot kernel of tap t."""
    n, c = x.shape[:2]
    kh, kw = kernel
    taps = kh * kw
    eye = torch.eye(taps, dtype=x.dtype, device=x.device).view(taps, kh, kw)
    if transposed:  # weight [C_in, C_out / groups, kh, kw]: channel g's outputs g * taps + t
        w = eye.unsqueeze(0).expand(c, taps, kh, kw).contiguous()
        y = F.conv_transpose2d(x, w, None, tuple(stride), tuple(padding), tuple(output_padding), c,
                               tuple(dilation))
    else:  # weight [C_out, C_in / groups, kh, kw]
        w = eye.unsqueeze(1).repeat(c, 1, 1, 1)
        y = F.conv2d(x, w, None, tuple(stride), tuple(padding), tuple(dilation), c)
    return y.mean((2, 3)).view(n, c, taps).permute(1, 0, 2).contiguous()
