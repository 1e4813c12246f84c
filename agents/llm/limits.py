"""Size limits of the LLM path (documented in README.md, "Size limits").

A model can answer anything: one reply must not flood the next prompt, the report or the run
store.  Every cut says so in the text itself (`clip`), so neither the model nor a reader takes a
shortened text for the whole.  Torch- and openai-free.
"""

from __future__ import annotations

MAX_REPLY_CHARS = 100_000  # one reply's text; a longer reply is a failed reply (not used)
# The HTTP body read from the endpoint: room for the chat-completions JSON of a MAX_REPLY_CHARS
# reply (an escape such as \uXXXX takes 6 bytes a char).  Beyond it reading stops.
MAX_REPLY_BYTES = 700_000
MAX_NOTE_CHARS = 2_000  # one plan note / step description / host reason in the Coder's prompt
MAX_PLAN_CHARS = 20_000  # the whole plan text in the Coder's prompt
MAX_FEEDBACK_CHARS = 20_000  # one feedback message (rejection reasons, timings) to the model
MAX_ERROR_CHARS = 2_000  # one error (an invalid plan, an unusable reply) in prompts and reports
MAX_PROMPT_CHARS = 400_000  # all messages of one request
_MIN_KEEP = 1_000  # bound_messages never cuts a message shorter than this


def clip(text: str, limit: int) -> str:
    """`text`, or its first `limit` chars and a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [truncated: {len(text):,} chars, kept the first {limit:,}]"


def bound_messages(messages: list[dict[str, str]],
                   limit: int = MAX_PROMPT_CHARS) -> list[dict[str, str]]:
    """The messages with at most `limit` chars of content in all: the longest ones are cut
    first (each keeps its start and says it was cut)."""
    sizes = [len(m["content"]) for m in messages]
    excess = sum(sizes) - limit
    if excess <= 0:
        return messages
    out = [dict(m) for m in messages]
    for k in sorted(range(len(out)), key=lambda i: -sizes[i]):
        keep = max(_MIN_KEEP, sizes[k] - excess - 100)  # 100: room for the marker
        if excess <= 0 or keep >= sizes[k]:
            break
        out[k]["content"] = clip(out[k]["content"], keep)
        excess -= sizes[k] - len(out[k]["content"])
    return out
