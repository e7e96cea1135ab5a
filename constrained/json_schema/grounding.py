"""Grounded values: JSON strings that must copy a substring of an input text.

``Grammar.from_json_schema(schema, grounding=Grounding(text))`` makes every string
value of the schema (not object keys) a span of ``text``: a non-empty substring that
neither starts nor ends with whitespace, inside one sentence and without the period
that ends it (`constrained.automata.substrings.sentence_ends`; ``Grounding(sentences=
False)``, or ``"x-grounded-sentences": false`` on a value, lets spans cross sentences)
— as characters: the value's canonical JSON spelling is what the grammar spells —
intersected with the
string's own schema (``pattern``, ``format``, ``minLength``/``maxLength``).  The
intersection is one terminal: the string terminal with the text's substring
automaton (`constrained.automata.substrings`) among its ``also`` automata, so masks
stay exact and cost what any string terminal costs; nothing is checked per token
in Python.

Per value, the schema decides with the annotation ``x-grounded`` (pydantic:
``Field(json_schema_extra={"x-grounded": False})``):

* absent: free strings are grounded when ``Grounding.default`` is true (``extract(...,
  grounded=True)``); ``enum``/``const`` strings are not (a closed set the model
  cannot invent values of; labels are often not spelled in the text), nor are
  booleans, nor numbers unless ``Grounding.numbers`` says so (``extract(...,
  grounded="all")``: texts often write numbers otherwise, ``$1,200``, ``twelve``);
* ``true``: grounded, also an ``enum``/``const`` (only its values that occur in the
  text stay) and a number (spelled as a number the text writes: ``587`` where the
  text says ``587``, not ``58`` from it; `number_spellings`), even when
  ``Grounding.default`` is false (booleans never);
* ``false``: never grounded.

Where a value is grounded, ``"x-grounded-text": TEXT`` on it says which text it copies
from instead of the input (a part of it: a document's subject line, the sentence a
field is about; `TEXT_KEYWORD`); spans, numbers and enum values are then those of
``TEXT``, with the same rules.

When no substring of the text satisfies a grounded value's schema (a ``format:
date`` field and a text without a date), nothing is left silently unsatisfiable:

* a value grounded by default falls back to its ungrounded schema, and the
  compilation notes it (``SchemaNote(pointer, "x-grounded", ...)``);
* a value annotated ``x-grounded: true`` raises `GroundingError` (with the JSON
  pointer) while compiling, before any token is generated.

The same holds when the text is too long for a substring automaton (past
`constrained.automata.byte_dfa.DEFAULT_MAX_STATES` states, several thousand
characters): a fallback with a note, or `GroundingError`.

Example:
    >>> from constrained import Grammar
    >>> schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    >>> g = Grammar.from_json_schema(schema, grounding=Grounding("I flew from Paris to Rome."))
    >>> from constrained.testing.reference import Reference
    >>> ref = Reference(g)
    >>> ref.accepts(b'{"city":"Paris"}'), ref.accepts(b'{"city":"Pari"}'), ref.accepts(b'{"city":"Oslo"}')
    (True, True, False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from constrained.errors import (
    CompileLimitError,
    CompileTimeoutError,
    ConstrainedError,
    SchemaError,
)

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler

KEYWORD = "x-grounded"
SENTENCES_KEYWORD = "x-grounded-sentences"
"""``false`` on a value: its span may cross the text's sentences (`Grounding.sentences`)."""
TEXT_KEYWORD = "x-grounded-text"
"""A string on a value: where the value is grounded, the text it copies from instead of
`Grounding.text` (see the module docstring)."""


class GroundingError(SchemaError):
    """A value annotated ``x-grounded: true`` cannot be grounded in the text: no substring
    of the text satisfies its schema, or the text is too long for a substring automaton.
    Raised while compiling, before generation (``pointer`` names the value's schema).

    Example:
        >>> from constrained import Grammar
        >>> try:
        ...     Grammar.from_json_schema({"type": "string", "format": "date", "x-grounded": True},
        ...                              grounding=Grounding("no dates here"))
        ... except GroundingError as e:
        ...     e.keyword
        'x-grounded'
    """


