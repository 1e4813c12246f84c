"""Maps the repository's top-level folders into the single import package `kernelstitch`.

The design card keeps server/, agents/ and profiler/ at the top of the repository; they are
installed as `kernelstitch.server`, `kernelstitch.agents` and `kernelstitch.profiler`, so no
generic top-level name ever lands in site-packages.  Metadata lives in pyproject.toml.
"""

from setuptools import find_packages, setup

PACKAGE_ROOTS = {
    "kernelstitch": "kernelstitch",
    "kernelstitch.server": "server",
    "kernelstitch.agents": "agents",
    "kernelstitch.profiler": "profiler",
}

packages: list[str] = []
for name, folder in PACKAGE_ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=PACKAGE_ROOTS)
