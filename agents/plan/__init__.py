"""The Planner -> Coder contract, torch-free: the Plan (`model.py`), the typed graph its node
names refer to (`graph.py`), the kernel specs its steps carry (`kernel_spec.py`) and the ATen ops
that run on the host (`host_ops.py`).

The planner writes these and the coder reads them; neither imports the other.  The language
server renders plans from here in hovers, so nothing in this package imports torch.
"""

from kernelstitch.agents.plan.model import (
    KERNEL_TECHNIQUES,
    SCHEMA_VERSION,
    TECHNIQUES,
    HostSettings,
    Plan,
    PlanError,
    PlanStep,
    Technique,
    human_bytes,
    human_flops,
    render_plan_markdown,
    render_step_markdown,
)

__all__ = [
    "KERNEL_TECHNIQUES", "SCHEMA_VERSION", "TECHNIQUES", "HostSettings", "Plan", "PlanError",
    "PlanStep", "Technique", "human_bytes", "human_flops", "render_plan_markdown",
    "render_step_markdown",
]
