"""Poisoned allocator state: fresh outputs land in memory whose every byte is 0xFF.

0xFF...FF is a NaN for every float width (fp16, bf16, fp32, fp64) and a payload no arithmetic
produces (CUDA's canonical NaN is 0x7FFF...), so an output element that still holds the all-ones
pattern after forward was never written.  Poisoning allocates blocks of the sizes the outputs
(and temporaries) will need, fills them and frees them: PyTorch's caching allocator keeps the
freed blocks and hands them to the next allocations of those sizes on this stream.
"""

from __future__ import annotations

import torch

POISON_BYTE = 0xFF
BLOCKS_PER_SIZE = 4


def poison_allocator(output_sizes: list[int], other_sizes: list[int], device: torch.device,
                     blocks_per_size: int = BLOCKS_PER_SIZE,
                     budget_bytes: int | None = None) -> None:
    """Blocks of the outputs' sizes first (a fresh output must land in poison), then of the
    other sizes (inputs-sized temporaries), `blocks_per_size` each, within `budget_bytes`
    (the memory plan's: beside multi-GB inputs, four blocks of each would not fit)."""
    outputs = sorted({max(int(n), 1) for n in output_sizes}, reverse=True)
    others = sorted({max(int(n), 1) for n in other_sizes} - set(outputs), reverse=True)
    left = budget_bytes if budget_bytes is not None else float("inf")
    blocks = []
    for size in outputs + others:
        for _ in range(blocks_per_size):
            if size > left:
                break
            try:
                block = torch.empty(size, dtype=torch.uint8, device=device)
            except torch.OutOfMemoryError:
                break
            block.fill_(POISON_BYTE)
            blocks.append(block)
            left -= size
    torch.cuda.synchronize(device)
    del blocks  # back to the cache, still holding 0xFF


def unwritten_count(tensor: torch.Tensor) -> int:
    """Elements of a (CPU) tensor whose bytes are all 0xFF: never written by the candidate."""
    if tensor.numel() == 0 or tensor.dtype == torch.bool:
        return 0
    raw = tensor.contiguous().view(torch.uint8).reshape(tensor.numel(), tensor.element_size())
    return int((raw == POISON_BYTE).all(dim=1).sum())
