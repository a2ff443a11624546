"""Building deploy/kustomize's overlays with `kubectl kustomize` (kubectl carries kustomize), for the tests of the
manifests and of the Helm chart, which must run the same pod specs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZE = Path(__file__).resolve().parents[2] / "deploy" / "kustomize"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def build(overlay: str) -> list[dict[str, Any]]:
    """What `kubectl kustomize deploy/kustomize/overlays/<overlay>` builds, as documents."""
    assert Path(KUBECTL).exists(), "kubectl (which carries kustomize) is needed to build deploy/kustomize"
    out = subprocess.run([KUBECTL, "kustomize", str(KUSTOMIZE / "overlays" / overlay)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]
