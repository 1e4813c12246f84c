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


def poison_allocator(nbytes_list: list[int], device: torch.device,
                     blocks_per_size: int = BLOCKS_PER_SIZE) -> None:
    """`blocks_per_size` comes from the memory plan: fewer beside multi-GB outputs."""
    sizes = sorted({max(int(n), 1) for n in nbytes_list}, reverse=True)
    blocks = []
    for size in sizes:
        for _ in range(blocks_per_size):
            try:
                block = torch.empty(size, dtype=torch.uint8, device=device)
            except torch.OutOfMemoryError:
                break
            block.fill_(POISON_BYTE)
            blocks.append(block)
    torch.cuda.synchronize(device)
    del blocks  # back to the cache, still holding 0xFF


def unwritten_count(tensor: torch.Tensor) -> int:
    """Elements of a (CPU) tensor whose bytes are all 0xFF: never written by the candidate."""
    if tensor.numel() == 0 or tensor.dtype == torch.bool:
        return 0
    raw = tensor.contiguous().view(torch.uint8).reshape(tensor.numel(), tensor.element_size())
    return int((raw == POISON_BYTE).all(dim=1).sum())
