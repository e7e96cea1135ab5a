"""CUDA paths (skipped without a GPU): the packed mask applied on the device, and
speculative / batched decoding with the model and the masks on the GPU giving the
same greedy output as on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from constrained import Grammar, compile_grammar
from constrained.decoding import decode_loop
from constrained.masks import apply_token_mask, pack_mask
from constrained.models import LanguageModel
from constrained.speculative import ChainDrafter, ForcedDrafter, PromptLookupDrafter, speculative_decode
from samplers import Greedy

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_packed_mask_is_applied_on_the_device() -> None:
    allowed = np.random.default_rng(0).random((3, 1000)) < 0.3
    logits = torch.randn(3, 1010, device="cuda")
    cpu = apply_token_mask(logits.cpu().clone(), pack_mask(allowed))
    gpu = apply_token_mask(logits.clone(), pack_mask(allowed))
    assert gpu.device.type == "cuda" and torch.equal(gpu.cpu(), cpu)


def test_speculative_greedy_on_the_gpu_matches_the_cpu() -> None:
    cpu = LanguageModel.tiny(seed=1, layers=3)
    gpu_model = LanguageModel.tiny(seed=1, layers=3)
    gpu_model.model.to("cuda")
    compiled = compile_grammar(Grammar.from_regex(r'\{"n": [0-9]{1,3}, "tag": "[a-z]{1,6}"\}'), cpu.vocab,
                               cache_dir=None)
    prompt = list(b'JSON {"n": 12, "tag": "abc"} again: ')
    base = decode_loop(cpu.session(prompt), compiled.matcher(), cpu.eos_ids, Greedy().choose, max_tokens=24)
    drafter = ChainDrafter([ForcedDrafter(), PromptLookupDrafter()])
    out = speculative_decode(gpu_model.session(prompt), compiled.matcher(), cpu.eos_ids, drafter=drafter,
                             max_tokens=24)
    assert out.tokens == base.tokens
    batch = gpu_model.batch_session([prompt, prompt[:10]])
    assert batch.logits().device.type == "cuda"
