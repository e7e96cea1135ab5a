"""Grammars composed from parts, with the value checks of each embedded JSON Schema kept to its section.

`GrammarBuilder` assembles a `Grammar` from literals, regex terminals, rules and whole
embedded grammars (a JSON Schema's, a lark or GBNF grammar's), renaming each embedded
grammar's symbols apart.  The structural-tag compiler, the tool-call formats and lark's
``%json`` all build through it.

**Scoped value checks.**  A JSON Schema whose keywords the grammar only over-approximates
(``uniqueItems``, ``not``, ...) compiles to a grammar *plus* `JsonValueChecks`, which
follow the bytes of one JSON value from the start of the text.  Embedded in a larger
grammar, those bytes are only the ones the embedded grammar reads: `SectionChecks`
finds them with a *shadow recognizer*, the composed grammar's own byte-level
recognizer (vocabulary-free, memoised per byte like the engine's), whose configurations
name the terminal each live parse is reading.  Every embedded schema's terminals are
its own (renamed apart), so a byte read by a terminal of section ``k`` belongs to
section ``k``'s value, and only those bytes are fed to section ``k``'s checks, at their
own offsets in the text.  Containers are validated when they close (as for a bare
schema); a value that is a bare string or scalar at the section's root is validated
when it ends (the closing quote; the first byte after a scalar that is not its own).

Exactness: the grammar's masks stay exact; the checks refuse exactly the tokens that
complete a section value its schema refuses, as `JsonValueChecks` does for a bare
schema.  Known limit: a grammar in which the *same* bytes may be read both inside a
checked section and outside it (an ambiguous composition, e.g. ``start: %json{...} |
/.*/``) applies the section's checks to them whatever the parse; structural tags and
the tool-call formats never are.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> b = GrammarBuilder()
    >>> args = b.embed(Grammar.from_json_schema({"type": "array", "uniqueItems": True}, whitespace="compact"), "args")
    >>> start = b.rule("start", [(b.literal("call "), args, b.literal(";"))])
    >>> g = b.build(start)
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in range(256)] + [b""], eos_ids=[256])
    >>> cg = compile_grammar(g, vocab, cache_dir=None)
    >>> cg.accepts_bytes(b"call [1,2];"), cg.accepts_bytes(b"call [1,1];")
    (True, False)
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from constrained.errors import UnsupportedGrammarError
from constrained.grammar.checks import SupportsDeficit, SupportsFailure, SupportsWitnesses
from constrained.grammar.ir import Grammar, Rule, TerminalDef

if TYPE_CHECKING:
    from constrained.engine.recognizer import Recognizer
    from constrained.grammar.checks import ValueChecks

_WS = frozenset(b" \t\n\r")
_SCALAR = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+-.")
OUT, STR, ESC = 0, 1, 2


class GrammarBuilder:
    """Assembles a `Grammar` from parts; every name it hands out is fresh.

    Symbols are the names `literal`, `terminal`, `rule` and `embed` return; ``None``
    (an empty literal) may stand in a sequence and is dropped.

    Example:
        >>> b = GrammarBuilder()
        >>> word = b.terminal("[a-z]+", hint="WORD")
        >>> g = b.build(b.rule("start", [(word,), (word, b.literal(","), "start")]))
        >>> sorted(t.name for t in g.terminals)
        ['LIT', 'WORD']
    """

    def __init__(self, source: str = "<composed>") -> None:
        self.source = source
        self._terminals: list[TerminalDef] = []
        self._by_regex: dict[tuple, str] = {}
        self._rules: list[Rule] = []
        self._names: set[str] = set()
        self._sections: list[tuple[frozenset[str], Any, bytes]] = []   # (terminals, checks, root's scalar first bytes)
        self._ignore: list[str] = []

    def fresh(self, hint: str) -> str:
        """A name not used yet, made of ``hint``'s word characters."""
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint)[:40] or "s"
        name, i = base, 1
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def terminal(self, regex: str, *, also: Sequence[str] = (), excluding: Sequence[str] = (),
                 hint: str = "T") -> str:
        """A terminal for ``regex`` (one per distinct definition)."""
        key = (regex, tuple(also), tuple(excluding))
        name = self._by_regex.get(key)
        if name is None:
            name = self._by_regex[key] = self.fresh(hint.upper())
            self._terminals.append(TerminalDef(name, regex, tuple(also), tuple(excluding)))
        return name

    def literal(self, text: str) -> str | None:
        """A terminal matching exactly ``text`` (None for the empty string)."""
        return self.terminal(re.escape(text), hint="LIT") if text else None

    def rule(self, hint: str, alternatives: Sequence[Sequence[str | None]]) -> str:
        """A fresh nonterminal with one rule per alternative (a sequence of symbols)."""
        lhs = self.fresh(hint.lower())
        for alt in alternatives:
            self._rules.append(Rule(lhs, tuple(s for s in alt if s is not None)))
        return lhs

    def adopt(self, terminals: Sequence[TerminalDef], rules: Sequence[Rule], ignore: Sequence[str] = ()) -> None:
        """Add terminals, rules and ignored terminal names as they are (their names are reserved)."""
        for t in terminals:
            self._names.add(t.name)
            self._terminals.append(t)
        for r in rules:
            self._names.add(r.lhs)
            self._rules.append(r)
        self._ignore.extend(ignore)

    def ignore(self, regex: str, hint: str = "IGNORED") -> None:
        """Let matches of ``regex`` appear between any two terminals of the whole grammar."""
        self._ignore.append(self.terminal(regex, hint=hint))

    def embed(self, grammar: Grammar, hint: str = "sub") -> str:
        """Copy ``grammar`` in with its symbols renamed apart; returns its start nonterminal.

        Its value checks (a JSON Schema's) are scoped to the bytes its own terminals read.
        A grammar with ``%ignore`` terminals cannot be embedded (they would apply to the
        whole composed grammar): `UnsupportedGrammarError`."""
        if grammar.ignore:
            raise UnsupportedGrammarError(
                f"a grammar with ignored terminals ({', '.join(grammar.ignore)}) cannot be embedded: "
                "%ignore would apply to the whole composed grammar", source=grammar.source)
        prefix = self.fresh(hint) + "__"
        names = {t.name: prefix + t.name for t in grammar.terminals}
        for r in grammar.rules:
            names.setdefault(r.lhs, prefix + r.lhs)
        self._names.update(names.values())
        for t in grammar.terminals:
            self._terminals.append(replace(t, name=names[t.name]))
        for r in grammar.rules:
            self._rules.append(Rule(names[r.lhs], tuple(names[s] for s in r.rhs)))
        checks = grammar.checks
        if checks is not None:
            if isinstance(checks, SectionChecks):
                for terms, inner, scalar in checks.sections:
                    self._sections.append((frozenset(names[n] for n in terms), inner, scalar))
            elif hasattr(checks, "value_ok") and hasattr(checks, "root"):
                self._sections.append((frozenset(names[t.name] for t in grammar.terminals), checks,
                                       _scalar_first_bytes(grammar)))
            else:
                raise UnsupportedGrammarError(f"cannot embed a grammar with value checks of type "
                                              f"{type(checks).__name__}", source=grammar.source)
        return names[grammar.start]

    def build(self, start: str) -> Grammar:
        """The grammar of everything added, starting at ``start`` (with `SectionChecks` when an
        embedded schema has value checks)."""
        plain = Grammar(terminals=tuple(self._terminals), rules=tuple(self._rules), start=start,
                        ignore=tuple(self._ignore), source=self.source)
        if not self._sections:
            return plain
        return replace(plain, checks=SectionChecks(plain, self._sections))


