"""The one template mechanism of the kernel emitters: CUDA and C++ live in files under `cuda/`
(package data), Python only decides the values that fill them.

    render("reduction/row.cu", name="ks_s1_softmax", params=..., ...)

* Placeholders are `{{name}}` (an identifier, no spaces).  C++ braces never form one, and a
  placeholder inside braces works: `{{{ptrs}}}` is `{` + ptrs + `}`.  Substitution is one pass, so
  a value that happens to contain `{{x}}` is never expanded again.
* `render` raises `TemplateError` on a placeholder without a value and on a value without a
  placeholder, so the files and the Python that fills them cannot drift apart silently.  Values
  are `str` or `int` (a `bool` is refused: C++ wants `true`, not `True`).
* A template's text is its file minus the file's final newline (as Jinja does), so a fragment can
  be spliced into the middle of a line or a block; a fragment that must end with a newline ends
  with an empty line.
* A line `#include "other.cuh"` naming a file of this folder (relative to the including file) is
  replaced by that file's whole text: the preludes are real headers that every kernel inlines, so
  one `load_inline` call gets self-contained translation units.  Headers hold no placeholders.

Per-operand one-liners (parameter and argument lists, one load per operand) are still joined in
Python with f-strings; every block of code is a file here.
"""

from __future__ import annotations

import posixpath
import re
from functools import cache
from importlib import resources
from pathlib import Path

PACKAGE = "kernelstitch.agents.coder.codegen"
FOLDER = "cuda"  # under the package: headers at the top, one folder per emitter
SUFFIXES = (".cuh", ".cu", ".h", ".cpp")  # pyproject.toml's package-data lists the same

PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
_INCLUDE = re.compile(r'^#include "([^"]+)"\n', re.M)


class TemplateError(ValueError):
    """A template and the values given for it disagree, or a file is missing."""


def _root():
    return resources.files(PACKAGE).joinpath(FOLDER)


def _file(name: str):
    node = _root()
    for part in name.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise TemplateError(f"no template {name!r} under {PACKAGE}/{FOLDER}")
    return node


@cache
def source(name: str) -> str:
    """A file's whole text, its local `#include "..."` lines replaced by the included files."""
    text = _file(name).read_text(encoding="utf-8")
    here = posixpath.dirname(name)

    def inline(match: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(here, match.group(1)))
        if target.startswith("../"):
            raise TemplateError(f"{name}: #include {match.group(1)!r} leaves {FOLDER}/")
        return source(target)

    return _INCLUDE.sub(inline, text)


@cache
def template(name: str) -> str:
    """The text `render` fills: `source(name)` less its final newline."""
    text = source(name)
    return text[:-1] if text.endswith("\n") else text


def placeholders(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def substitute(text: str, values: dict[str, str | int], where: str = "template") -> str:
    """Fills `text`'s placeholders; `where` names it in errors."""
    wanted = placeholders(text)
    missing = sorted(wanted - values.keys())
    unused = sorted(values.keys() - wanted)
    if missing or unused:
        raise TemplateError(f"{where}: missing values {missing}, unused values {unused}")
    strings = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TemplateError(f"{where}: value {key!r} is a {type(value).__name__}, not str or int")
        strings[key] = str(value)
    return PLACEHOLDER.sub(lambda m: strings[m.group(1)], text)


_RENDERED: set[str] = set()


def render(name: str, /, **values: str | int) -> str:
    """Template `name` (a path under cuda/, e.g. "reduction/row.cu") with its placeholders filled."""
    text = substitute(template(name), values, name)
    _RENDERED.add(name)
    return text


def render_path(path: str | Path, /, **values: str | int) -> str:
    """The same for a template file outside the package (the microbenchmarks' harness)."""
    text = Path(path).read_text(encoding="utf-8")
    return substitute(text[:-1] if text.endswith("\n") else text, values, str(path))


def define(name: str, macro: str) -> int:
    """The integer value of `#define MACRO N` in header `name` (one source of truth for constants
    that both C++ and the emitters use)."""
    match = re.search(rf"^#define {re.escape(macro)} (\d+)\b", source(name), re.M)
    if match is None:
        raise TemplateError(f"{name} defines no integer {macro}")
    return int(match.group(1))


def names() -> list[str]:
    """Every template and header file of the package, as `render` names them."""
    found = []

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(SUFFIXES):
                found.append(prefix + child.name)

    walk(_root(), "")
    return sorted(found)


def rendered() -> frozenset[str]:
    """Names `render` has filled in this process (the tests check that every file is used)."""
    return frozenset(_RENDERED)
