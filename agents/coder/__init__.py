"""Coders: Plan + Graph -> Candidate (a standalone ModelNew file).  `builtin` emits kernels
through agents/codegen and wraps them (wrapper.py)."""
