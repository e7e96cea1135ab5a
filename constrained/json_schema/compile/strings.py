"""String values: ``pattern``, ``format`` and ``minLength``/``maxLength`` intersected as
one terminal over the JSON *text* (every escape spelling of the allowed characters).

A `StringPiece` is ``(part, keyword, regex)``: a character-level regex the string must
fully match, ``("length", low, high, low's part)`` (a code-point count), or ``("encoded", regex)``
(a regex over the JSON text already).  The terminal is the first piece's regex,
intersected with the others' (``also``); pieces that make its automaton too large are
dropped and checked instead (lengths first, then the last added).  Lengths above
`MAX_COUNTED_LENGTH` are value checks from the start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from constrained.automata.json_words import WORDS_MARKER, json_string_except_regex, parse_marker
from constrained.errors import (
    CompileLimitError,
    CompileTimeoutError,
    ConstrainedError,
    InvalidSchemaError,
    UnsupportedSchemaError,
)
from constrained.json_schema import grounding
from constrained.json_schema.compile.bounds import count_bounds
from constrained.json_schema.compile.rules import STRING_REGEX, Alternatives, TerminalKey
from constrained.json_schema.conjunction import Conjunction, Part
from constrained.json_schema.ecma_regex import pattern_loosened_search_regex, pattern_search_regex
from constrained.json_schema.formats import FORMAT_NECESSARY, FORMAT_REGEXES
from constrained.json_schema.json_string import json_string_regex, length_bounded_any_string

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler

MAX_COUNTED_LENGTH = 24  # string length bounds counted by the automaton (longer: value checks)

StringPiece = tuple[Part, str, Any]
"""``(part, keyword, regex)``: see the module docstring for the forms of ``regex``."""

# terminals whose automaton exceeds the default limits (the compiled ones are cached by
# `compile_terminal`; a refusal is not, and finding it out costs a whole determinization:
# an ``email`` format, ~0.3 s, once per process instead of once per schema)
_TOO_LARGE: set[TerminalKey] = set()


def string_alternatives(compiler: SchemaCompiler, conj: Conjunction) -> Alternatives:
    """The alternatives of the strings ``conj`` allows: one terminal, or none."""
    pieces = string_pieces(compiler, conj)
    if pieces is None:
        return []
    terminal = grounding.grounded_string(compiler, conj, pieces)    # x-grounded: a substring of the text
    if terminal is not None:
        return [(terminal,)]
    terminal = string_terminal(compiler, pieces, "STRING")
    return [] if terminal is None else [(terminal,)]


def string_pieces(compiler: SchemaCompiler, conj: Conjunction) -> list[StringPiece] | None:
    """The pieces a string of ``conj`` must fully match (None: no string can); keywords
    that cannot be translated become checks."""
    min_length, max_length, length_parts = count_bounds(conj, "minLength", "maxLength")
    pieces: list[StringPiece] = []
    for part in conj:
        if part.has("pattern"):
            pattern = part.get("pattern")
            if not isinstance(pattern, str):
                raise InvalidSchemaError("pattern must be a string", keyword="pattern", pointer=part.pointer)
            try:
                pieces.append((part, "pattern", pattern_search_regex(pattern)))
            except CompileTimeoutError:
                raise                       # out of time: not a pattern to check instead
            except ConstrainedError as e:
                compiler.check(part, "pattern", f"pattern {pattern!r} has no regular translation ({e})")
        if part.has("format"):
            name = part.get("format")
            if compiler.options.formats == "annotation":
                compiler.note(part.pointer, "format", f"format {name!r} is an annotation (formats='annotation')")
            elif name in FORMAT_REGEXES:
                pieces.append((part, "format", FORMAT_REGEXES[name]))
            elif compiler.options.unknown_formats == "error":
                raise UnsupportedSchemaError(f"unknown format {name!r}", keyword="format", pointer=part.pointer)
            else:
                compiler.note(part.pointer, "format", f"unknown format {name!r}: an annotation, not enforced")
    if max_length is not None and min_length > max_length:
        return None
    # a length automaton needs ~20 states per counted character (UTF-8, escapes,
    # surrogate pairs); long bounds are validated instead of counted
    if max_length is not None and max_length > MAX_COUNTED_LENGTH:
        compiler.check(length_parts["maxLength"], "maxLength",
                       f"maxLength above {MAX_COUNTED_LENGTH} is enforced by validation")
        max_length = None
    if min_length > MAX_COUNTED_LENGTH:
        compiler.check(length_parts["minLength"], "minLength",
                       f"minLength above {MAX_COUNTED_LENGTH} is enforced by validation")
        min_length = 0
    if min_length or max_length is not None:
        part = length_parts.get("maxLength") or length_parts["minLength"]
        pieces.append((part, "maxLength" if max_length is not None else "minLength",
                       ("length", min_length, max_length, length_parts.get("minLength") if min_length else None)))
    return pieces


NECESSARY = "a necessary condition of a checked format or pattern"
"""The keyword name of the piece `check_instead` keeps for a format (`FORMAT_NECESSARY`)
or a pattern (`pattern_loosened_search_regex`)."""


def check_instead(compiler: SchemaCompiler, piece: StringPiece, why: str) -> list[StringPiece]:
    """Leave ``piece`` out of the automaton: every keyword it enforced becomes a value
    check.  A length piece enforces both bounds, each of its own part: a checked
    ``maxLength`` alone is one the value tracker counts (`CheckCursor.tracked_only`),
    so the ``minLength`` it carried is checked by its own name.

    Returns what the automaton keeps instead (`kept_instead`)."""
    part, keyword, regex = piece
    if keyword == NECESSARY:
        return []
    if _is_length(piece):
        _, low, high, low_part = regex
        if high is not None:
            compiler.check(part, "maxLength", why)
        if low:
            compiler.check(low_part, "minLength", why)
        return []
    compiler.check(part, keyword, why)
    return kept_instead(piece)


def kept_instead(piece: StringPiece) -> list[StringPiece]:
    """What the automaton keeps of a piece left to a check, so the string cannot close
    without it and leave only a value the check refuses later: a format's necessary
    condition (`FORMAT_NECESSARY`: an email's ``@`` and domain), a pattern's with its
    high counts left uncounted (`pattern_loosened_search_regex`: ``[...]{1,200}`` as
    ``[...]+``); nothing for other pieces, or for such a condition dropped in turn (its
    keyword is checked already)."""
    part, keyword, _ = piece
    if keyword == "pattern":            # (a pattern piece's pattern parsed already: `string_pieces`)
        loose = pattern_loosened_search_regex(part.get("pattern"))
        return [] if loose is None else [(part, NECESSARY, loose)]
    name = part.get("format") if keyword == "format" else None
    return [(part, NECESSARY, FORMAT_NECESSARY[name])] if isinstance(name, str) and name in FORMAT_NECESSARY else []


def _is_length(piece: StringPiece) -> bool:
    return isinstance(piece[2], tuple) and piece[2][0] == "length"


def string_terminal(compiler: SchemaCompiler, pieces: list[StringPiece], hint: str, *,
                    excluding: tuple[str, ...] = ()) -> str | None:
    """A terminal for JSON strings whose characters match every piece, minus the JSON-text
    regexes ``excluding`` (None: no string is left).  Pieces that make the automaton too
    large are dropped from the grammar and checked: the lengths first (they multiply
    the size of what they count), then the last added.  Lengths dropped before a
    pattern or format that had to go as well come back where they fit without it, so
    a too-large ``pattern`` leaves ``minLength: 1`` in the grammar (the string cannot
    close empty and leave only a value the checks refuse later)."""
    kept = list(pieces)
    dropped: list[StringPiece] = []
    while True:
        built = _built(compiler, kept, excluding)
        if built is not None and any(not _is_length(p) for p in dropped):
            for piece in [p for p in dropped if _is_length(p)]:
                back = _built(compiler, kept + [piece], excluding)
                if back is not None:        # fits: the length comes back (an empty one: no string at all)
                    kept.append(piece)
                    dropped.remove(piece)
                    built = back
        if built is not None:
            if not built[0]:
                return None
            for piece in dropped:
                check_instead(compiler, piece, f"{piece[1]} together with the other string constraints needs too "
                                               "large an automaton")
            main, also, left_out = built[1]
            return compiler.builder.term(main, hint, also, left_out)
        if not kept:
            raise UnsupportedSchemaError("a JSON string terminal exceeds the automaton size limit",
                                         keyword="pattern", pointer=pieces[0][0].pointer if pieces else "")
        # drop the costliest piece: lengths first, then the last added
        drop = next((piece for piece in kept if _is_length(piece)), kept[-1])
        kept.remove(drop)
        if drop[1] != NECESSARY:
            dropped.append(drop)
            kept += kept_instead(drop)


def _built(compiler: SchemaCompiler, kept: list[StringPiece], excluding: tuple[str, ...]) \
        -> tuple[bool, tuple] | None:
    """Whether the terminal of ``kept`` minus ``excluding`` matches anything, and its
    main regex, the regexes it must also match and those it must not; None where it
    is too large (or a piece's regex cannot be written)."""
    try:
        regexes: list[str] | None = [_text_regex(piece) for piece in kept]
    except CompileTimeoutError:
        raise                               # out of time, not too large: nothing to drop
    except ConstrainedError:
        return None
    main, also = (regexes[0], tuple(regexes[1:])) if regexes else (STRING_REGEX, ())
    main, left_out = _fold_excluded_words(main, also, excluding)
    fits = _fits_terminal(compiler, main, also, left_out)
    return None if fits is None else (fits, (main, also, left_out))


def _fold_excluded_words(main: str, also: tuple[str, ...], excluding: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Any JSON string but some words (an extra key): one automaton built directly
    (`constrained.automata.json_words`) instead of the string automaton minus the words'."""
    words = [w for regex in excluding if regex.startswith(WORDS_MARKER) for w in parse_marker(regex)[1]]
    if main != STRING_REGEX or also or not words:
        return main, excluding
    return json_string_except_regex(words), tuple(r for r in excluding if not r.startswith(WORDS_MARKER))


def _text_regex(piece: StringPiece) -> str:
    """The regex over the JSON text of one piece."""
    regex = piece[2]
    if isinstance(regex, tuple):
        return length_bounded_any_string(regex[1], regex[2]) if regex[0] == "length" else regex[1]
    return json_string_regex(regex)


def _fits_terminal(compiler: SchemaCompiler, main: str, also: tuple[str, ...], excluding: tuple[str, ...]) \
        -> bool | None:
    """True if the terminal compiles and matches something, False if it matches nothing,
    None if it is too large."""
    key = (main, also, excluding)
    fits = compiler.terminal_fits
    if key not in fits:
        from constrained.automata.byte_dfa import compile_terminal

        if key in _TOO_LARGE:               # known from an earlier schema of this process
            fits[key] = None
            return None
        try:
            dfa = compile_terminal(main, also, excluding)
            fits[key] = bool(dfa.accepting.any())
        except CompileTimeoutError:
            raise                           # out of time, not too large: nothing to drop
        except CompileLimitError:
            fits[key] = None
            if len(_TOO_LARGE) >= 1024:
                _TOO_LARGE.clear()
            _TOO_LARGE.add(key)
    return fits[key]
