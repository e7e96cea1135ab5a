"""The per-sequence decoding step (`constrained.decoding.step`, `constrained.decoding.budget`).

Every decoder takes its step from this layer, so these tests check it once and then
check that each user gives the same tokens: the plain loop, batches, the speculative
verifier and Hugging Face ``generate()`` against a direct reading of the rules (mask,
argmax, advance) and against each other, for the same seeds.  Budget edge cases:
``max_tokens`` equal to the shortest completion, forced tokens crossing the budget,
EOS only where the constraint accepts (also through `step_mask` / `EndIds`, the
serving adapters' route).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.decoding import (
    BudgetGuard,
    EndIds,
    FinishPlan,
    SequenceStep,
    completes_within,
    decode_batch,
    decode_loop,
    look_ahead,
    step_mask,
)
from constrained.masks import apply_token_mask, unpack_mask
from constrained.models import ConstrainedLogitsProcessor, LanguageModel
from constrained.speculative import ForcedDrafter, PromptLookupDrafter, speculative_decode
from samplers import Greedy, Temperature, TopK

EOS = 256


@pytest.fixture(scope="module")
def tiny() -> LanguageModel:
    return LanguageModel.tiny(seed=3)


def compiled(lm: LanguageModel, regex: str):
    return compile_grammar(Grammar.from_regex(regex), lm.vocab, cache_dir=None)


def prefer(text: bytes):
    """A chooser that takes the first byte of ``text`` the masked logits allow (then EOS,
    then the argmax): a model that insists on a continuation, to drive the budget rule."""
    order = list(text) + [EOS]

    def choose(masked, generator=None) -> int:
        return next((t for t in order if torch.isfinite(masked[t])), int(masked.argmax()))
    return choose


def naive_greedy(lm: LanguageModel, matcher, prompt: bytes, max_tokens: int) -> tuple[list[int], str]:
    """The rules read directly: mask the full forward pass's logits, argmax, advance; EOS
    only where the matcher accepts, only EOS at the budget."""
    tokens: list[int] = []
    while True:
        logits = lm.model(torch.tensor([list(prompt) + tokens])).logits[0, -1].float()
        masked = apply_token_mask(logits.clone(), matcher.mask())
        if len(tokens) >= max_tokens:
            keep = torch.full_like(masked, float("-inf"))
            keep[EOS] = masked[EOS]
            masked = keep
            if not torch.isfinite(masked).any():
                return tokens, "max_tokens"
        t = int(masked.argmax())
        assert matcher.advance(t)
        if t == EOS:
            return tokens, "eos"
        tokens.append(t)


REGEXES = [r'\{"n": [0-9]{1,3}, "tag": "[a-z]{1,6}"\}', r"(yes|no)! (yes|no)!", r"[a-c]{3,12}"]


# ---------------------------------------------------------------------------- every user, same tokens
@pytest.mark.parametrize("regex", REGEXES)
@pytest.mark.parametrize("max_tokens", [2, 5, 24])
def test_every_user_picks_the_same_greedy_tokens(tiny, regex, max_tokens) -> None:
    from transformers import LogitsProcessorList

    cg, prompt = compiled(tiny, regex), b'Out: {"n": 7 '
    tokens, stop = naive_greedy(tiny, cg.matcher(), prompt, max_tokens)
    loop = decode_loop(tiny.session(list(prompt)), cg.matcher(), tiny.eos_ids, Greedy().choose, max_tokens=max_tokens)
    jump = decode_loop(tiny.session(list(prompt)), cg.matcher(), tiny.eos_ids, Greedy().choose,
                       max_tokens=max_tokens, jump_forward=True)
    rows = decode_batch(tiny.batch_session([list(b"x"), list(prompt)]), [cg.matcher(), cg.matcher()], tiny.eos_ids,
                        Greedy().choose, max_tokens=max_tokens)
    spec = speculative_decode(tiny.session(list(prompt)), cg.matcher(), tiny.eos_ids,
                              drafter=ForcedDrafter(), max_tokens=max_tokens)
    assert (loop.tokens, loop.stop) == (tokens, stop)
    assert (rows[1].tokens, rows[1].stop) == (tokens, stop)
    assert (spec.tokens, spec.stop) == (tokens, stop)
    if stop == "eos":                  # jump-forward feeds forced tokens: same greedy choices while in budget
        assert jump.tokens == tokens
    assert loop.logprob == pytest.approx(rows[1].logprob, abs=1e-4)
    if not spec.info["forced_eos"]:
        assert spec.logprob == pytest.approx(loop.logprob, abs=1e-3)
    proc = ConstrainedLogitsProcessor(cg, prompt_length=len(prompt))
    ids = torch.tensor([list(prompt)])
    out = tiny.model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=LogitsProcessorList([proc]),
                              max_new_tokens=max_tokens + 1, do_sample=False, pad_token_id=EOS, eos_token_id=EOS)
    generated = out[0, len(prompt):].tolist()
    assert generated[:len(tokens)] == tokens
    if stop == "eos":
        assert generated[len(tokens)] == EOS


@pytest.mark.parametrize("rule", [Temperature(1.3), TopK(4)])
@pytest.mark.parametrize("jump_forward", [False, True])
@pytest.mark.parametrize("finish", [False, True])
def test_loop_and_batch_rows_draw_the_same_tokens_for_the_same_seed(tiny, rule, jump_forward, finish) -> None:
    cg = compiled(tiny, REGEXES[0])
    for seed in range(3):
        args = dict(max_tokens=24, jump_forward=jump_forward, finish_within_budget=finish)
        a = decode_loop(tiny.session(list(b"Out: ")), cg.matcher(), tiny.eos_ids, rule.choose,
                        generator=torch.Generator().manual_seed(seed), **args)
        (b,) = decode_batch(tiny.batch_session([list(b"Out: ")]), [cg.matcher()], tiny.eos_ids, rule.choose,
                            generator=torch.Generator().manual_seed(seed), **args)
        assert (a.tokens, a.stop, a.forced, a.info) == (b.tokens, b.stop, b.forced, b.info)
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        if finish:
            assert a.stop == "eos" and len(a.tokens) <= 24


# ---------------------------------------------------------------------------- the step's rules
def small_vocab() -> TokenVocabulary:
    return TokenVocabulary.from_token_bytes([b"a", b"b", b"c", b"", b"ab"], eos_ids=[3])


def test_eos_only_where_the_constraint_accepts() -> None:
    m = compile_grammar(Grammar.from_regex("ab(c)?"), small_vocab(), cache_dir=None).matcher()
    step, flat = SequenceStep(m, [3], max_tokens=8), torch.zeros(5)
    masked = step.masked(flat, step.next_mask())
    assert torch.isfinite(masked).nonzero().flatten().tolist() == [0, 4]      # "a", "ab": no EOS yet
    assert step.take(4, flat) and step.tokens == [4]
    masked = step.masked(flat, step.next_mask())
    assert torch.isfinite(masked).nonzero().flatten().tolist() == [2, 3]      # complete: "c" or EOS
    ends = EndIds.of([3], [1])                                                # a request whose stop id is 1
    row = step_mask(m, ends=ends, out=np.zeros(1, np.int32))
    assert np.flatnonzero(unpack_mask(row, 5)).tolist() == [1, 2]
    assert step.take(2, flat)
    assert step.end_if_only_eos(step.next_mask())                             # only EOS left: forced
    assert (step.result.stop, step.result.tokens, step.result.forced, step.forced_end) == ("eos", [4, 2], 1, True)


def test_at_the_budget_only_eos_and_only_if_accepting() -> None:
    vocab = small_vocab()
    m = compile_grammar(Grammar.from_regex("a(b)?c"), vocab, cache_dir=None).matcher()
    step, flat = SequenceStep(m, [3], max_tokens=1), torch.zeros(5)
    assert step.take(0, flat)
    assert step.masked(flat, step.next_mask()) is None                        # "a" is not complete
    assert step.result.stop == "max_tokens" and step.result.tokens == [0]
    dead = compile_grammar(Grammar.from_regex("a"), vocab, cache_dir=None).matcher()
    step = SequenceStep(dead, [3], max_tokens=4)
    assert step.masked(flat, np.zeros(1, np.int32)) is None and step.result.stop == "dead_end"


def test_max_tokens_equal_to_the_shortest_completion_finishes_exactly(tiny) -> None:
    cg = compiled(tiny, "a(c*)b")                       # shortest: "ab", 2 tokens
    out = decode_loop(tiny.session(list(b"x")), cg.matcher(), tiny.eos_ids, prefer(b"acccc"), max_tokens=2,
                      finish_within_budget=True)
    assert (bytes(out.tokens), out.stop, out.info) == (b"ab", "eos", {"finished_by_completion": 1})
    guard = BudgetGuard(2)                              # the serving policy forces it from the start
    m = cg.matcher()
    assert guard.forced(m) == ord("a") and m.advance(ord("a")) and guard.forced(m) == ord("b")
    short = decode_loop(tiny.session(list(b"x")), cg.matcher(), tiny.eos_ids, prefer(b"acccc"), max_tokens=1,
                        finish_within_budget=True)
    assert short.stop == "max_tokens"                   # no completion fits: nothing to promise


def test_forced_tokens_crossing_the_budget(tiny) -> None:
    cg = compiled(tiny, "c*(dxxxx|y)e")                 # "d" forces "xxxx"
    drive = prefer(b"d")
    plain = decode_loop(tiny.session(list(b"x")), cg.matcher(), tiny.eos_ids, drive, max_tokens=3, jump_forward=True)
    assert bytes(plain.tokens) == b"dxx" and plain.stop == "max_tokens" and plain.forced == 2   # cut at the budget
    # the budget probe counts the forced run: "d" then "xxxx" "e" needs 6 > 4 tokens, so "ye" instead
    fin = decode_loop(tiny.session(list(b"x")), cg.matcher(), tiny.eos_ids, drive, max_tokens=4, jump_forward=True,
                      finish_within_budget=True)
    assert bytes(fin.tokens) == b"ye" and fin.stop == "eos" and fin.info == {"finished_by_completion": 2}
    room = decode_loop(tiny.session(list(b"x")), cg.matcher(), tiny.eos_ids, drive, max_tokens=6, jump_forward=True,
                       finish_within_budget=True)
    assert bytes(room.tokens) == b"dxxxxe" and room.stop == "eos" and room.forced == 5 + 1  # "xxxx", "e", EOS


def test_finish_plan_and_guard_share_the_rule(tiny) -> None:
    """The loop's policy and the serving guard agree on the invariant: after a token the
    guard says keeps room, the loop's plan does not finish, and conversely."""
    cg = compiled(tiny, r"\[[0-9]{1,3}(,[0-9]{1,3})*\]")
    for budget in range(3, 9):
        m = cg.matcher()
        m.advance(ord("["))
        m.advance(ord("1"))
        plan, guard = FinishPlan(m, budget), BudgetGuard(budget)
        for t in map(ord, ",2]"):
            verdict = plan.check(len(m.tokens), [t])
            assert (verdict.finish is None) == guard.keeps_room(m, t), (budget, chr(t))
        ahead = look_ahead(m, [ord(",")])
        assert ahead is not None and completes_within(ahead.constraint, budget - 3) == (budget - 3 >= 2)


