"""Grammar-aligned sampling with ASAp on the default model: samples drift from what
masking gives towards the model's own distribution restricted to the grammar.

Masked sampling renormalises at every step, so a token that starts many dead ends
keeps its full probability.  ASAp learns, sample after sample, how much grammatical
probability lies behind each prefix (``ĉ``) and reweights.  The root's ``ĉ`` is an
upper bound on the probability that the model, left alone, answers inside the
grammar; watch it fall.  The trie is saved and later refined further.

    python examples/asap_refinement.py [samples]
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch

from constrained import Grammar, compile_grammar
from constrained.models import LanguageModel
from samplers import ASAp, ASApTrie

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    lm = LanguageModel.load("default")
    # a year as four digits, then a full stop: the model would often say more ("In 1945, ...")
    compiled = compile_grammar(Grammar.from_regex(r"(1[89]|20)[0-9]{2}\."), lm.vocab)
    session = lm.session(lm.prompt_ids("In which year did the Second World War end? Answer with the year."))
    gen = torch.Generator().manual_seed(0)
    asap = ASAp(min_prob=1e-9)
    seen: Counter = Counter()
    for i in range(n):
        sample = asap.run(session, compiled.matcher(), lm.eos_ids, max_tokens=8, generator=gen)[0]
        text = lm.tokenizer.decode(sample.tokens)
        seen[text] += 1
        print(f"{i + 1:3d}  {text:8s}  log P = {sample.logprob:7.2f}   root estimate ĉ = {sample.info['estimate']:.4f}")
    print("\noutputs:", dict(seen.most_common()))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trie.json.gz"
        asap.trie.save(path)
        restored = ASApTrie.load(path)
        print(f"trie saved and restored: {restored.node_count()} prefixes, {restored.samples} samples")
        more = ASAp(min_prob=1e-9, trie=restored).run(session, compiled.matcher(), lm.eos_ids, max_tokens=8,
                                                      generator=gen)[0]
        print(f"one more sample from the restored trie: {lm.tokenizer.decode(more.tokens)} "
              f"(ĉ = {more.info['estimate']:.4f})")