def _scalar_first_bytes(grammar: Grammar) -> bytes:
    """The bytes other than ``{`` and ``[`` a JSON grammar's value may start with (those of a
    bare scalar or string; empty when its root is always a container)."""
    from constrained.engine.compiled import compile_grammar

    rec = compile_grammar(replace(grammar, checks=None), _byte_vocab(), cache_dir=None,
                          lazy_terminals=True, timeout=None).recognizer
    first = rec.next_bytes(rec.initial).copy()
    first[[0x7B, 0x5B]] = False
    return bytes(np.flatnonzero(first).tolist())


_BYTE_VOCAB = None


def _byte_vocab():
    global _BYTE_VOCAB
    if _BYTE_VOCAB is None:
        from constrained.vocabulary import TokenVocabulary

        _BYTE_VOCAB = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    return _BYTE_VOCAB


def _takes_text(checks: ValueChecks) -> bool:
    """Whether ``checks.candidates`` takes the ``text`` keyword (newer checks protocol)."""
    return _candidates_take_text(type(checks))


@lru_cache(maxsize=64)
def _candidates_take_text(cls: type[ValueChecks]) -> bool:
    import inspect

    try:
        return "text" in inspect.signature(cls.candidates).parameters
    except (TypeError, ValueError):    # pragma: no cover - builtins without signatures
        return False


