"""Checkers: soundness, completeness and mask exactness of a compiled constraint.

Each raises a `ConstraintCheckError` (an ``AssertionError``, so pytest reports it
as a test failure) whose message names the shortest failing string, the token
where it went wrong and the matcher state there.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"1", b"+", b"2", b"+1", b""], eos_ids=[4])
    >>> compiled = compile_grammar(Grammar.from_lark('start: NUM ("+" NUM)*\\nNUM: /[12]/'), vocab, cache_dir=None)
    >>> def evaluates(text):                      # the user's independent reference (a predicate)
    ...     return all(part in ("1", "2") for part in text.split("+"))
    >>> assert_sound(compiled, evaluates, walks=50)        # finished walks checked
    50
    >>> assert_complete(compiled, ["1", "2+1+2", "1+1"])   # token paths checked
    12
    >>> assert_mask_exact(compiled, walks=10)              # states compared
    6
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from constrained.grammar.derivations import RandomChooser
from constrained.masks import unpack_mask
from constrained.testing.walks import MaskInconsistency, follow_mask


class ConstraintCheckError(AssertionError):
    """A checker found a counterexample (see the message)."""


class SoundnessError(ConstraintCheckError):
    """A string the constraint produces is rejected by the reference."""


class CompletenessError(ConstraintCheckError):
    """A string the reference accepts cannot be produced token by token."""


class MaskMismatchError(ConstraintCheckError):
    """The engine's mask differs from the slow reference mask."""


@dataclass(frozen=True)
class _Failure:
    text: bytes
    message: str