def test_speculative_stops_as_the_loop_does_at_the_budget(tiny) -> None:
    cg = compiled(tiny, "[a-c]{3,12}")
    for max_tokens in (1, 2, 3, 4):
        loop = decode_loop(tiny.session(list(b"abcabc ")), cg.matcher(), tiny.eos_ids, Greedy().choose,
                           max_tokens=max_tokens)
        spec = speculative_decode(tiny.session(list(b"abcabc ")), cg.matcher(), tiny.eos_ids,
                                  drafter=PromptLookupDrafter(), max_tokens=max_tokens)
        assert (spec.tokens, spec.stop) == (loop.tokens, loop.stop)


@pytest.mark.parametrize("max_tokens", [21, 23, 30])
def test_speculative_finishes_within_the_budget_as_the_loop_does(tiny, max_tokens) -> None:
    """Every emitted token of the verifier goes through the step's budget rule: greedy
    output equals the loop's under ``finish_within_budget``, drafts or not."""
    cg, prompt = compiled(tiny, REGEXES[0]), b'JSON {"n": 12, "tag": "abc"} again: '
    loop = decode_loop(tiny.session(list(prompt)), cg.matcher(), tiny.eos_ids, Greedy().choose,
                       max_tokens=max_tokens, finish_within_budget=True)
    assert loop.stop == "eos" and len(loop.tokens) <= max_tokens
    for drafter in (ForcedDrafter(), PromptLookupDrafter()):
        spec = speculative_decode(tiny.session(list(prompt)), cg.matcher(), tiny.eos_ids, drafter=drafter,
                                  max_tokens=max_tokens, finish_within_budget=True)
        assert (spec.tokens, spec.stop, spec.info.get("finished_by_completion")) == \
            (loop.tokens, loop.stop, loop.info.get("finished_by_completion"))


def test_hf_processor_rows_that_left_the_constraint_are_not_masked(tiny) -> None:
    """A row whose token the mask did not allow (another processor chose it) is left
    alone from then on, at every later step too."""
    proc = ConstrainedLogitsProcessor(compiled(tiny, "[0-9]{3}"), prompt_length=1)
    for generated in ([], [ord("7")], [ord("7"), ord("x")], [ord("7"), ord("x"), ord("y")]):
        ids = torch.tensor([[ord(">")] + generated])
        scores = proc(ids, torch.zeros(1, 264))
        allowed = torch.isfinite(scores[0]).nonzero().flatten().tolist()
        expected = list(range(264)) if ord("x") in generated else list(range(ord("0"), ord("9") + 1))
        assert allowed == expected, generated
