"""GPU tasks that poison or exhaust CUDA on purpose (run only by tests/test_worker_gpu.py)."""

from __future__ import annotations

import ctypes
import os

import torch

# A kernel that stores through the pointer it is given.  Plain PTX loaded through the driver
# API: no compiler, ninja or torch headers needed, the driver JIT-compiles it for the GPU.
_WRITE_THROUGH_PTX = b"""
.version 7.0
.target sm_75
.address_size 64

.visible .entry write_through(
    .param .u64 target
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;

    ld.param.u64 %rd1, [target];
    mov.u32 %r1, 42;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
_UNMAPPED_ADDRESS = 0x10


def cuda_sum(n: int) -> dict:
    value = torch.ones(n, device="cuda").sum().item()
    torch.cuda.synchronize()
    return {"sum": value, "pid": os.getpid(), "device": torch.cuda.get_device_name(0)}


def _driver_call(cuda: ctypes.CDLL, name: str, *args) -> None:
    status = getattr(cuda, name)(*args)
    if status != 0:
        raise RuntimeError(f"test setup: {name} returned CUresult {status}")


def _launch_bad_write_through_driver() -> None:
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    cuda.cuModuleGetFunction.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    cuda.cuLaunchKernel.argtypes = [
        ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    torch.zeros(1, device="cuda")  # torch makes its primary context current on this thread
    context = ctypes.c_void_p()
    _driver_call(cuda, "cuCtxGetCurrent", ctypes.byref(context))
    if not context.value:
        raise RuntimeError("test setup: no current CUDA context after torch initialised CUDA")
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    _driver_call(cuda, "cuModuleLoadData", ctypes.byref(module), _WRITE_THROUGH_PTX)
    _driver_call(cuda, "cuModuleGetFunction", ctypes.byref(function), module, b"write_through")
    target = ctypes.c_uint64(_UNMAPPED_ADDRESS)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(target), ctypes.c_void_p))
    _driver_call(cuda, "cuLaunchKernel", function, 1, 1, 1, 1, 1, 1, 0, None, params, None)


def illegal_memory_access() -> str:
    """A kernel writes to an unmapped address; torch reports it at the next synchronisation."""
    try:
        _launch_bad_write_through_driver()
    except (OSError, AttributeError, RuntimeError) as exc:
        if "CUresult 700" not in str(exc):  # 700: the launch itself already saw the fault
            _bad_read_with_jiterator()
    torch.cuda.synchronize()
    return "the fault went unnoticed"


def _bad_read_with_jiterator() -> None:
    """Fallback without a usable driver API: an NVRTC-compiled kernel reads a bad address."""
    bad_read = torch.cuda.jiterator._create_jit_fn(
        "template <typename T> T bad_read(T x) { return x + *reinterpret_cast<T*>(16); }"
    )
    bad_read(torch.ones(1, device="cuda"))


def device_side_assert() -> str:
    values = torch.zeros(4, device="cuda")
    index = torch.tensor([10], device="cuda")  # out of range: the index kernel asserts
    values[index]
    torch.cuda.synchronize()
    return "the assert went unnoticed"


def cuda_oom() -> str:
    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # 1 PiB
    return "allocated a petabyte"


def allocated_bytes() -> int:
    return torch.cuda.memory_allocated()
