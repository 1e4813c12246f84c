"""Versioned prompt templates: prompts/<version>/<name>.md, filled with `string.Template`.

A version is frozen once released: changing what the model is told means a new folder (v2/), so
every stored exchange names the version and the sha256 of the templates it used, and an old run
can be read against the exact text that produced it.  `rules.md` (the anti-reward-hacking rules)
is available to every template as `$rules`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).resolve().parent
TEMPLATE_NAMES = ("rules", "planner_system", "planner_task", "planner_retry", "coder_system",
                  "coder_task", "coder_step", "coder_feedback")


def available_versions() -> list[str]:
    return sorted((p.name for p in PROMPTS_DIR.iterdir()
                   if p.is_dir() and re.fullmatch(r"v\d+", p.name)),
                  key=lambda v: int(v[1:]))


@dataclass(frozen=True)
class PromptSet:
    version: str
    templates: dict[str, str]

    def render(self, name: str, **values: object) -> str:
        """The template with every $placeholder filled (a missing value raises KeyError)."""
        mapping = {k: str(v) for k, v in values.items()}
        mapping.setdefault("rules", self.templates["rules"].strip())
        return Template(self.templates[name]).substitute(mapping).strip() + "\n"

    def digest(self, name: str) -> str:
        return hashlib.sha256(self.templates[name].encode("utf-8")).hexdigest()[:16]

    def manifest(self) -> dict[str, str]:
        """Template name -> sha256 prefix: stored with every exchange."""
        return {name: self.digest(name) for name in sorted(self.templates)}


def load_prompts(version: str = "v2") -> PromptSet:
    folder = PROMPTS_DIR / version
    if not re.fullmatch(r"v\d+", version) or not folder.is_dir():
        raise ValueError(f"no prompt version {version!r} (have {available_versions()})")
    templates = {}
    for name in TEMPLATE_NAMES:
        path = folder / f"{name}.md"
        if not path.is_file():
            raise ValueError(f"prompt version {version} lacks {path.name}")
        templates[name] = path.read_text(encoding="utf-8")
    return PromptSet(version, templates)
