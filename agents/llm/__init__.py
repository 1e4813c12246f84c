"""The LLM Planner and Coder, through any OpenAI-compatible chat-completions endpoint.

    config = LlmConfig.from_settings(llm={...}, budget={...})   # config.py
    client = LlmClient(config, cancel=..., deadline=..., recorder=...)   # client.py
    plan = plan_with_llm(client, ...)                              # planner_agent.py
    result = CoderAgent(client, ...).run()                          # coder_agent.py
    outcome = run_llm_path(...)                                     # run.py (used by the pipeline)

The built-in candidate is both the starting point and the fallback: an LLM candidate replaces it
only when the Verifier accepted it and it is faster (see run.py).  Importing this package does
not import `openai` (the language server imports the configuration).  See README.md.
"""

from kernelstitch.agents.llm.config import LlmConfig
from kernelstitch.agents.llm.errors import (
    LlmBudgetExceeded,
    LlmCancelled,
    LlmConfigError,
    LlmError,
    LlmReplyError,
    LlmUnavailable,
)

__all__ = [
    "LlmBudgetExceeded", "LlmCancelled", "LlmConfig", "LlmConfigError", "LlmError",
    "LlmReplyError", "LlmUnavailable",
]
