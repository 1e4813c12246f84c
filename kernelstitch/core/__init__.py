"""Bottom layer shared by every other part: problem format, worker processes, run store.

Imports nothing from kernelstitch.agents, .profiler or .server.
"""
