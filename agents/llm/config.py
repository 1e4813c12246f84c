"""LLM settings: endpoint, model, the NAME of the API-key variable, timeouts and budgets.

The key itself never enters this object (nor the run store, the job request or a log line): it
is read from the environment variable named by `api_key_env` when the client is built
(`resolve_api_key`), and every text the LLM path produces passes through `redact`.

A value given as the variable's name that is no variable name, or that looks like a key (a key
pasted in the wrong place), is replaced by a placeholder where the settings enter
(`sanitize_llm_settings`, `safe_api_key_env`: the CLI, the job request, the editor's settings),
so nothing downstream holds it to echo or store; `validate` then refuses the placeholder with a
message that never repeats the value.

Sources, merged by `LlmConfig.from_settings(llm, budget)`:
* `PipelineConfig.llm`: base_url, model, api_key_env, timeout_s, max_retries, backoff_s,
  max_backoff_s, temperature, max_tokens, planner, planner_attempts, json_mode, prompt_version
* `PipelineConfig.budget`: time_s, iterations, tokens
(the CLI's `--llm-*` options and the editor's `kernelstitch.llm.*` / `kernelstitch.budget.*`
settings fill those two dicts).  Torch- and openai-free.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlparse

from kernelstitch.agents.llm.errors import LlmConfigError

from kernelstitch.core.secrets import (  # noqa: F401 - re-exported for the LLM agents
    _ENV_NAME,
    NO_KEY_PLACEHOLDER,
    REDACTED,
    REFUSED_LITERAL_KEY,
    REFUSED_LOOKS_LIKE_KEY,
    REFUSED_NOT_A_NAME,
    is_refused,
    key_env_refusal,
    looks_like_key,
    redact,
    safe_api_key_env,
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_ITERATIONS = 4  # matches the editor's kernelstitch.budget.iterations default
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal")
_LITERAL_KEY_SETTINGS = ("api_key", "apiKey", "key")
_KEY_ENV_SETTINGS = ("api_key_env", "apiKeyEnv")
_KEY_IN_ENV_SETTING = (
    "llm.api_key_env (--llm-api-key-env, kernelstitch.llm.apiKeyEnv) was refused: {why}. It "
    "must be the NAME of an environment variable (letters, digits, underscores), e.g. "
    "OPENAI_API_KEY, that holds the key; the value given is not repeated here and was not "
    "stored")
_WHY = {REFUSED_NOT_A_NAME: "the value given is not a valid environment-variable name",
        REFUSED_LOOKS_LIKE_KEY: "the value given looks like an API key, not a variable name"}


@dataclass(frozen=True)
class LlmConfig:
    base_url: str = ""  # "" -> OpenAI's API
    model: str = ""
    api_key_env: str = DEFAULT_API_KEY_ENV  # the variable's NAME; "" -> the endpoint needs none
    timeout_s: float = 180.0  # one request
    max_iterations: int = DEFAULT_ITERATIONS  # Coder replies (each is checked, most verified)
    time_budget_s: float = 600.0  # the whole LLM path (planner + coder + verification)
    token_budget: int = 0  # total tokens over all requests; 0: no limit
    max_retries: int = 4  # per request, on 429 / 5xx / timeouts / connection errors
    backoff_s: float = 1.0  # first retry delay (doubles; a Retry-After header wins)
    max_backoff_s: float = 30.0
    temperature: float | None = None  # None: the server's default
    max_tokens: int | None = None  # completion tokens per request; None: the server's default
    planner: bool = True  # False: the LLM Coder implements the built-in plan
    planner_attempts: int = 3  # replies per planning (an invalid plan is retried with its error)
    json_mode: bool = True  # ask for response_format=json_object (dropped if the server refuses)
    prompt_version: str = "v2"  # v2: PyTorch ops allowed from the built-in plan (issue 21)

    def __post_init__(self) -> None:  # built directly too: never hold a refused value
        object.__setattr__(self, "api_key_env", safe_api_key_env(self.api_key_env))

    @property
    def endpoint(self) -> str:
        return (self.base_url or OPENAI_BASE_URL).rstrip("/")

    @property
    def is_openai(self) -> bool:
        return urlparse(self.endpoint).hostname == "api.openai.com"

    @property
    def is_local(self) -> bool:
        return (urlparse(self.endpoint).hostname or "") in _LOCAL_HOSTS

    def describe(self) -> str:
        """One line for reports and logs: never the key, only the variable's name."""
        if is_refused(self.api_key_env):
            key = "API key variable refused"
        else:
            key = f"key from ${self.api_key_env}" if self.api_key_env else "no API key"
        return f"model {self.model!r} at {self.endpoint} ({key})"

    def public(self) -> dict[str, Any]:
        """The settings as stored in the run store (no secret in here by construction)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # ---- building ------------------------------------------------------------------------

    @classmethod
    def from_settings(cls, llm: Mapping[str, Any] | None = None,
                      budget: Mapping[str, Any] | None = None) -> LlmConfig:
        """Merge the pipeline's `llm` and `budget` dicts; raises LlmConfigError naming the
        setting that is wrong.  Unknown keys are ignored; a literal key is refused; a refused
        api_key_env becomes its placeholder (`validate` refuses it)."""
        llm = _settings_dict(sanitize_llm_settings(llm), "llm")
        budget = _settings_dict(budget, "budget")
        for secret in _LITERAL_KEY_SETTINGS:
            if llm.get(secret):
                raise LlmConfigError(
                    f"llm.{secret}: API keys are never read from settings; put the key in an "
                    "environment variable and name it in llm.api_key_env (--llm-api-key-env)")
        d = cls()
        values: dict[str, Any] = {
            "base_url": _text(llm, "base_url", d.base_url).strip(),
            "model": _text(llm, "model", d.model).strip(),
            "api_key_env": _text(llm, "api_key_env", d.api_key_env).strip(),
            "timeout_s": _number(llm, "timeout_s", d.timeout_s, minimum=1.0),
            "max_retries": int(_number(llm, "max_retries", d.max_retries, minimum=0)),
            "backoff_s": _number(llm, "backoff_s", d.backoff_s, minimum=0.0),
            "max_backoff_s": _number(llm, "max_backoff_s", d.max_backoff_s, minimum=0.0),
            "temperature": _optional_number(llm, "temperature"),
            "max_tokens": _optional_int(llm, "max_tokens"),
            "planner": _flag(llm, "planner", d.planner),
            "planner_attempts": int(_number(llm, "planner_attempts", d.planner_attempts,
                                            minimum=1)),
            "json_mode": _flag(llm, "json_mode", d.json_mode),
            "prompt_version": _text(llm, "prompt_version", d.prompt_version),
            "time_budget_s": _number(budget, "time_s", d.time_budget_s, minimum=1.0,
                                     where="budget"),
            "max_iterations": int(_number(budget, "iterations", d.max_iterations, minimum=1,
                                          where="budget")),
            "token_budget": int(_number(budget, "tokens", d.token_budget, minimum=0,
                                        where="budget")),
        }
        return cls(**values)

    def validate(self) -> None:
        """The settings are usable for requests (the key is checked by `resolve_api_key`)."""
        if not self.model:
            raise LlmConfigError(
                "no LLM model configured: pass --llm-model (CLI) or set kernelstitch.llm.model "
                "(editor), e.g. gpt-4.1, or the model name your vLLM/Ollama server serves")
        if self.base_url:
            parsed = urlparse(self.base_url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise LlmConfigError(
                    f"llm.base_url {self.base_url!r} is not an http(s) URL; expected e.g. "
                    "http://localhost:8000/v1 (vLLM) or http://localhost:11434/v1 (Ollama)")
        refused = key_env_refusal(self.api_key_env)
        if refused is not None:
            raise LlmConfigError(_KEY_IN_ENV_SETTING.format(why=_WHY[refused]))
        from kernelstitch.agents.llm.prompts import available_versions

        if self.prompt_version not in available_versions():
            raise LlmConfigError(f"llm.prompt_version {self.prompt_version!r} is not one of "
                                 f"{available_versions()}")


def resolve_api_key(config: LlmConfig, environ: Mapping[str, str] | None = None) -> tuple[
        str, str | None]:
    """(key to send, note for the user or None).  OpenAI's own API needs the variable set; any
    other endpoint may run without a key (a placeholder is sent and a note says so)."""
    environ = os.environ if environ is None else environ
    if not config.api_key_env:
        return NO_KEY_PLACEHOLDER, None
    value = environ.get(config.api_key_env, "").strip()
    if value:
        return value, None
    if config.is_openai:
        raise LlmConfigError(
            f"the environment variable {config.api_key_env} (named by llm.api_key_env) is not "
            f"set: export {config.api_key_env}=... in the environment that starts KernelStitch "
            "(the editor's server, or your shell for the CLI)")
    return NO_KEY_PLACEHOLDER, (
        f"{config.api_key_env} is not set: no API key is sent to {config.endpoint} (fine for "
        "a local server; set the variable if the endpoint needs one)")


def sanitize_llm_settings(llm: Any) -> Any:
    """A copy of the `llm` settings in which a refused api_key_env and any literal key are
    placeholders: applied where settings enter, so no later object holds the value."""
    if not isinstance(llm, Mapping):
        return llm  # from_settings says it is no object (naming only its type)
    clean = dict(llm)
    for name in _KEY_ENV_SETTINGS:
        if name in clean:
            clean[name] = safe_api_key_env(clean[name])
    for name in _LITERAL_KEY_SETTINGS:
        if clean.get(name):
            clean[name] = REFUSED_LITERAL_KEY
    return clean


# ---- lenient readers with precise errors ------------------------------------------------------

def _settings_dict(data: Any, where: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise LlmConfigError(f"the {where} settings must be an object of name: value pairs, got "
                             f"{type(data).__name__}")
    return dict(data)


def _typed(data: Mapping[str, Any], key: str, default: Any, kind: type | tuple[type, ...],
           expected: str, where: str) -> Any:
    """data[key] if it is a `kind` (bool is not a number), `default` when absent or null."""
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise LlmConfigError(f"{where}.{key}: expected {expected}, got {value!r}")
    return value


def _text(data: Mapping[str, Any], key: str, default: str, where: str = "llm") -> str:
    return _typed(data, key, default, str, "a string", where)


def _number(data: Mapping[str, Any], key: str, default: float, *, minimum: float,
            where: str = "llm") -> float:
    value = _typed(data, key, None, (int, float, str), "a number", where)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise LlmConfigError(f"{where}.{key}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise LlmConfigError(f"{where}.{key}: must be a finite number, got {value!r}")
    if number < minimum:
        raise LlmConfigError(f"{where}.{key}: must be at least {minimum:g}, got {value!r}")
    return number


def _optional_number(data: Mapping[str, Any], key: str) -> float | None:
    return None if data.get(key) is None else _number(data, key, 0.0, minimum=0.0)


def _optional_int(data: Mapping[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else int(_number(data, key, 0, minimum=1))


def _flag(data: Mapping[str, Any], key: str, default: bool) -> bool:
    return _typed(data, key, default, bool, "true or false", "llm")
