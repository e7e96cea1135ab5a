"""CUDA paths (skipped without a GPU): the packed mask applied on the device,
speculative / batched decoding with the model and the masks on the GPU giving the
same greedy output as on the CPU, the masks of a draft computed in a worker thread
during the target's forward pass (`speculative_decode`'s ``overlap_masks``, on by
default on a GPU) giving the same output as computed in line, and every sampler
drawing the same seeded samples with a CPU generator whether the logits live on the
CPU or the GPU (the same fixed logits, moved)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.decoding import decode_loop
from constrained.masks import apply_token_mask, pack_mask
from constrained.models import LanguageModel, TableModel
from constrained.speculative import (
    ChainDrafter,
    ForcedDrafter,
    LayerSkipDrafter,
    ModelDrafter,
    PromptLookupDrafter,
    SpeculativeSampler,
    SuffixDrafter,
    speculative_decode,
)
from samplers import (
    SMC,
    AncestralSampler,
    ASAp,
    AWRSSampler,
    BeamSearch,
    Greedy,
    MinP,
    MirostatV1,
    MirostatV2,
    Temperature,
    TopK,
    TopP,
)

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


# ---------------------------------------------------------------------- overlap_masks on the GPU
OVERLAP_CASES = [(r'\{"n": [0-9]{1,3}, "tag": "[a-z]{1,6}"\}', b'JSON {"n": 12, "tag": "abc"} again: '),
                 (r"(yes|no)! (yes|no)!", b"Answer yes! or no! "),
                 (r"[a-c]{3,12}", b"abcabcabc abc")]


@pytest.fixture(scope="module")
def gpu_tiny():
    lm = LanguageModel.tiny(seed=1, layers=3)
    lm.model.to("cuda")
    return lm


@pytest.mark.parametrize("drafter", ["forced", "lookup", "suffix", "layer_skip", "chain"])
def test_overlapped_masks_on_the_gpu_give_the_greedy_output(gpu_tiny, drafter) -> None:
    """On a GPU the draft's masks are computed in a worker thread during the target's
    forward pass by default; the output is the non-speculative greedy one, token for
    token, and the same as with the masks computed in line."""
    make = {"forced": ForcedDrafter, "lookup": PromptLookupDrafter, "suffix": SuffixDrafter,
            "layer_skip": lambda: LayerSkipDrafter(gpu_tiny, 1),
            "chain": lambda: ChainDrafter([ForcedDrafter(), PromptLookupDrafter(), SuffixDrafter()])}[drafter]
    for regex, prompt in OVERLAP_CASES:
        compiled = compile_grammar(Grammar.from_regex(regex), gpu_tiny.vocab, cache_dir=None)
        base = decode_loop(gpu_tiny.session(list(prompt)), compiled.matcher(), gpu_tiny.eos_ids, Greedy().choose,
                           max_tokens=24)
        for max_draft in (2, 8):
            auto = speculative_decode(gpu_tiny.session(list(prompt)), compiled.matcher(), gpu_tiny.eos_ids,
                                      drafter=make(), max_tokens=24, max_draft=max_draft)
            inline = speculative_decode(gpu_tiny.session(list(prompt)), compiled.matcher(), gpu_tiny.eos_ids,
                                        drafter=make(), max_tokens=24, max_draft=max_draft, overlap_masks=False)
            assert auto.info["overlap_masks"] is True and inline.info["overlap_masks"] is False
            assert (auto.tokens, auto.stop) == (base.tokens, base.stop), (drafter, regex, max_draft)
            assert (inline.tokens, inline.stop) == (base.tokens, base.stop), (drafter, regex, max_draft)
            assert auto.info["forwards"] <= len(auto.tokens) + 1


def test_overlapped_masks_with_a_json_schema_and_sampling(gpu_tiny) -> None:
    """A JSON Schema constraint (value checks in the matcher) and a sampling target:
    with a seeded generator, overlapped and in-line masks give the same sample."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 90},
                                               "tag": {"enum": ["abc", "abd", "xyz"]}},
              "required": ["n", "tag"], "additionalProperties": False}
    compiled = compile_grammar(Grammar.from_json_schema(schema, whitespace="compact"), gpu_tiny.vocab,
                               cache_dir=None)
    prompt = list(b'JSON {"n":12,"tag":"abc"} again: ')
    outs = []
    for overlap in (True, False):
        for seed in range(4):
            drafter = ChainDrafter([ForcedDrafter(), PromptLookupDrafter()])
            outs.append(speculative_decode(gpu_tiny.session(prompt), compiled.matcher(), gpu_tiny.eos_ids,
                                           drafter=drafter, target=Temperature(0.7), max_tokens=40,
                                           generator=torch.Generator().manual_seed(seed), overlap_masks=overlap))
    assert [(o.tokens, o.stop) for o in outs[:4]] == [(o.tokens, o.stop) for o in outs[4:]]
    for o in outs:
        if o.stop == "eos":
            assert compiled.accepts_bytes(bytes(o.tokens))


