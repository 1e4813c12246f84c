"""The Verifier: is a candidate `ModelNew` correct, honest and really faster?

Torch-free to import (the language server reads verdicts); the checks that run code happen in
worker processes (reference_task.py, candidate_task.py).
"""

from kernelstitch.agents.verifier.api import VerifyOptions, verify
from kernelstitch.agents.verifier.verdict import (
    CheckRecord,
    Reason,
    Stat,
    Timings,
    Verdict,
    render_verdict_markdown,
)

__all__ = [
    "CheckRecord", "Reason", "Stat", "Timings", "Verdict", "VerifyOptions",
    "render_verdict_markdown", "verify",
]
