"""Token tables: the fast prefix scan (states reading many bytes) equals the reference scan."""

from __future__ import annotations

import numpy as np
import pytest

import constrained.engine.token_tables as token_tables
from constrained.automata.byte_dfa import compile_regex
from constrained.engine.token_tables import TokenTables

REGEXES = [
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"',
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})){2,9}"',
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r"[ \t\n\r]{1,48}",
    r'"[a-z0-9_]{0,12}"|true|false',
    r"[\s\S]{0,3}x",
]


@pytest.mark.parametrize("regex", REGEXES)
def test_prefix_scan_tables_equal_reference_tables(regex, llama3_vocab, monkeypatch) -> None:
    dfa = compile_regex(regex)
    fast, slow = TokenTables(llama3_vocab, None), TokenTables(llama3_vocab, None)
    for q in range(1, dfa.num_states):
        monkeypatch.setattr(token_tables, "SHARE_MIN_LIVE_BYTES", 0)      # every state: prefix scan
        a = fast._compute(dfa, q)
        monkeypatch.setattr(token_tables, "SHARE_MIN_LIVE_BYTES", 257)    # every state: reference scan
        b = slow._compute(dfa, q)
        assert np.array_equal(a.inside, b.inside), (regex, q)
        assert np.array_equal(a.cross_toks, b.cross_toks) and np.array_equal(a.cross_pos, b.cross_pos), (regex, q)
