"""Telling a secret from a name, and keeping secrets out of text (standard library only).

An API key must never be given where its variable's NAME belongs (a setting, a CLI option, a
job request): `key_env_refusal` says when a value is no variable name or looks like a key, and
what placeholder replaces it where settings enter, whatever its length.  `redact` removes
known secrets and key-shaped tokens from any text before it is shown or stored.  The language
server and the LLM agents share these, so both refuse the same values.
"""

from __future__ import annotations

import re
from typing import Any

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Sent when the endpoint needs no key (local vLLM, Ollama, llama.cpp): never a secret.
NO_KEY_PLACEHOLDER = "no-key"
# Prefixes of API keys that are also valid variable names (Stripe-style, Groq, Hugging Face,
# GitHub, Google, Replicate, Fireworks).
_KEY_PREFIXES = ("sk_", "rk_", "pk_", "gsk_", "hf_", "xai_", "ghp_", "gho_", "ghs_", "ghu_",
                 "github_pat_", "AIza", "r8_", "fw_")
# What replaces a refused value (it says why; the value itself is gone).
REFUSED_NOT_A_NAME = "<refused: not a variable name>"
REFUSED_LOOKS_LIKE_KEY = "<refused: looks like an API key>"
REFUSED_LITERAL_KEY = "<refused: keys are never read from settings>"
# Key-shaped tokens in free text (redact): dashed keys (sk-, sk-proj-, sk-ant-, xai-, pplx-)
# cannot be identifiers, so code is never touched; underscore keys are caught by their shape.
_DASHED_KEY = re.compile(r"\b(?:sk|xai|pplx|gsk)-(?=[\w-]*\d)[\w-]{8,}")
_PREFIXED_TOKEN = re.compile(
    r"\b(?:" + "|".join(re.escape(p) for p in _KEY_PREFIXES) + r")\w{20,}")
_BEARER = re.compile(r"\b(Bearer\s+)[\w.~+/=-]{8,}")
REDACTED = "<redacted>"


def key_env_refusal(value: Any) -> str | None:
    """None when `value` may name the key's variable ("" too: no key); else the placeholder
    that replaces it.  Any length: a key pasted here is refused however short it is."""
    if value == "":
        return None
    if value in (REFUSED_NOT_A_NAME, REFUSED_LOOKS_LIKE_KEY):
        return value
    if not isinstance(value, str) or not _ENV_NAME.match(value.strip()):
        return REFUSED_NOT_A_NAME  # sk-..., sk-proj-..., anything with '-', '.', spaces
    return REFUSED_LOOKS_LIKE_KEY if _key_shaped(value.strip()) else None


def is_refused(value: Any) -> bool:
    """True when an api_key_env value is refused (`key_env_refusal`)."""
    return key_env_refusal(value) is not None


looks_like_key = is_refused  # the name callers outside this package use


def safe_api_key_env(value: Any) -> Any:
    """`value`, or its placeholder when refused (None: not given, stays None)."""
    return value if value is None else (key_env_refusal(value) or value)


def _key_shaped(name: str) -> bool:
    """A valid variable name that is probably a key: a key prefix followed by a digit and a
    capital (sk_test_SECRET123), or a long random part (mixed case with digits, or hex)."""
    for prefix in _KEY_PREFIXES:
        rest = name[len(prefix):]
        if name.startswith(prefix) and any(c.isdigit() for c in rest) and any(
                c.isupper() for c in rest):
            return True
    for part in name.split("_"):
        digits = any(c.isdigit() for c in part)
        letters = any(c.isalpha() for c in part)
        mixed = any(c.islower() for c in part) and any(c.isupper() for c in part)
        hex_part = all(c in "0123456789abcdefABCDEF" for c in part)
        if digits and ((len(part) >= 12 and mixed) or (len(part) >= 16 and hex_part and letters)):
            return True
    return False


def redact(text: str, *secrets: str | None) -> str:
    """`text` with each secret (of 4+ characters) and anything key-shaped (sk-..., a Bearer
    token, a long prefixed token such as gsk_..., hf_...) replaced by `<redacted>`."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret != NO_KEY_PLACEHOLDER:
            text = text.replace(secret, REDACTED)
    text = _DASHED_KEY.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return _PREFIXED_TOKEN.sub(
        lambda m: REDACTED if _key_shaped(m.group(0)) else m.group(0), text)
