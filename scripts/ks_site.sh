#!/usr/bin/env bash
# ks_site DIR ROOT: a sitecustomize.py in DIR that imports `kernelstitch` from the source tree ROOT
# (as the editable install maps it: kernelstitch/, agents/, profiler/, server/), ahead of any
# installed copy.  With PYTHONPATH=DIR every process of a run, the bench's workers included
# (`python -m kernelstitch.core.worker` keeps PYTHONPATH), runs ROOT's code: two commits side by
# side on one machine, for an A/B on the same GPUs.
ks_site() {
  mkdir -p "$1"
  cat >"$1/sitecustomize.py" <<PY
import importlib.util
import sys

_ROOT = "$2"
_MAP = {"kernelstitch": _ROOT + "/kernelstitch", "kernelstitch.agents": _ROOT + "/agents",
        "kernelstitch.profiler": _ROOT + "/profiler", "kernelstitch.server": _ROOT + "/server"}


class _KsSourceFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        root = _MAP.get(name)
        if root is None:
            return None
        return importlib.util.spec_from_file_location(name, root + "/__init__.py",
                                                      submodule_search_locations=[root])


sys.meta_path.insert(0, _KsSourceFinder)
PY
}