def _show(data: bytes) -> str:
    try:
        return repr(data.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(data)


def _accepts(reference_accepts: Callable, text: bytes) -> tuple[bool, str]:
    """Run the user's reference on ``text`` (str when it is UTF-8): True, or False and why."""
    try:
        arg = text.decode("utf-8")
    except UnicodeDecodeError:
        return False, "not valid UTF-8"
    try:
        result = reference_accepts(arg)
    except Exception as e:  # noqa: BLE001 - a reference that raises rejects; say how
        return False, f"{type(e).__name__}: {e}"
    if result is True:
        return True, ""
    return False, f"returned {result!r}"


def parses(parse: Callable[[str], object]) -> Callable[[str], bool]:
    """A reference predicate from a parser that raises on invalid input:
    ``parses(json.loads)(text)`` is True iff ``json.loads(text)`` returns."""
    def accepts(text: str) -> bool:
        parse(text)
        return True

    accepts.__name__ = f"parses({getattr(parse, '__name__', repr(parse))})"
    return accepts


def assert_sound(compiled, reference_accepts: Callable[[str], object], *, walks: int = 200,
                 max_tokens: int = 64, eos_p: float = 0.3, seed: int = 0) -> int:
    """Every finished masked walk (random tokens allowed by the mask, ending in EOS)
    spells a text the user's reference accepts.

    ``reference_accepts(text)`` is a predicate: ``True`` accepts, anything else or an
    exception rejects; wrap a parser that raises on bad input with `parses`
    (``parses(json.loads)``, ``parses(ast.parse)``).
    Returns how many finished walks were checked; raises `SoundnessError` with the
    shortest rejected text, its tokens and the reference's reason."""
    chooser = RandomChooser(random.Random(seed))
    failures: list[_Failure] = []
    finished = 0
    for _ in range(walks):
        try:
            walk = follow_mask(compiled, chooser, max_tokens=max_tokens, eos_p=eos_p)
        except MaskInconsistency as e:
            raise SoundnessError(str(e)) from None
        if not walk.finished:
            continue
        tokens, text = list(walk.tokens), walk.text
        finished += 1
        ok, why = _accepts(reference_accepts, text)
        if not ok:
            failures.append(_Failure(text, f"{_show(text)} (tokens {tokens}): the reference rejects it: {why}"))
    if failures:
        worst = min(failures, key=lambda f: len(f.text))
        raise SoundnessError(f"{len(failures)} of {finished} finished walks are rejected by the reference; "
                             f"shortest: {worst.message}")
    return finished


def assert_complete(compiled, strings: Iterable[bytes | str], *, tokenizations: int = 3,
                    seed: int = 0) -> int:
    """Every string (that the user's reference accepts) is produced token by token: under
    its canonical tokenization and ``tokenizations`` random ones, every token is allowed
    by the mask, and EOS is allowed at the end.  Returns the number of token paths
    checked; raises `CompletenessError` naming the shortest failing string, the
    tokenization, the refused token and the state."""
    from constrained.testing.tokens import canonical_ids, ids_by_bytes, random_split

    vocab = compiled.vocab
    table = ids_by_bytes(vocab.token_bytes)
    eos = [int(t) for t in vocab.eos_ids]
    rng = random.Random(seed)
    failures: list[_Failure] = []
    checked = 0
    for s in strings:
        data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        paths = []
        canonical = canonical_ids(s, vocab) if isinstance(s, str) else None
        if canonical is not None:
            paths.append(("canonical", canonical))
        for k in range(tokenizations):
            split = random_split(data, table, rng)
            if split is None:
                failures.append(_Failure(data, f"{_show(data)} cannot be spelled with the vocabulary"))
                break
            paths.append((f"random split {k}", split))
        for name, ids in paths:
            checked += 1
            m = compiled.matcher()
            for i, t in enumerate(ids):
                if not m.allows(t):
                    done = b"".join(vocab.token_bytes[x] for x in ids[:i])
                    failures.append(_Failure(data, (
                        f"{_show(data)} ({name} {ids}): token {i} = {t} ({vocab.token_bytes[t]!r}) is not "
                        f"allowed after {_show(done)} (state {m.state_id})")))
                    break
                m.advance(t)
            else:
                if not any(m.allows(e) for e in eos):
                    failures.append(_Failure(data, f"{_show(data)} ({name} {ids}): EOS is not allowed at the end "
                                                   f"(state {m.state_id})"))
    if failures:
        worst = min(failures, key=lambda f: len(f.text))
        raise CompletenessError(f"{len(failures)} token paths fail; shortest: {worst.message}")
    return checked


def assert_mask_exact(compiled, *, walks: int = 20, max_tokens: int = 24, seed: int = 0,
                      reference=None) -> int:
    """The fast mask equals the slow reference mask (`constrained.testing.reference.Reference`,
    a textbook byte-level Earley recognizer) in every state of ``walks`` random masked
    walks.  The reference is slow (a Python trie walk per state): use small
    vocabularies or few walks.  Returns the number of states compared; raises
    `MaskMismatchError` with the prefix, the state and the differing tokens."""
    from constrained.testing.reference import Reference

    ref = reference if reference is not None else Reference(compiled.grammar)
    vocab = compiled.vocab
    eos = [int(t) for t in vocab.eos_ids]
    rng = random.Random(seed)
    compared = 0
    seen: set[int] = set()
    for _ in range(walks):
        m = compiled.matcher()
        text = bytearray()
        chart = ref.initial
        for _step in range(max_tokens + 1):
            if m.state_id not in seen:
                seen.add(m.state_id)
                fast = set(np.flatnonzero(unpack_mask(m.mask(), len(vocab))).tolist())
                slow = ref.mask_from(chart, vocab.token_bytes, eos)
                compared += 1
                if fast != slow:
                    extra, missing = sorted(fast - slow), sorted(slow - fast)
                    raise MaskMismatchError(
                        f"after {_show(bytes(text))} (state {m.state_id}): the mask allows "
                        f"{[(t, vocab.token_bytes[t]) for t in extra[:8]]} that the reference does not, "
                        f"and refuses {[(t, vocab.token_bytes[t]) for t in missing[:8]]} that it allows "
                        f"({len(extra)} extra, {len(missing)} missing)")
            allowed = [t for t in np.flatnonzero(unpack_mask(m.mask(), len(vocab))).tolist() if t not in eos]
            if not allowed or rng.random() < 0.1:
                break
            t = rng.choice(allowed)
            m.advance(t)
            text += vocab.token_bytes[t]
            chart = chart.feed(vocab.token_bytes[t]) if chart is not None else None
    return compared
