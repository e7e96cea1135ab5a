"""The docs point at things that exist: relative links resolve to files, dotted
``constrained.*`` / ``samplers.*`` names in docs/ import, and file paths quoted in
docs/ and ARCHITECTURE.md are in the repository."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("*.md"))
LINKED = [*DOCS, REPO / "ARCHITECTURE.md", REPO / "README.md", REPO / "benchmarks" / "RESULTS.md"]

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_DOTTED = re.compile(r"(?<![\w./-])((?:constrained|samplers)(?:\.[A-Za-z_]\w*)+)")
_FILE_SUFFIXES = frozenset({"md", "py", "json", "png", "lark", "gbnf", "toml"})
_QUOTED_PATH = re.compile(r"`((?:constrained|samplers|tests|benchmarks|grammars|examples|docs)/[^`\s]*)`")


def _prose(path: Path) -> str:
    """The file's text without fenced code blocks."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("doc", LINKED, ids=_name)
def test_relative_links_point_to_files(doc: Path) -> None:
    broken = []
    for target in _LINK.findall(_prose(doc)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue                                   # a URL or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            broken.append(target)
    assert not broken, f"{_name(doc)} links to missing files: {broken}"


def _resolve(dotted: str) -> None:
    """Import the longest module prefix of ``dotted`` and read the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_dotted_names_in_docs_import(doc: Path) -> None:
    names = sorted({n for n in _DOTTED.findall(doc.read_text(encoding="utf-8"))
                    if n.rpartition(".")[2] not in _FILE_SUFFIXES})         # samplers.md is a page
    missing = []
    for dotted in names:
        try:
            _resolve(dotted)
        except (ImportError, AttributeError) as e:
            missing.append(f"{dotted} ({type(e).__name__}: {e})")
    assert not missing, f"{_name(doc)} names what does not import: {missing}"


@pytest.mark.parametrize("doc", [*DOCS, REPO / "ARCHITECTURE.md"], ids=_name)
def test_quoted_paths_exist(doc: Path) -> None:
    missing = [p for p in sorted(set(_QUOTED_PATH.findall(_prose(doc))))
               if not (REPO / p.split(":", 1)[0].rstrip("/")).exists()]
    assert not missing, f"{_name(doc)} names files that are not in the repository: {missing}"