_CONTAINING: dict[tuple[str, bytes], np.ndarray] = {}


def _containing(vocab, chars: bytes) -> np.ndarray:
    """Bool per token: whether its bytes include one of ``chars`` (memoised per vocabulary)."""
    key = (vocab.content_hash(), chars)
    hit = _CONTAINING.get(key)
    if hit is None:
        mat = vocab.byte_matrix
        if mat.size:
            # (numpy's stubs type a reduction over one axis as a scalar or an array: here, an array)
            hit = cast(np.ndarray, np.isin(mat, np.frombuffer(chars, dtype=np.uint8)).any(axis=1))
        else:
            hit = np.zeros(len(vocab), bool)
        if len(_CONTAINING) > 64:
            _CONTAINING.clear()
        _CONTAINING[key] = hit
    return hit


_WHOLE: dict[tuple[str, bytes], np.ndarray] = {}


def _whole_root_values(vocab, first: bytes) -> np.ndarray:
    """Bool per token: whether it may hold a whole root scalar or string and the byte after it
    (where the validation happens): a byte of ``first`` that is not its last (memoised)."""
    key = (vocab.content_hash(), first)
    hit = _WHOLE.get(key)
    if hit is None:
        mat, lengths = vocab.byte_matrix, vocab.lengths
        if not mat.size:
            hit = np.zeros(len(vocab), bool)
        else:
            cols = np.arange(mat.shape[1])
            real = cols[None, :] < lengths[:, None]
            starts = np.isin(mat, np.frombuffer(first, dtype=np.uint8)) & real
            first_start = np.where(starts.any(axis=1), starts.argmax(axis=1), mat.shape[1])
            hit = first_start < lengths - 1
        if len(_WHOLE) > 64:
            _WHOLE.clear()
        _WHOLE[key] = hit
    return hit


def _slice(text: bytes | bytearray, data: bytes, start: int, end: int) -> bytes:
    base = len(text)
    if start >= base:
        return bytes(data[start - base:end - base])
    return bytes(text[start:]) + bytes(data[:max(0, end - base)]) if end > base else bytes(text[start:end])


