"""The generated candidate's compile cache (CPU only, load_inline faked): the cache folder, the
stamp fast path, the cross-process build lock, the header options, and the bench's ninja split."""

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
