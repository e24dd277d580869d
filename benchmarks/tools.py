"""What the benchmarks share: timing a command in a fresh process, the peers' runs, and how a tool is installed.

Peers are timed as their users install them: each in a venv of its own (`python -m venv V && V/bin/pip install
onnxsim onnxruntime`), never beside eqsat's dependencies, where a peer may find and import packages its own
users do not have (onnxsim imports sympy when it is present: ~0.3 s at start-up). eqsat is timed from a
non-editable install (`pip install .`), whose modules are byte-compiled as users get them.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Sequence

#: Each peer's library call, as a script taking the input and output paths; it prints its seconds.
PEER_SCRIPTS = {
    "onnxsim": (
        "import sys, time, onnx, onnxsim; m = onnx.load(sys.argv[1]); t = time.perf_counter(); "
        "out, ok = onnxsim.simplify(m); print(time.perf_counter() - t); onnx.save(out, sys.argv[2])"
    ),
    "onnxslim": (
        "import sys, time, onnxslim; t = time.perf_counter(); onnxslim.slim(sys.argv[1], sys.argv[2]); "
        "print(time.perf_counter() - t)"
    ),
    "onnxscript": (
        "import sys, time, onnx, onnxscript.optimizer; m = onnx.load(sys.argv[1]); t = time.perf_counter(); "
        "out = onnxscript.optimizer.optimize(m); print(time.perf_counter() - t); onnx.save(out, sys.argv[2])"
    ),
    "ort-basic": (
        "import sys, time, onnxruntime as ort; o = ort.SessionOptions(); "
        "o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC; "
        "o.optimized_model_filepath = sys.argv[2]; "
        "t = time.perf_counter(); ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider']); "
        "print(time.perf_counter() - t)"
    ),
}

_INSTALL_SCRIPT = """
import json, sys
from importlib import metadata
try:
    dist = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print(json.dumps(None)); raise SystemExit
url = dist.read_text("direct_url.json")
editable = bool(url and json.loads(url).get("dir_info", {}).get("editable"))
names = sorted(d.metadata["Name"].lower() for d in metadata.distributions())
print(json.dumps({"version": dist.version, "editable": editable, "packages": len(names),
                  "sympy": "sympy" in names}))
"""


def timed(command: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and the child's peak RSS in MB (GNU time's %M); RuntimeError with its stderr if it fails."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} failed: {done.stderr.strip()[-500:]}")
    return wall, int(done.stderr.strip().splitlines()[-1]) / 1024


def installation(python: str, package: str) -> str:
    """How `package` is installed for `python`: version, editable or not, and how many packages share its
    environment (a line for a benchmark's header)."""
    done = subprocess.run([python, "-c", _INSTALL_SCRIPT, package], capture_output=True, text=True, cwd="/")
    found = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else None
    if not found:
        return f"{package}: not installed for {python}"
    kind = "EDITABLE install (figures not to quote)" if found["editable"] else "non-editable install"
    sympy = ", sympy present" if found["sympy"] else ""
    return f"{package} {found['version']}: {kind}, {python}, {found['packages']} packages in its environment{sympy}"
