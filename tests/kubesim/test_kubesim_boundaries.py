"""kubesim stands alone: no module imports the Django project or the engine, each opens with a docstring."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kubesim"


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_kubesim_imports_neither_opsconsole_nor_reconcilers_nor_django():
    offenders = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("opsconsole", "reconcilers",
                                                                                      "django", "celery")]
    assert offenders == []
    assert len(_modules()) > 20


def test_every_module_opens_with_a_docstring():
    missing = [str(p.relative_to(PACKAGE)) for p in _modules() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert missing == []
