"""Coders: Plan + Graph -> Candidate (a standalone ModelNew file).  `builtin` emits kernels
through agents/coder/codegen and wraps them (wrapper.py)."""
