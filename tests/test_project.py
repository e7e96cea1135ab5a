"""The README's test command is the one CI runs; the CLI works."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_cmd = [b for b in blocks if "pytest" in b and "pip install" in b]
    assert len(test_cmd) == 1
    ci_lines = [ln for ln in (REPO / ".ci/run").read_text().splitlines() if ln and not ln.startswith("#")]
    assert test_cmd[0].strip() in ci_lines


def test_cli_check_accepts_and_rejects(tmp_path, capsys) -> None:
    from constrained.cli import main

    tok = REPO.parent / "shared/data/tokenizers/llama3"
    if not tok.exists():
        import pytest
        pytest.skip("shared tokenizers not available")
    assert main(["check", str(REPO / "grammars/json.lark"), "--tokenizer", str(tok), "--text", '{"a": [1]}']) == 0
    assert "accepted" in capsys.readouterr().out
    assert main(["check", "--regex", "[0-9]+", "--tokenizer", str(tok), "--text", "12x"]) == 1
    assert main(["check", str(tmp_path / "missing.lark"), "--tokenizer", str(tok), "--text", "x"]) == 2