@dataclass(frozen=True)
class Grounding:
    """The text grounded values copy from, whether string values without an
    ``x-grounded`` annotation are grounded (``default``; see the module docstring), and
    whether number values without one are too (``numbers``, with ``default``: each
    must be a number the text writes, `number_spellings`), and whether a grounded
    string stays inside one sentence of the text, without its final period
    (``sentences``; a value annotated ``"x-grounded-sentences": false`` may cross
    sentences all the same).

    Example:
        >>> Grounding("Ada Lovelace, ada@example.org").default
        True
    """

    text: str
    default: bool = True
    numbers: bool = False
    sentences: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"the grounding text must be a str, not {type(self.text).__name__}")


def annotation(conj) -> bool | None:
    """The ``x-grounded`` annotation of a conjunction of sub-schemas: False if any part
    says false, True if any says true, None if none says.  Non-boolean values raise
    `InvalidSchemaError`."""
    from constrained.errors import InvalidSchemaError

    said = None
    for p in conj:
        if p.has(KEYWORD):
            v = p.get(KEYWORD)
            if not isinstance(v, bool):
                raise InvalidSchemaError(f"{KEYWORD} must be true or false, not {v!r}", keyword=KEYWORD,
                                         pointer=p.pointer)
            if v is False:
                return False
            said = True
    return said


def source_text(compiler: SchemaCompiler, conj) -> str:
    """The text a grounded value of ``conj`` copies from: its ``x-grounded-text`` (the
    first part that says one), else the grounding's text.  A non-string annotation
    raises `InvalidSchemaError`."""
    from constrained.errors import InvalidSchemaError

    for p in conj:
        if p.has(TEXT_KEYWORD):
            text = p.get(TEXT_KEYWORD)
            if not isinstance(text, str):
                raise InvalidSchemaError(f"{TEXT_KEYWORD} must be a string, not {type(text).__name__}",
                                         keyword=TEXT_KEYWORD, pointer=p.pointer)
            return text
    return compiler.options.grounding.text


MAX_FEASIBILITY_CHECKS = 50_000
"""Substrings validated, at most, to show that a grounded value whose schema is partly
a value check (``format: email``, long lengths) has a valid substring at all."""


def grounded_string(compiler: SchemaCompiler, conj, pieces: list) -> str | None:
    """The terminal of a grounded free string value of ``conj`` (its string ``pieces``,
    `constrained.json_schema.compile.strings.string_pieces`, intersected with the text's substrings), or None
    where it is not grounded — or cannot be: then the fallback of the module docstring
    (a note, or `GroundingError`).

    Keywords the automaton leaves to value checks (a format too large for an automaton,
    such as ``email``) are invisible to the automaton's emptiness test: then substrings
    are validated against them, shortest first, until one passes (else the fallback),
    so a grounded value never leads into a string no check accepts."""
    piece = _substrings_piece(compiler, conj)
    if piece is None:
        return None
    before = set(compiler.checked)
    pieces = _without_too_large(compiler, pieces)
    from constrained.json_schema.compile.strings import string_terminal  # (it imports this module)

    term = string_terminal(compiler, [piece] + pieces, "GROUNDED")
    if term is None:
        unground(compiler, conj, annotation(conj), "no substring of the text fits its schema")
        return None
    checked = {key: compiler.checked[key] for key in compiler.checked if key not in before}
    if checked and not _some_substring_valid(compiler, source_text(compiler, conj), checked,
                                             _cut_at(compiler, conj)):
        unground(compiler, conj, annotation(conj),
                 f"no substring of the text (of the first {MAX_FEASIBILITY_CHECKS} tried) satisfies "
                 f"{', '.join(sorted(kw for _, kw in checked))}")
        return None
    return term


_TOO_LARGE: dict[str, str] = {}
"""String regexes whose automaton exceeded the state limit (a ``format: email``), and the
error: a grounded schema is compiled once per text, and such a regex would otherwise be
determinised up to the limit every time."""


