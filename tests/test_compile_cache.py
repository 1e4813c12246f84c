"""The generated candidate's compile cache (CPU only, load_inline / load faked): the cache folder,
the stamp fast path, the cross-process build lock, the header options, the CUDA source split into
units compiled at once, and the bench's ninja split."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.coder.builtin import write_candidate
from kernelstitch.agents.inprocess import generate_builtin

from kernelstitch.bench.tasks import ninja_steps

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "elementwise_chain.py"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")


@pytest.fixture(scope="module")
def candidate_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cache_candidate")
    candidate = generate_builtin(EXAMPLE, None, folder / "model_new.py")
    return write_candidate(candidate, folder)


def _import(path: Path, tag: str):
    spec = importlib.util.spec_from_file_location(f"ks_cache_test_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeBuild:
    """Stands in for load_inline: records its arguments and leaves a .so in the build folder."""

    def __init__(self):
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        Path(kwargs["build_directory"], kwargs["name"] + ".so").write_bytes(b"")
        return "built"


@pytest.fixture
def module(candidate_path, tmp_path, monkeypatch):
    monkeypatch.setenv("KS_EXTENSIONS_DIR", str(tmp_path / "ext"))
    mod = _import(candidate_path, tmp_path.name)
    monkeypatch.setattr(mod, "_gencode", lambda: "-gencode=arch=compute_90a,code=sm_90a")
    monkeypatch.setattr(mod, "load_inline", FakeBuild())
    monkeypatch.setattr(mod, "load", FakeBuild())
    monkeypatch.setattr(mod, "_import_built", lambda name, directory: ("imported", name))
    return mod


def test_cache_folder_is_ours_and_per_torch_build(module, tmp_path, monkeypatch):
    folder = Path(module._extensions_dir())
    assert folder.parent == tmp_path / "ext"
    assert torch.__version__.replace("+", "_") in folder.name
    assert folder.name.startswith(f"py{sys.version_info[0]}{sys.version_info[1]}_")
    monkeypatch.delenv("KS_EXTENSIONS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Path(module._extensions_dir()).parent == tmp_path / "xdg" / "kernelstitch" / "extensions"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert Path(module._extensions_dir()).parent == (
        Path.home() / ".cache" / "kernelstitch" / "extensions")


def test_first_build_compiles_into_the_cache_then_imports_the_stamped_library(module):
    assert module._build_extension() == "built"
    (call,) = module.load_inline.calls
    folder = Path(call["build_directory"])
    assert folder.parent == Path(module._extensions_dir()) and folder.name == call["name"]
    assert (folder / "ks_built").read_text().strip() == call["name"]
    # the kernels need no torch headers; the binding includes its own (no <torch/extension.h>)
    assert call["no_implicit_headers"] is True
    assert call["cpp_sources"] == [module._CPP_SOURCE]
    assert "#include <torch/extension.h>" not in module._CPP_SOURCE
    assert call["cuda_sources"] == [module._CUDA_SOURCE]
    # a later process: the stamped library is imported without ninja
    assert module._build_extension() == ("imported", call["name"])
    assert len(module.load_inline.calls) == 1
    # a killed build (no stamp) and torch's stale lock file: built again, lock cleared
    (folder / "ks_built").unlink()
    (folder / "lock").write_text("")
    assert module._build_extension() == "built"
    assert not (folder / "lock").exists() and len(module.load_inline.calls) == 2


def test_torch_api_in_the_cuda_source_keeps_the_implicit_headers(module, monkeypatch):
    assert module._header_options() == (module._CPP_SOURCE, {"no_implicit_headers": True})
    monkeypatch.setattr(module, "_CUDA_SOURCE", module._CUDA_SOURCE + "\ntorch::Tensor f();\n")
    assert module._header_options() == (module._CPP_SOURCE, {})
    monkeypatch.setattr(module, "_CUDA_SOURCE", "#include <ATen/ATen.h>\n")
    assert module._header_options()[1] == {}
    monkeypatch.setattr(module, "_CUDA_SOURCE", "__global__ void k() {}\n")
    monkeypatch.setattr(module, "_CPP_SOURCE", "void f();\n")  # not the built-in binding prelude
    cpp, options = module._header_options()
    assert cpp.startswith("#include <torch/extension.h>\n") and options == {"no_implicit_headers": True}


_RACER = textwrap.dedent("""
    import importlib.util, json, sys, time
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("ks_racer", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod._gencode = lambda: "-gencode=arch=compute_90a,code=sm_90a"
    def fake_load_inline(**kwargs):
        start = time.time()
        time.sleep(1.0)
        Path(kwargs["build_directory"], kwargs["name"] + ".so").write_bytes(b"")
        return ["built", start, time.time()]
    mod.load_inline = fake_load_inline
    mod._import_built = lambda name, directory: ["imported", time.time(), time.time()]
    print(json.dumps(mod._build_extension()))
""")


def test_concurrent_builds_of_one_name_build_once(candidate_path, tmp_path):
    """Two processes build the same candidate at once: one compiles, the other waits on the
    folder's flock and then imports the stamped library."""
    env = {**os.environ, "KS_EXTENSIONS_DIR": str(tmp_path / "ext")}
    racers = [subprocess.Popen([sys.executable, "-c", _RACER, str(candidate_path)], env=env,
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in racers]
    assert sorted(r[0] for r in results) == ["built", "imported"]
    built = next(r for r in results if r[0] == "built")
    imported = next(r for r in results if r[0] == "imported")
    assert imported[1] >= built[2]  # it waited for the build to finish


def test_build_lock_is_exclusive_across_processes(module, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    probe = ("import fcntl, sys\nf = open(sys.argv[1], 'a')\n"
             "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n"
             "    sys.exit(3)\n")
    lock = str(folder / "ks_build.lock")
    with module._build_lock(str(folder)):
        assert subprocess.run([sys.executable, "-c", probe, lock], timeout=60).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe, lock], timeout=60).returncode == 0


def test_ninja_steps_reads_the_last_build_of_each_target(tmp_path):
    (tmp_path / ".ninja_log").write_text(
        "# ninja log v5\n0\t9000\t1\tmain.o\tabc\n0\t3500\t1\tcuda.cuda.o\tdef\n"
        "9000\t9400\t1\tks_x.so\t123\n10\t7010\t2\tmain.o\tabd\n")
    assert ninja_steps(tmp_path) == {"main.o": 7.0, "cuda.cuda.o": 3.5, "ks_x.so": 0.4}
    assert ninja_steps(tmp_path / "missing") == {}


def _kernel_texts(module, sizes: list[int]) -> str:
    """A CUDA source of kernels as the built-in coder assembles it: each text opens with the
    guarded prelude; `sizes` pads each to about that many characters."""
    opening = module._CUDA_SOURCE[:module._CUDA_SOURCE.index("#define KS_CUDA_PRELUDE_H")]
    assert opening.strip() == "#ifndef KS_CUDA_PRELUDE_H"
    return "".join(f"#ifndef KS_CUDA_PRELUDE_H\n// kernel {k}\n" + "x" * n + "\n#endif\n"
                   for k, n in enumerate(sizes))


def test_cuda_source_splits_into_balanced_self_contained_units(module):
    big = 70_000  # above the unit floor: each kernel is worth its own nvcc process
    source = _kernel_texts(module, [big, big // 2, big // 2, big, big // 4, big // 4])
    units = module._cuda_units(source, 3)
    assert len(units) == 3
    assert all(u.startswith("#ifndef KS_CUDA_PRELUDE_H\n") for u in units)
    # every kernel text in exactly one unit, none cut
    pieces = sorted(p.rstrip("\n") for u in units for p in module._KERNEL_START.split(u) if p)
    assert pieces == sorted(p.rstrip("\n") for p in module._KERNEL_START.split(source) if p)
    assert max(map(len, units)) <= 1.2 * len(source) / 3  # longest first, to the lightest unit
    # as the coder joins the texts: the last one ends without a newline, and wherever it lands in
    # a unit the next text's prelude guard must still open a line
    joined = "\n".join(t.rstrip("\n") for t in module._KERNEL_START.split(source) if t)
    for unit in module._cuda_units(joined, 3):
        assert unit.count("#ifndef KS_CUDA_PRELUDE_H") == len(module._KERNEL_START.split(unit)) - 1
    # many jobs: as many units as the source is worth (about the floor each), at most one a kernel
    assert len(module._cuda_units(source, 64)) == -(-len(source) // module._UNIT_MIN_CHARS) == 4
    assert len(module._cuda_units(_kernel_texts(module, [200_000] * 3), 64)) == 3


def test_cuda_source_stays_one_unit_when_small_single_job_or_not_self_contained(module):
    source = _kernel_texts(module, [70_000] * 4)
    assert module._cuda_units(source, 1) == [source]
    assert module._cuda_units(_kernel_texts(module, [1000] * 8), 8) == [_kernel_texts(module, [1000] * 8)]
    # code before the first kernel (an edited candidate's helper) may be used by any of them
    edited = "__device__ float helper(float x) { return x; }\n" + source
    assert module._cuda_units(edited, 4) == [edited]
    # the example's own source: one small program, one unit
    assert module._cuda_units(module._CUDA_SOURCE, 16) == [module._CUDA_SOURCE]


def test_split_build_writes_main_cpp_and_units_for_one_load(module, monkeypatch):
    source = _kernel_texts(module, [70_000] * 3)
    monkeypatch.setattr(module, "_CUDA_SOURCE", source)
    monkeypatch.setenv("MAX_JOBS", "2")
    assert module._build_extension() == "built"
    assert module.load_inline.calls == []
    (call,) = module.load.calls
    folder = Path(call["build_directory"])
    names = [Path(p).name for p in call["sources"]]
    assert names == ["main.cpp", "cuda_0.cu", "cuda_1.cu"]
    main = (folder / "main.cpp").read_text()
    assert main.startswith(module._CPP_SOURCE)  # no implicit <torch/extension.h>: the prelude's own
    for function in module._FUNCTIONS:
        assert f'm.def("{function}", torch::wrap_pybind_function({function}), "{function}");' in main
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {" in main
    units = [(folder / n).read_text() for n in names[1:]]
    assert sorted(units) == sorted(module._cuda_units(source, 2))
    assert (folder / "ks_built").read_text().strip() == call["name"]


def _marked_bindings(count: int) -> tuple[str, list[str]]:
    """A cpp source as build_extension_sources assembles it for `count` bindings: the prelude,
    the prototypes, then each binding after its mark."""
    from kernelstitch.agents.coder.codegen.common import BINDING_MARK

    names = [f"ks_s{k}_op" for k in range(count)]
    protos = [f"at::Tensor {n}(at::Tensor in_0);" for n in names]
    bodies = [f"{BINDING_MARK}{n}\nat::Tensor {n}(at::Tensor in_0) {{ return in_0; }}" for n in names]
    return "\n".join(["", "// prelude", *protos, *bodies]), names


def test_many_bindings_compile_as_several_units_registered_by_main(module, monkeypatch):
    """Past 64 bindings the build compiles them in up to MAX_JOBS / 4 units (at most 4, each at
    least 32 bindings), each with the prelude and every prototype, registering its own functions;
    main.cpp registers the units.  Fewer bindings: main.cpp holds them all, as before."""
    cpp, names = _marked_bindings(100)
    source = _kernel_texts(module, [70_000] * 3)
    monkeypatch.setattr(module, "_CUDA_SOURCE", source)
    monkeypatch.setattr(module, "_CPP_SOURCE", cpp)
    monkeypatch.setattr(module, "_FUNCTIONS", names)
    monkeypatch.setattr(module, "_header_options", lambda: (cpp, {"no_implicit_headers": True}))
    monkeypatch.setenv("MAX_JOBS", "16")
    assert module._build_extension() == "built"
    (call,) = module.load.calls
    folder = Path(call["build_directory"])
    files = [Path(p).name for p in call["sources"]]
    assert files == ["main.cpp", "bind_0.cpp", "bind_1.cpp", "bind_2.cpp", "cuda_0.cu", "cuda_1.cu", "cuda_2.cu"]
    main = (folder / "main.cpp").read_text()
    header = cpp[:cpp.index("// ks-binding: ")]
    assert main.startswith(header) and "ks_s0_op(at::Tensor in_0) {" not in main
    assert all(f"ks_register_{k}(m);" in main for k in range(3))
    registered = []
    for k in range(3):
        unit = (folder / f"bind_{k}.cpp").read_text()
        assert unit.startswith(header) and f"void ks_register_{k}(pybind11::module_& m) {{" in unit
        defined = [n for n in names if f"at::Tensor {n}(at::Tensor in_0) {{" in unit]
        assert 32 <= len(defined) and all(f'm.def("{n}", torch::wrap_pybind_function({n}), "{n}");' in unit
                                          for n in defined)
        registered += defined
    assert sorted(registered) == sorted(names)  # each binding in exactly one unit
    few, few_names = _marked_bindings(40)
    assert module._binding_units(few, 4) == (few, [])
    assert module._binding_units(cpp.replace("// ks-binding: ", "// "), 4)[1] == []


def test_split_build_that_fails_is_built_again_as_one_unit(module, monkeypatch):
    source = _kernel_texts(module, [70_000] * 3)
    monkeypatch.setattr(module, "_CUDA_SOURCE", source)
    monkeypatch.setenv("MAX_JOBS", "4")

    def failing(**kwargs):
        raise RuntimeError("Error building extension")

    monkeypatch.setattr(module, "load", failing)
    assert module._build_extension() == "built"
    (call,) = module.load_inline.calls
    assert call["cuda_sources"] == [source]


def test_build_jobs_follow_max_jobs_else_the_cpus_up_to_eight(module, monkeypatch):
    monkeypatch.setenv("MAX_JOBS", "3")
    assert module._build_jobs() == 3
    monkeypatch.setenv("MAX_JOBS", "32")  # asked for: taken
    assert module._build_jobs() == 32
    monkeypatch.delenv("MAX_JOBS")
    monkeypatch.setattr(module.os, "cpu_count", lambda: 64)
    assert module._build_jobs() == 8
    monkeypatch.setattr(module.os, "cpu_count", lambda: 2)
    assert module._build_jobs() == 2
    monkeypatch.setenv("MAX_JOBS", "many")
    assert module._build_jobs() == 2


def test_each_unit_compiles_with_its_share_of_the_jobs_outside_the_digest(module, tmp_path, monkeypatch):
    """nvcc's --split-compile gets the build's jobs shared among the units compiled at once (one
    unit: all of them; as many units as jobs: no flag), and the extension's name stays the same:
    the flag changes compile time, not the code."""
    monkeypatch.setattr(module, "_nvcc_splits", lambda: True)
    monkeypatch.setenv("MAX_JOBS", "8")
    assert module._build_extension() == "built"  # the example: one unit, load_inline
    (whole,) = module.load_inline.calls
    assert whole["extra_cuda_cflags"][-1] == "--split-compile=8"
    assert [f for f in whole["extra_cuda_cflags"] if "split" not in f] == \
        list(module._EXTRA_CUDA_CFLAGS) + ["-gencode=arch=compute_90a,code=sm_90a"]
    source = _kernel_texts(module, [70_000] * 3)
    monkeypatch.setattr(module, "_CUDA_SOURCE", source)
    monkeypatch.setenv("MAX_JOBS", "6")
    assert module._build_extension() == "built"
    (units,) = module.load.calls
    assert units["extra_cuda_cflags"][-1] == "--split-compile=2"  # 3 units of 6 jobs
    monkeypatch.setenv("MAX_JOBS", "3")
    assert module._split_flags(3) == []
    monkeypatch.setattr(module, "_nvcc_splits", lambda: False)  # an nvcc without the option
    assert module._split_flags(1) == []
    # the same extension name without the option: a cached build serves either
    monkeypatch.setenv("KS_EXTENSIONS_DIR", str(tmp_path / "plain"))
    assert module._build_extension() == "built"
    assert module.load.calls[-1]["name"] == units["name"]
    assert all("split" not in f for f in module.load.calls[-1]["extra_cuda_cflags"])


def test_a_failed_split_build_retries_as_one_unit_without_the_option(module, monkeypatch):
    """A failed several-unit build (the option itself among its possible causes) builds again as
    one unit with the plain flags."""
    monkeypatch.setattr(module, "_nvcc_splits", lambda: True)
    monkeypatch.setattr(module, "_CUDA_SOURCE", _kernel_texts(module, [70_000] * 3))
    monkeypatch.setenv("MAX_JOBS", "6")

    def failing(**kwargs):
        assert kwargs["extra_cuda_cflags"][-1] == "--split-compile=2"
        raise RuntimeError("Error building extension")

    monkeypatch.setattr(module, "load", failing)
    assert module._build_extension() == "built"
    (call,) = module.load_inline.calls
    assert all("split" not in f for f in call["extra_cuda_cflags"])


def _fake_nvcc(path: Path, help_text: str) -> Path:
    path.write_text(f"#!/bin/sh\necho '{help_text}'\n")
    path.chmod(0o755)
    return path


def test_the_split_option_is_probed_from_the_nvcc_torch_would_run(module, tmp_path, monkeypatch):
    fake = _fake_nvcc(tmp_path / "nvcc", "--split-compile <number>   Perform compiler optimizations in parallel.")
    monkeypatch.setenv("PYTORCH_NVCC", str(fake))
    assert module._nvcc_splits() is True
    # PYTORCH_NVCC may be a command line (a compiler cache in front of nvcc)
    wrapper = _fake_nvcc(tmp_path / "cache", "--split-compile <number>")
    monkeypatch.setenv("PYTORCH_NVCC", f"{wrapper} nvcc")
    assert module._nvcc_splits() is True
    _fake_nvcc(fake, "--threads <number>")
    monkeypatch.setenv("PYTORCH_NVCC", str(fake))
    assert module._nvcc_splits() is False
    monkeypatch.setenv("PYTORCH_NVCC", str(tmp_path / "missing-nvcc"))
    assert module._nvcc_splits() is False
    monkeypatch.delenv("PYTORCH_NVCC")  # no CUDA toolkit at all: no probe of a relative path
    import torch.utils.cpp_extension as cpp_extension
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    assert module._nvcc_splits() is False
