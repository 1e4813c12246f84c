"""The "kernelstitch" settings section, parsed leniently, and what of it a job receives.

Settings come from `workspace/configuration` (VS Code's settings.json) and can be wrong in any
way a user can type; a bad value falls back to its default instead of failing a request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelstitch.core.precision import PRECISIONS
from kernelstitch.core.secrets import safe_api_key_env

SECTION = "kernelstitch"
PROFILERS = ("torch", "ncu", "nsys")
CODERS = ("builtin", "llm")


@dataclass(frozen=True)
class ServerConfig:
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key_env: str = "OPENAI_API_KEY"  # the NAME of the variable: keys never pass here
    llm_timeout_s: float = 180.0  # one LLM request
    gpu_device: int | None = None  # None: the job's default device
    budget_time_s: float = 600.0
    budget_iterations: int = 4  # as kernelstitch.budget.iterations in vscode-client/package.json
    budget_tokens: int = 0  # LLM tokens per generate job; 0: no limit
    profilers: tuple[str, ...] = ("torch", "ncu")
    watch_on_save: bool = True
    coder: str = "builtin"
    # generate's measured search (agents/search.py): on/off, how many plans in round 1, and
    # the seconds after which no further contender is verified
    search: bool = True
    search_variants: int = 4
    search_time_s: float = 180.0
    precision: str = "fp32"  # kernelstitch.precision (kernelstitch/core/precision.py)

    @classmethod
    def from_settings(cls, settings: Any) -> ServerConfig:
        """Build from the section's JSON; accepts nested ({"llm": {"model": ..}}) or dotted keys."""
        flat = flatten_settings(settings) if isinstance(settings, dict) else {}
        default = cls()
        profilers = flat.get("profilers", default.profilers)
        if isinstance(profilers, (list, tuple)):
            profilers = tuple(p for p in profilers if p in PROFILERS)
        else:
            profilers = default.profilers
        coder = flat.get("coder", default.coder)
        return cls(
            llm_base_url=_as(str, flat.get("llm.baseUrl"), default.llm_base_url),
            llm_model=_as(str, flat.get("llm.model"), default.llm_model),
            # A key pasted as the name: a placeholder from here on (log, job request, messages).
            llm_api_key_env=safe_api_key_env(
                _as(str, flat.get("llm.apiKeyEnv"), default.llm_api_key_env)),
            llm_timeout_s=max(1.0, _as(float, flat.get("llm.timeoutSeconds"),
                                       default.llm_timeout_s)),
            gpu_device=_device(flat.get("gpu.device")),
            budget_time_s=max(1.0, _as(float, flat.get("budget.timeSeconds"),
                                       default.budget_time_s)),
            budget_iterations=max(1, _as(int, flat.get("budget.iterations"),
                                         default.budget_iterations)),
            budget_tokens=max(0, _as(int, flat.get("budget.tokens"), default.budget_tokens)),
            profilers=profilers,
            watch_on_save=_as(bool, flat.get("watch.onSave"), default.watch_on_save),
            coder=coder if coder in CODERS else default.coder,
            search=_as(bool, flat.get("search.enabled"), default.search),
            search_variants=min(16, max(1, _as(int, flat.get("search.variants"),
                                               default.search_variants))),
            search_time_s=max(1.0, _as(float, flat.get("search.timeSeconds"),
                                       default.search_time_s)),
            precision=_precision(flat.get("precision"), default.precision),
        )

    def job_config(self) -> dict[str, Any]:
        """JobRequest.config: keys the pipeline's PipelineConfig understands, plus the rest."""
        config: dict[str, Any] = {
            "coder": self.coder,
            "llm": {
                "base_url": self.llm_base_url,
                "model": self.llm_model,
                "api_key_env": self.llm_api_key_env,
                "timeout_s": self.llm_timeout_s,
            },
            "profilers": list(self.profilers),
            "budget": {"time_s": self.budget_time_s, "iterations": self.budget_iterations,
                       "tokens": self.budget_tokens},
            "search": self.search, "variants": self.search_variants,
            "search_time_s": self.search_time_s, "precision": self.precision,
        }
        if self.gpu_device is not None:
            config["device"] = self.gpu_device
        return config


def _precision(value: Any, default: str) -> str:
    name = _as(str, value, default).strip().lower()
    return name if name in PRECISIONS else default


def _device(value: Any) -> int | None:
    device = _as(int, value, None)
    return device if device is not None and device >= 0 else None


def flatten_settings(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys ({"llm": {"model": m}} -> {"llm.model": m})."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_settings(value, f"{name}."))
        else:
            out[name] = value
    return out


def _as(kind: type, value: Any, default: Any) -> Any:
    """`value` as `kind`, or `default` when it is missing or of the wrong type."""
    if value is None:
        return default
    if kind is bool:
        return value if isinstance(value, bool) else default
    if isinstance(value, bool):  # bool is an int subclass: never accept it for numbers
        return default
    if kind is str:
        return value if isinstance(value, str) else default
    try:
        return kind(value)
    except (TypeError, ValueError):
        return default

