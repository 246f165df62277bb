"""The module the fuzzer's processes name in ``KEEL_WORKFLOW_MODULES``: it imports the
generated workflow module at ``$KEEL_FUZZ_FLOW`` (a file outside the repository, written
by ``render``) under its own name, so it registers its workflows exactly as a module of
an author's package would. Without the variable it imports nothing.

The harness forks keel's processes with a ``sys.path`` fixed when the fork server
started, so a generated file can't be found by a path of its own: this loader is the
one module of ours between ``KEEL_WORKFLOW_MODULES`` and the generated text.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path


def load(path: str) -> None:
    name = Path(path).stem
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


if os.environ.get("KEEL_FUZZ_FLOW"):
    load(os.environ["KEEL_FUZZ_FLOW"])