def _without_too_large(compiler: SchemaCompiler, pieces: list) -> list:
    """``pieces`` without those whose automaton alone is too large (each becomes a value
    check, as `constrained.json_schema.compile.strings.string_terminal` would make it after trying)."""
    from constrained.automata.byte_dfa import compile_regex
    from constrained.json_schema.compile.strings import check_instead  # (it imports this module)
    from constrained.json_schema.json_string import (
        json_string_regex,
        length_bounded_any_string,
    )

    kept = []
    for piece in pieces:
        r = piece[2]
        try:
            rx = (length_bounded_any_string(r[1], r[2]) if r[0] == "length" else r[1]) \
                if isinstance(r, tuple) else json_string_regex(r)
        except CompileTimeoutError:
            raise
        except ConstrainedError:
            kept.append(piece)
            continue
        if rx not in _TOO_LARGE:
            try:
                compile_regex(rx)
            except CompileTimeoutError:
                raise
            except CompileLimitError as e:
                _TOO_LARGE[rx] = str(e)
        if rx in _TOO_LARGE:
            kept += check_instead(compiler, piece, f"{piece[1]} needs too large an automaton")
        else:
            kept.append(piece)
    return kept


def _sentence_bounded(compiler: SchemaCompiler, conj) -> bool:
    """Whether the grounded spans of ``conj`` stay inside sentences."""
    grounding = compiler.options.grounding
    return grounding.sentences and not any(p.has(SENTENCES_KEYWORD) and p.get(SENTENCES_KEYWORD) is False
                                           for p in conj)


def _cut_at(compiler: SchemaCompiler, conj) -> frozenset[int]:
    """The text's sentence ends a span of ``conj`` may not cover (none where spans may
    cross sentences)."""
    from constrained.automata.substrings import sentence_ends

    if not _sentence_bounded(compiler, conj):
        return frozenset()
    return frozenset(sentence_ends(source_text(compiler, conj)))


def _some_substring_valid(compiler: SchemaCompiler, text: str, checked: dict,
                          cut: frozenset[int] = frozenset()) -> bool:
    """Whether a span of ``text`` (a non-empty substring without whitespace at either end
    and covering none of the sentence ends ``cut``, as the substring automaton spells
    them; shortest first, at most
    `MAX_FEASIBILITY_CHECKS`) satisfies every checked keyword ``{(pointer, keyword):
    located sub-schema}``."""
    import jsonschema

    cls = jsonschema.validators.validator_for(compiler.schema, default=jsonschema.Draft202012Validator) \
        if isinstance(compiler.schema, dict) else jsonschema.Draft202012Validator
    subs = {}
    for (_, kw), loc in checked.items():
        if isinstance(loc.schema, dict) and kw in loc.schema:
            subs[kw] = loc.schema[kw]
    validator = cls(subs, format_checker=cls.FORMAT_CHECKER)
    tried = 0
    for length in range(1, len(text) + 1):
        seen = set()
        for i in range(len(text) - length + 1):
            s = text[i:i + length]
            if s in seen or s[0].isspace() or s[-1].isspace() or any(i <= e < i + length for e in cut):
                continue
            seen.add(s)
            if validator.is_valid(s):
                return True
            tried += 1
            if tried >= MAX_FEASIBILITY_CHECKS:
                return False
    return False


def _substrings_piece(compiler: SchemaCompiler, conj) -> tuple[Any, str, tuple[str, str]] | None:
    """The piece (`constrained.json_schema.compile.strings.string_terminal`'s ``(part, keyword, regex)``) that
    grounds a free string value of ``conj``, or None where it is not grounded (or
    cannot be: then the fallback of the module docstring, note or `GroundingError`)."""
    from constrained.automata.byte_dfa import compile_regex
    from constrained.automata.substrings import substrings_regex

    grounding = compiler.options.grounding
    if grounding is None:
        return None
    said = annotation(conj)
    if said is False or (said is None and not grounding.default):
        return None
    marker = substrings_regex(source_text(compiler, conj), sentences=_sentence_bounded(compiler, conj))
    try:
        compile_regex(marker)
    except CompileTimeoutError:
        raise
    except CompileLimitError as e:
        unground(compiler, conj, said, f"the text is too long for a substring automaton ({e})")
        return None
    return (conj[0], KEYWORD, ("grounded", marker))


