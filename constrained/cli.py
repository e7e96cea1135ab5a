"""The ``constrained`` command line.

``constrained check GRAMMAR --text TEXT``: tokenizes TEXT canonically and walks it
through the grammar's matcher, printing for each token whether the constraint
allows it and how many tokens the mask allows there, then whether the text is
complete.  Exit status 0 iff the whole text is accepted.

``constrained mask GRAMMAR [--prefix TEXT] [--top N]``: the tokens allowed after a
prefix.

Grammars are ``.lark``, ``.gbnf`` or ``.regex`` files (or ``--regex R``); the
tokenizer is the default model's unless ``--tokenizer DIR`` names a local Hugging
Face tokenizer directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from constrained.errors import ConstrainedError


def _load(args):
    from constrained import Grammar, TokenVocabulary, compile_grammar
    from constrained.tokenizers import load_tokenizer

    grammar = Grammar.from_regex(args.regex) if args.regex else Grammar.from_file(args.grammar)
    vocab = TokenVocabulary.from_hf(load_tokenizer(args.tokenizer))
    t0 = time.perf_counter()
    compiled = compile_grammar(grammar, vocab)
    return compiled, vocab, time.perf_counter() - t0


def _show(vocab, t: int) -> str:
    return json.dumps(vocab.token_bytes[t].decode("utf-8", "backslashreplace"))


def cmd_check(args) -> int:
    from constrained.masks import unpack_mask

    compiled, vocab, seconds = _load(args)
    text = args.text if args.text is not None else sys.stdin.read()
    m = compiled.matcher()
    print(f"compiled in {seconds * 1e3:.1f} ms; vocabulary {len(vocab)} tokens")
    ok = True
    for i, t in enumerate(vocab.encode(text)):
        allowed = int(unpack_mask(m.mask(), len(vocab)).sum())
        accepted = m.advance(t)
        print(f"{i:4d} {t:7d} {_show(vocab, t):24s} {'ok ' if accepted else 'NO '} ({allowed} allowed)")
        if not accepted:
            ok = False
            break
    complete = ok and m.is_accepting()
    print("accepted" if complete else ("incomplete: a prefix of the language" if ok else "rejected"))
    return 0 if complete else 1


def cmd_mask(args) -> int:
    from constrained.masks import allowed_token_ids

    compiled, vocab, _ = _load(args)
    m = compiled.matcher()
    for t in vocab.encode(args.prefix):
        if not m.advance(t):
            print(f"the prefix is not allowed at token {t} {_show(vocab, t)}")
            return 1
    ids = allowed_token_ids(m.mask(), len(vocab))
    print(f"{len(ids)} tokens allowed; complete: {m.is_accepting()}; forced: {m.forced_bytes()!r}")
    for t in ids[: args.top]:
        print(f"{int(t):7d} {_show(vocab, int(t))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="constrained", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, fn, help_ in (("check", cmd_check, "walk a text through a grammar token by token"),
                            ("mask", cmd_mask, "show the tokens allowed after a prefix")):
        s = sub.add_parser(name, help=help_)
        s.add_argument("grammar", nargs="?", help=".lark, .gbnf or .regex file")
        s.add_argument("--regex", help="a regular expression instead of a grammar file")
        s.add_argument("--tokenizer", default="default", help="'default' or a local HF tokenizer directory")
        if name == "check":
            s.add_argument("--text", help="the text (default: standard input)")
        else:
            s.add_argument("--prefix", default="", help="text already generated")
            s.add_argument("--top", type=int, default=20, help="how many allowed tokens to list")
        s.set_defaults(func=fn)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``constrained`` console script."""
    args = build_parser().parse_args(argv)
    if not args.regex and not args.grammar:
        print("constrained: give a grammar file or --regex", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except ConstrainedError as e:
        print(f"constrained: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