# ---------------------------------------------------------------------- samplers with logits on the GPU
TABLE = TokenVocabulary.from_token_bytes([b"a", b"b", b"c", b"ab", b"bc", b"ca", b""], eos_ids=[6])


class _CudaTable:
    """A `TableModel` whose sessions give their logits on the GPU (the same values)."""

    def __init__(self, table: TableModel) -> None:
        self.table = table
        self.vocab = table.vocab
        self.logits_width = table.logits_width
        self.eos_ids = table.eos_ids

    def session(self, prompt):
        return _CudaSession(self.table.session(prompt))


class _CudaSession:
    def __init__(self, inner) -> None:
        self.inner = inner

    @property
    def tokens(self):
        return self.inner.tokens

    def logits(self):
        return self.inner.logits().to("cuda")

    def extend(self, tokens) -> None:
        self.inner.extend(tokens)

    def extend_scored(self, tokens):
        return self.inner.extend_scored(tokens).to("cuda")

    def truncate(self, length: int) -> None:
        self.inner.truncate(length)

    def fork(self):
        return _CudaSession(self.inner.fork())

    def replicate(self, n: int):
        return _CudaBatch(self.inner.replicate(n))


class _CudaBatch:
    def __init__(self, inner) -> None:
        self.inner = inner

    def __len__(self) -> int:
        return len(self.inner)

    def logits(self):
        return self.inner.logits().to("cuda")

    def extend(self, rows) -> None:
        self.inner.extend(rows)

    def select(self, indices) -> None:
        self.inner.select(indices)


SAMPLER_NAMES = ("temperature", "top_k", "top_p", "min_p", "mirostat_v1", "mirostat_v2", "awrs", "smc_awrs",
                 "smc_mask", "asap", "beam", "speculative_lookup", "speculative_model")


def _samplers(cuda: bool) -> dict:
    table = TableModel(TABLE, seed=3, scale=1.5)
    draft_lm = _CudaTable(TableModel(TABLE, seed=4, scale=1.5)) if cuda else TableModel(TABLE, seed=4, scale=1.5)
    return {
        "temperature": AncestralSampler(Temperature(1.0)),
        "top_k": AncestralSampler(TopK(3)),
        "top_p": AncestralSampler(TopP(0.8)),
        "min_p": AncestralSampler(MinP(0.1)),
        "mirostat_v1": AncestralSampler(MirostatV1(tau=1.5)),
        "mirostat_v2": AncestralSampler(MirostatV2(tau=1.5)),
        "awrs": AWRSSampler(),
        "smc_awrs": SMC(n_particles=4, proposal="awrs"),
        "smc_mask": SMC(n_particles=4, proposal="mask", ess_threshold=0.9),
        "asap": ASAp(n_samples=3),
        "beam": BeamSearch(num_beams=2),
        "speculative_lookup": SpeculativeSampler(PromptLookupDrafter(), Temperature(1.0)),
        "speculative_model": SpeculativeSampler(ModelDrafter(draft_lm, Temperature(1.0)), Temperature(1.0)),
    }, table


@pytest.mark.parametrize("name", SAMPLER_NAMES)
def test_seeded_samplers_draw_the_same_with_logits_on_the_gpu(name) -> None:
    """A seeded CPU generator (what ``generate(seed=...)`` makes) with logits on the
    GPU: no device mismatch, and the same samples as with the same logits on the CPU."""
    compiled = compile_grammar(Grammar.from_regex("[abc]{2,7}"), TABLE, cache_dir=None)
    results = []
    for cuda in (False, True):
        samplers, table = _samplers(cuda)
        source = table.session([0, 1, 2, 0, 1])
        if cuda:
            source = _CudaSession(source)
        gen = torch.Generator().manual_seed(11)
        runs = []
        for _ in range(3):
            runs += samplers[name].run(source.fork(), compiled.matcher(), table.eos_ids, max_tokens=8,
                                       generator=gen)
        results.append(runs)
    cpu, gpu = results
    assert [(s.tokens, s.stop) for s in gpu] == [(s.tokens, s.stop) for s in cpu], name
    assert [s.logprob for s in gpu] == pytest.approx([s.logprob for s in cpu], abs=1e-4)
    assert any(s.finished for s in gpu)
