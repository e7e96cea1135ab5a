"""Static checks of the packages: the import layering, ruff and mypy (configured in
pyproject.toml, ``[tool.ruff]`` and ``[tool.mypy]``).

The linters run as subprocesses on ``constrained`` and ``samplers``; a finding fails
the test with the tool's own report.  They are part of the ``test`` extra, so CI's
one test command runs them.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("constrained", "samplers")

# The front doors: modules that put decoders and samplers together (they may import
# `samplers`; nothing `samplers` imports may be among them).
FRONT_DOORS = ("constrained.app", "constrained.cli", "constrained.tools", "constrained.speculative",
               "constrained.bench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    """Every module ``path`` imports, at module level or inside functions (absolute names)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)    # `from pkg import module`
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    return {name: {m for m in _imports(path, name) if m in modules} for name, path in modules.items()}


def test_constrained_core_never_imports_samplers():
    """No cycle between the packages: the `constrained` modules that `samplers` reaches
    (transitively, lazy imports included) never import `samplers`, and none of them is
    a front door.  The shared types live in `constrained.constraint`."""
    graph = _graph()
    reached: set[str] = set()
    todo = [m for m in graph if m.split(".")[0] == "samplers"]
    while todo:
        m = todo.pop()
        for dep in graph[m]:
            if dep.startswith("constrained") and dep not in reached:
                reached.add(dep)
                todo.append(dep)
    back = sorted(f"{m} -> {d}" for m in reached for d in graph[m] if d.split(".")[0] == "samplers")
    assert not back, "constrained modules that samplers uses import samplers:\n" + "\n".join(back)
    doors = sorted(m for m in reached if m.startswith(FRONT_DOORS))
    assert not doors, f"samplers reaches the front doors {doors}"
    assert not {d for d in graph["constrained.constraint"]}, "constrained.constraint must stay a leaf"


def _run(tool: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    if shutil.which(tool) is None:
        try:
            __import__(tool)
        except ImportError:
            pytest.fail(f"{tool} is not installed (it is in the `test` extra: pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_ruff():
    out = _run("ruff", "check", "--no-fix", *PACKAGES, "tests/test_lint.py", timeout=120)
    assert out.returncode == 0, f"ruff check {' '.join(PACKAGES)}:\n{out.stdout}{out.stderr}"


def test_mypy():
    out = _run("mypy", *PACKAGES, timeout=300)
    assert out.returncode == 0, f"mypy {' '.join(PACKAGES)}:\n{out.stdout}{out.stderr}"
