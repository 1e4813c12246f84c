"""Measures a module on the GPU and ties what it finds to source lines.

Entry points: `profile.profile_module(path, module, backends)` -> `findings.ProfileReport`,
`cli.profile_command(target, ...)`, and the worker tasks in `tasks`.  `findings` is torch-free.
"""
