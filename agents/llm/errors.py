"""Errors of the LLM path.  Every message is meant for the user as is (and never holds a key)."""

from __future__ import annotations


class LlmError(Exception):
    """The LLM path cannot go on; the message says why and what to change."""


class LlmConfigError(LlmError):
    """The LLM settings are incomplete or wrong (no model, bad URL, missing API key)."""


class LlmUnavailable(LlmError):
    """The endpoint could not be used: unreachable, kept failing, refused the request."""


class LlmBudgetExceeded(LlmError):
    """The time or token budget of the LLM path is spent."""


class LlmCancelled(LlmError):
    """The user cancelled while a request was in flight (or between attempts)."""


class LlmReplyError(LlmError):
    """A reply could not be used (malformed JSON, no code block, truncated...)."""