def enum_strings(compiler: SchemaCompiler, conj, strings: list[str]) -> list[str]:
    """The ``enum``/``const`` strings of ``conj`` a grounded value may take: those that
    occur in the text where ``x-grounded: true`` says so (all where it does not)."""
    grounding = compiler.options.grounding
    if grounding is None or not strings or annotation(conj) is not True:
        return strings
    source = source_text(compiler, conj)
    kept = [s for s in strings if s in source]
    if not kept:
        unground(compiler, conj, True, "no enum/const string occurs in the text")
    return kept


NUMBER_TOKEN = r"(?<![0-9.])(?:(?<![A-Za-z0-9])-)?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![0-9]|\.[0-9])"
"""A number as a text writes it: digits not cut out of a longer run of digits and dots
(``10.0`` gives ``10.0``, not ``10`` or ``1``; ``192.168.1.100`` gives none), with a
fraction and an exponent where the text has them, and a minus sign where it does not
join two words (``-3`` in ``is -3``, but ``1`` in ``us-east-1a``)."""


def number_spellings(text: str) -> list[str]:
    """The numbers ``text`` writes (`NUMBER_TOKEN`), in order of first occurrence.

    Example:
        >>> number_spellings("Radius 10.0, port 8081, host 192.168.1.100, zone us-east-1a, 2x6 in.")
        ['10.0', '8081', '1', '2', '6']
        >>> number_spellings("It fell to -3.5e2, then (-7).")
        ['-3.5e2', '-7']
    """

    return list(dict.fromkeys(m.group() for m in re.finditer(NUMBER_TOKEN, text)))


def _spellings_regex(spellings: list[str]) -> str:
    return "(?:" + "|".join(re.escape(s) for s in spellings) + ")"


def grounded_numbers(compiler: SchemaCompiler, conj, alternatives: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """A number value's ``alternatives`` (single terminals of `constrained.json_schema.compile.numeric.number_alternatives`),
    each intersected with the numbers the text writes (`number_spellings`: whole
    numbers of the text, so ``1`` is not grounded in ``10.0``) where ``x-grounded: true``
    says so, or where `Grounding.numbers` grounds numbers by default: the number must
    be spelled as the text spells it.  None left: `GroundingError` for ``x-grounded:
    true``, else the fallback (a note; the number follows its schema only)."""
    from constrained.automata.byte_dfa import compile_terminal

    grounding = compiler.options.grounding
    said = annotation(conj) if grounding is not None else None
    if grounding is None or not alternatives or said is False \
            or (said is None and not (grounding.default and grounding.numbers)):
        return alternatives
    spellings = number_spellings(source_text(compiler, conj))
    if not spellings:
        unground(compiler, conj, said, "the text writes no number")
        return alternatives
    marker = _spellings_regex(spellings)
    defs = {name: key for key, name in compiler.builder.terminals.items()}
    out = []
    for alt in alternatives:
        regex, also, excluding = defs[alt[0]]
        also = tuple(also) + (marker,)
        try:
            empty = not compile_terminal(regex, also, excluding).accepting.any()
        except CompileTimeoutError:
            raise
        except CompileLimitError as e:
            unground(compiler, conj, said, f"the number's automaton with the text's is too large ({e})")
            return alternatives
        if not empty:
            out.append((compiler.builder.term(regex, "GROUNDED_NUM", also, excluding),))
    if not out:
        unground(compiler, conj, said, "no number the text writes fits its schema")
        return alternatives
    return out


def unground(compiler: SchemaCompiler, conj, said: bool | None, why: str) -> None:
    """The fallback where a value cannot be grounded: `GroundingError` for ``x-grounded:
    true``, else a compile note (the value is compiled ungrounded)."""
    pointer = conj[0].pointer
    if said:
        raise GroundingError(f"cannot ground the value: {why}", keyword=KEYWORD, pointer=pointer)
    compiler.note(pointer, KEYWORD, f"not grounded: {why}; the value follows its schema only")
