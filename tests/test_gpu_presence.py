"""core/gpu_presence.py: "certainly no CUDA GPU" only where the operating system shows no way to
one; every other machine is asked through a worker as before."""

from __future__ import annotations

from kernelstitch.core.gpu_presence import cuda_may_be_present


def test_no_device_node_and_no_driver_on_linux_means_no_gpu(tmp_path):
    assert not cuda_may_be_present(tmp_path, "linux", driver_library=False)
    (tmp_path / "null").touch()
    assert not cuda_may_be_present(tmp_path, "linux", driver_library=False)
    # the driver's library without a device node (a container that hides them): maybe
    assert cuda_may_be_present(tmp_path, "linux", driver_library=True)


def test_any_nvidia_or_wsl_node_means_maybe(tmp_path):
    for name in ("nvidiactl", "nvidia0", "nvidia-uvm", "dxg"):
        dev = tmp_path / name.replace("-", "_")
        dev.mkdir()
        (dev / name).touch()
        assert cuda_may_be_present(dev, "linux", driver_library=False), name


def test_other_systems():
    assert not cuda_may_be_present(platform="darwin")  # no CUDA on macOS
    assert cuda_may_be_present(platform="win32")  # unknown: the worker finds out