class SectionChecks:
    """The value checks of several embedded JSON Schemas, each applied to its own section's
    bytes (see the module docstring).  Implements the checks protocol of
    `constrained.engine.checked`.

    A state is ``(shadow state id, per-section tuple)``; a section's entry is ``(inner
    state, depth, mode, value start)``: the inner `JsonValueChecks` state and, for sections
    whose root is checked, a small scanner of the root value (bare strings and scalars are
    validated when they end).
    """

    def __init__(self, grammar: Grammar, sections: Sequence[tuple[frozenset[str], Any, bytes]]) -> None:
        self.grammar = grammar if grammar.checks is None else replace(grammar, checks=None)
        self.sections = tuple(sections)
        self._root_checked = tuple(inner.root is not None and bool(first) for _, inner, first in self.sections)
        self._root_first = b"".join(sorted({bytes([c]) for k, (_, _, first) in enumerate(self.sections)
                                            if self._root_checked[k] for c in first}))
        self._lock = threading.Lock()
        self._rec: Recognizer | None = None
        self._lexeme_section: list[int] = []
        self._memo: dict[int, tuple[int, ...]] = {}
        self._vetoed: dict[tuple, np.ndarray] = {}
        digest = hashlib.sha256(self.grammar.content_hash().encode())
        for terms, inner, scalar in self.sections:
            digest.update(repr((sorted(terms), inner.content_hash(), scalar)).encode())
        self._hash = digest.hexdigest()

    # ------------------------------------------------------------------ shadow recognizer
    def _recognizer(self) -> Recognizer:
        if self._rec is None:
            with self._lock:
                if self._rec is None:
                    from constrained.engine.compiled import compile_grammar

                    rec = compile_grammar(self.grammar, _byte_vocab(), cache_dir=None, lazy_terminals=True,
                                          timeout=None).recognizer
                    names = list(rec.parser.tables.terminal_names) + list(self.grammar.ignore)
                    owner = {n: k for k, (terms, _, _) in enumerate(self.sections) for n in terms}
                    self._lexeme_section = [owner.get(n, -1) for n in names]
                    self._rec = rec
        return self._rec

    def _sections_of(self, sid: int) -> tuple[int, ...]:
        """The sections whose terminals some configuration of shadow state ``sid`` is reading."""
        hit = self._memo.get(sid)
        if hit is None:
            owner = self._lexeme_section
            hit = tuple(sorted({owner[lex] for _, lex, _ in self._recognizer().configs(sid)
                                if lex >= 0 and owner[lex] >= 0}))
            if len(self._memo) > 1 << 16:
                self._memo.clear()
            self._memo[sid] = hit
        return hit

    # ------------------------------------------------------------------ protocol
    def content_hash(self) -> str:
        return self._hash

    def start(self) -> tuple:
        rec = self._recognizer()
        return (rec.initial, tuple((inner.start(), 0, OUT, -1) for _, inner, _ in self.sections))

    def step(self, state: tuple, text: bytes | bytearray, data: bytes) -> tuple | None:
        rec = self._recognizer()
        sid, per = state
        per = list(per)
        base = len(text)
        runs: list[list[int] | None] = [None] * len(per)          # [first, last] data offsets per section
        for i, b in enumerate(data):
            sid = rec.byte_step(sid, b)
            if sid == 0:
                return None
            inside = self._sections_of(sid)
            for k, checked in enumerate(self._root_checked):
                if checked and k not in inside and per[k][3] >= 0 and per[k][2] == OUT:
                    # a root scalar ended where its section did
                    if not self._root_ok(k, text, data, per[k][3], base + i):
                        return None
                    per[k] = (per[k][0], per[k][1], OUT, -1)
            for k in inside:
                run = runs[k]
                if run is not None and run[1] != i - 1:      # a gap: feed what came before it
                    inner_state = self._feed(k, per[k][0], text, data, run)
                    if inner_state is None:
                        return None
                    per[k] = (inner_state,) + per[k][1:]
                    run = None
                runs[k] = [i, i] if run is None else [run[0], i]
                if self._root_checked[k]:
                    entry = self._scan(k, per[k], b, text, data, base + i)
                    if entry is None:
                        return None
                    per[k] = entry
        for k, run in enumerate(runs):
            if run is not None:
                inner_state = self._feed(k, per[k][0], text, data, run)
                if inner_state is None:
                    return None
                per[k] = (inner_state,) + per[k][1:]
        return (sid, tuple(per))

    def _feed(self, k: int, inner_state: Any, text: bytes | bytearray, data: bytes, run: list[int]) -> Any:
        first, last = run
        prefix = text if first == 0 else bytes(text) + bytes(data[:first])
        return self.sections[k][1].step(inner_state, prefix, bytes(data[first:last + 1]))

    def _root_ok(self, k: int, text: bytes | bytearray, data: bytes, start: int, end: int) -> bool:
        inner = self.sections[k][1]
        return inner.value_ok(inner.root, _slice(text, data, start, end))

    def _scan(self, k: int, entry: tuple, b: int, text: bytes | bytearray, data: bytes, pos: int) -> tuple | None:
        """Section ``k``'s root scanner after byte ``b`` at offset ``pos``."""
        inner_state, depth, mode, vstart = entry
        if mode == ESC:
            return (inner_state, depth, STR, vstart)
        if mode == STR:
            if b == 0x5C:
                return (inner_state, depth, ESC, vstart)
            if b == 0x22:
                if depth == 0 and not self._root_ok(k, text, data, vstart, pos + 1):
                    return None
                return (inner_state, depth, OUT, -1 if depth == 0 else vstart)
            return entry
        if depth == 0 and vstart >= 0:                 # inside a root scalar
            if b in _SCALAR:
                return entry
            if not self._root_ok(k, text, data, vstart, pos):
                return None
            vstart = -1
        if b in _WS:
            return (inner_state, depth, OUT, vstart)
        if b == 0x22:
            return (inner_state, depth, STR, pos if depth == 0 else vstart)
        if b in (0x7B, 0x5B):
            return (inner_state, depth + 1, OUT, vstart)
        if b in (0x7D, 0x5D):
            return (inner_state, max(0, depth - 1), OUT, vstart)
        if depth == 0:
            return (inner_state, 0, OUT, pos)
        return entry

    def accepts_end(self, state: tuple, text: bytes | bytearray) -> bool:
        _, per = state
        for k, (inner_state, _depth, mode, vstart) in enumerate(per):
            if inner_state[0] or inner_state[1] != OUT or mode != OUT:
                return False
            if self._root_checked[k] and vstart >= 0 and not self._root_ok(k, text, b"", vstart, len(text)):
                return False
        return True

    def candidates(self, state: tuple, mask: np.ndarray, vocab, key=None, text=None) -> np.ndarray:
        """Tokens of ``mask`` that may complete a checked value in some section (a superset of
        those `step` refuses): each section's own candidates (containers closing).  Where a
        section's *root* value may be a checked scalar or string (validated when it ends,
        possibly inside the token that begins it), also: while such a scalar is open, every
        token; while such a string is open, the tokens with a quote; while any other value is
        open, the tokens with a closing bracket or quote (a token must leave that value first);
        with nothing open, the tokens a step actually refuses, found once per shadow state
        and memoised (in free text the same few states recur)."""
        from constrained.masks import allowed_token_ids

        _, per = state
        # no memo key: an inner checks object may serve other grammars; ``text`` (the whole
        # output: inner states hold offsets into it) where the inner checks take it
        parts = [inner.candidates(per[k][0], mask, vocab, None, **({"text": text} if _takes_text(inner) else {}))
                 for k, (_, inner, _) in enumerate(self.sections)]
        if any(self._root_checked):
            root_open = [(e[2], e[3]) for e, c in zip(per, self._root_checked) if c and (e[3] >= 0 or e[2] != OUT)]
            if any(mode == OUT for mode, _ in root_open):            # a root scalar
                return allowed_token_ids(mask, len(vocab))
            allowed = None
            if root_open:                                            # a root string
                allowed = allowed_token_ids(mask, len(vocab))
                parts.append(allowed[_containing(vocab, b'"')[allowed]])
            if any(e[0][0] or e[0][1] != OUT for e in per):
                allowed = allowed_token_ids(mask, len(vocab)) if allowed is None else allowed
                parts.append(allowed[_containing(vocab, b'"]}')[allowed]])
            elif not root_open:
                parts.append(self._vetoed_here(state, mask, vocab))
        parts = [p for p in parts if p.size]
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))

    def _vetoed_here(self, state: tuple, mask: np.ndarray, vocab) -> np.ndarray:
        """With no value open in any section: the tokens of ``mask`` that `step` refuses (their
        verdicts read only their own bytes), memoised per (shadow state, section states)."""
        from constrained.masks import allowed_token_ids

        memo_key = (state, vocab.content_hash())
        hit = self._vetoed.get(memo_key)
        if hit is None:
            tb = vocab.token_bytes
            allowed = allowed_token_ids(mask, len(vocab))
            allowed = allowed[_whole_root_values(vocab, self._root_first)[allowed]]
            hit = np.asarray([t for t in allowed.tolist() if self.step(state, b"", tb[t]) is None], dtype=np.int64)
            if len(self._vetoed) > 4096:
                self._vetoed.clear()
            self._vetoed[memo_key] = hit
        return hit

    # ------------------------------------------------------------------ completion search hints
    def deficit(self, state: tuple) -> int:
        """The sections' own lower bounds on the bytes their open containers still need."""
        return sum(inner.deficit(e[0]) for (_, inner, _), e in zip(self.sections, state[1])
                   if isinstance(inner, SupportsDeficit))

    def blank_is_insignificant(self, state: tuple) -> bool:
        """Whether a blank read in ``state`` means nothing to any check: no section is inside a
        string (free text is unchecked, whitespace between JSON tokens is ignored)."""
        return all(e[0][1] == OUT and e[2] == OUT for e in state[1])

    def failure(self, state: tuple, text: bytes, data: bytes):
        """Where ``data`` (read after ``text``) first fails a section's check, as that section's
        checks describe it (their ``failure``; offsets into ``text + data``), or None if every
        check passes to the end."""
        text, data = bytes(text), bytes(data)
        whole, base, cs = text + data, len(text), state
        for j in range(len(data)):
            nxt = self.step(cs, whole[:base + j], data[j:j + 1])
            if nxt is None:
                return self._refusal(cs, whole, base + j)
            cs = nxt
        if self.accepts_end(cs, whole):
            return None
        for k, (_inner, _, mode, vstart) in enumerate(cs[1]):
            if self._root_checked[k] and vstart >= 0 and mode == OUT and \
                    not self._root_ok(k, whole, b"", vstart, len(whole)):
                return self._root_failure(k, whole, vstart, len(whole))
        return None

    def _refusal(self, cs: tuple, whole: bytes, at: int):
        """The failure of byte ``whole[at]`` in state ``cs`` (`step` refused it)."""
        rec = self._recognizer()
        sid, per = cs
        inside = self._sections_of(rec.byte_step(sid, whole[at]))
        b = whole[at]
        for k, (inner_state, depth, mode, vstart) in enumerate(per):
            inner = self.sections[k][1]
            if self._root_checked[k] and vstart >= 0 and depth == 0:
                ends = (mode == OUT and (k not in inside or b not in _SCALAR)) or (mode == STR and b == 0x22)
                stop = at + 1 if mode == STR else at
                if ends and not self._root_ok(k, whole, b"", vstart, stop):
                    return self._root_failure(k, whole, vstart, stop)
            if k in inside and inner.step(inner_state, whole[:at], whole[at:at + 1]) is None:
                return inner.failure(inner_state, whole[:at], whole[at:at + 1]) \
                    if isinstance(inner, SupportsFailure) else None
        return None

    def _root_failure(self, k: int, whole: bytes, start: int, end: int):
        """A section's root scalar or string ``whole[start:end]`` refused: its checks' own account,
        moved to where the value is in the text."""
        inner = self.sections[k][1]
        own = inner.failure if isinstance(inner, SupportsFailure) else None
        f = own(inner.start(), b"", whole[start:end]) if own is not None else None
        if f is not None:
            f.offset, f.value_start, f.value_end = f.offset + start, f.value_start + start, f.value_end + start
        return f

    def witnesses(self) -> tuple[bytes, ...]:
        out: dict[bytes, None] = {}
        for _, inner, _ in self.sections:
            if isinstance(inner, SupportsWitnesses):
                out.update(dict.fromkeys(inner.witnesses()))
        return tuple(out)
