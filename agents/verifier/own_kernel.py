"""Does a candidate file bring any GPU code of its own? (pure `ast`, nothing runs)

Evidence, any of: a call into a kernel builder (`load_inline`, `cpp_extension.load`, Triton,
CuPy, Numba, NVRTC, `ctypes.CDLL`, `torch.ops.load_library`, the jiterator), CUDA/PTX source in a
string (`__global__`, `.entry`), or an import of a module that is neither the standard library
nor a package known to hold no kernels (a prebuilt extension, a kernel library).  A file with
none of these can only run PyTorch's kernels, whatever its forward spells.
"""

from __future__ import annotations

import ast
import re
import sys

from kernelstitch.agents.verifier.name_resolution import Resolver

# Packages whose import brings no kernel of the candidate's own.
NO_KERNEL_PACKAGES = frozenset({"torch", "numpy", "einops", "typing_extensions", "kernelstitch"})
# Qualified-name prefixes of kernel builders and native-code loaders.
KERNEL_BUILDERS = ("torch.utils.cpp_extension", "torch.cuda.jiterator", "torch.ops.load_library",
                   "ctypes.CDLL", "ctypes.cdll", "ctypes.PyDLL")
# Builders named without an import in test and example candidates.
BARE_BUILDERS = frozenset({"load_inline"})
# CUDA, PTX or C++ extension source in a string literal.
NATIVE_SOURCE = re.compile(r"__global__|\.visible\s+\.entry|\bextern\s+\"C\"|PYBIND11_MODULE|"
                           r"TORCH_LIBRARY|\b(?:at|torch)::Tensor\b|#\s*include\s*[<\"]")


def own_kernel_evidence(tree: ast.Module, resolver: Resolver) -> str | None:
    """Why the file may run GPU code of its own (for a note), or None when nothing does."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for module in _imported_modules(node):
                root = module.split(".")[0]
                if module.startswith(KERNEL_BUILDERS) or not root or (
                        root not in sys.stdlib_module_names and root not in NO_KERNEL_PACKAGES):
                    return f"imports {module or 'a relative module'}"
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in BARE_BUILDERS:
                return f"calls {node.func.id}"
            for name in resolver.denote(node.func, resolver.module_scope):
                if name.startswith(KERNEL_BUILDERS):
                    return f"calls {name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                NATIVE_SOURCE.search(node.value)):
            return f"holds native source (line {node.lineno})"
    return None


def _imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        return [""]  # relative: the candidate's own package
    return [f"{node.module}.{alias.name}" if node.module == "torch.utils" else node.module or ""
            for alias in node.names]
