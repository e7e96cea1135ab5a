"""The ``constrained`` command line.

``constrained check GRAMMAR --text TEXT``: tokenizes TEXT canonically and walks it
through the grammar's matcher, printing for each token whether the constraint
allows it and how many tokens the mask allows there, then whether the text is
complete.  Exit status 0 iff the whole text is accepted.

``constrained mask GRAMMAR [--prefix TEXT] [--top N]``: the tokens allowed after a
prefix.

``constrained extract --schema FILE (--text TEXT | FILE | -)``: a JSON value that
validates against the schema, extracted from the text with the model (the default
one unless ``--model DIR``); printed as JSON.  ``--texts FILE`` (one text per line,
``-`` for standard input) extracts from each line, ``--batch-size`` lines at a time,
printing one JSON line per text (``null`` and a message on standard error where a
text fails; exit status 1 then).  ``--grounded``: every free string value is copied
from the text (a span of it; ``x-grounded`` in the schema decides per value);
``--grounded all``: numbers too.  ``--complete``: every declared member is asked for
(answered or ``null``, left out).  Long runs show a progress bar on a terminal.

``constrained generate (--grammar FILE | --regex R | --schema FILE) --prompt P
[--sampler greedy|temperature|top-k|top-p|min-p|mirostat] [--max-tokens N]``:
constrained text for a prompt.  ``--speculative DRAFTER`` (extract and generate)
decodes speculatively (`constrained.speculative`).

``constrained bench jsonschemabench|maskbench|test-suite [options]``: the shipped
benchmarks (`constrained.bench`; ``constrained bench NAME --help`` for options).

Grammars are ``.lark``, ``.gbnf`` or ``.regex`` files (or ``--regex R``); the
tokenizer is the default model's unless ``--tokenizer DIR`` names a local Hugging
Face tokenizer directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

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


def _read_text(spec: str) -> str:
    from pathlib import Path

    from constrained.app import is_file

    if spec == "-":
        return sys.stdin.read()
    path = Path(spec)
    return path.read_text(encoding="utf-8") if is_file(path) else spec


def _sampler(args):
    from samplers import AncestralSampler, Greedy, MinP, MirostatV2, Temperature, TopK, TopP

    rule = {"greedy": lambda: Greedy(), "temperature": lambda: Temperature(args.temperature),
            "top-k": lambda: TopK(args.top_k, args.temperature), "top-p": lambda: TopP(args.top_p, args.temperature),
            "min-p": lambda: MinP(args.min_p, args.temperature),
            "mirostat": lambda: MirostatV2(args.tau)}[args.sampler]()
    # as `constrained.app.default_sampler`: jump-forward, and outputs that would run out of
    # --max-tokens (or into a value a check refuses) ended by their shortest completion
    return AncestralSampler(rule, jump_forward=True, finish_within_budget=True)


def cmd_extract(args) -> int:
    from constrained.app import extract, extract_many

    model = args.model if args.model != "default" else None
    if (args.text is None) == (args.texts is None):
        print("constrained extract: give exactly one of --text, --texts", file=sys.stderr)
        return 2
    if args.text is not None:
        value = extract(args.schema, _read_text(args.text), model=model, max_tokens=args.max_tokens,
                        sampler=_sampler(args), seed=args.seed, progress=True, speculative=args.speculative,
                        grounded=args.grounded or False, complete=args.complete)
        print(_json_line(value))
        return 0
    if args.speculative:
        print("constrained extract: --speculative decodes one text at a time: use it with --text", file=sys.stderr)
        return 2
    texts = [line for line in _read_lines(args.texts) if line.strip()]
    values = extract_many(args.schema, texts, model=model, max_tokens=args.max_tokens, sampler=_sampler(args),
                          seed=args.seed, batch_size=args.batch_size, progress=True, grounded=args.grounded or False,
                          complete=args.complete)
    failed = 0
    for i, value in enumerate(values, 1):
        if isinstance(value, ConstrainedError):
            failed += 1
            print(f"constrained extract: text {i}: {type(value).__name__}: {value}", file=sys.stderr)
            print("null")
        else:
            print(_json_line(value))
    return 1 if failed else 0


def _json_line(value) -> str:
    return json.dumps(value if not hasattr(value, "model_dump") else value.model_dump(), ensure_ascii=False)


def _read_lines(spec: str) -> list[str]:
    from pathlib import Path

    from constrained.app import is_file

    if spec == "-":
        return sys.stdin.read().splitlines()
    path = Path(spec)
    if not is_file(path):
        raise FileNotFoundError(f"--texts: no such file: {spec[:200]}")
    return path.read_text(encoding="utf-8").splitlines()


def cmd_generate(args) -> int:
    from constrained.app import generate

    given = [x for x in (args.grammar_file, args.regex, args.schema) if x]
    if len(given) != 1:
        print("constrained generate: give exactly one of --grammar, --regex, --schema", file=sys.stderr)
        return 2
    model = args.model if args.model != "default" else None
    text = generate(_read_text(args.prompt), grammar=args.grammar_file, regex=args.regex, json_schema=args.schema,
                    sampler=_sampler(args), model=model, max_tokens=args.max_tokens, seed=args.seed, progress=True,
                    speculative=args.speculative)
    print(text)
    return 0


def cmd_bench(args) -> int:
    bench: Callable[[list[str]], int | None]     # each benchmark's main(argv)
    if args.benchmark == "jsonschemabench":
        from constrained.bench.jsonschemabench import main as bench
    elif args.benchmark == "maskbench":
        from constrained.bench.maskbench import main as bench
    else:
        from constrained.bench.test_suite import main as bench
    return bench(args.options) or 0


def _generation_options(s) -> None:
    s.add_argument("--model", default="default", help="'default' (SmolLM2-135M-Instruct) or a local HF model dir")
    s.add_argument("--max-tokens", type=int, default=256)
    s.add_argument("--sampler", default="greedy",
                   choices=["greedy", "temperature", "top-k", "top-p", "min-p", "mirostat"])
    s.add_argument("--temperature", type=float, default=1.0)
    s.add_argument("--top-k", type=int, default=40)
    s.add_argument("--top-p", type=float, default=0.9)
    s.add_argument("--min-p", type=float, default=0.05)
    s.add_argument("--tau", type=float, default=3.0, help="mirostat's target surprise (bits)")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--speculative", default=None, metavar="DRAFTER",
                   help="decode speculatively with a drafter: forced, lookup, suffix, chain, layer-skip[:N], "
                        "model:PATH (same output for greedy, same distribution when sampling)")


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
        s.set_defaults(func=fn, needs_grammar=True)
    s = sub.add_parser("extract", help="extract a schema-valid JSON value from a text")
    s.add_argument("--schema", required=True, help="a JSON Schema file")
    s.add_argument("--text", help="the text, a file holding it, or - for standard input")
    s.add_argument("--texts", help="a file with one text per line (- for standard input): JSON lines out")
    s.add_argument("--batch-size", type=int, default=8, help="texts decoded together with --texts")
    s.add_argument("--grounded", nargs="?", const="strings", choices=["strings", "all"],
                   help="string values (with 'all': and numbers) must be copied from the text "
                        "(x-grounded in the schema per value)")
    s.add_argument("--complete", action="store_true",
                   help="ask for every declared member (the model answers a value or null; null ones are left out)")
    _generation_options(s)
    s.set_defaults(func=cmd_extract, needs_grammar=False)
    s = sub.add_parser("generate", help="constrained text for a prompt")
    s.add_argument("--grammar", dest="grammar_file", help=".lark, .gbnf or .regex file")
    s.add_argument("--regex", help="a regular expression")
    s.add_argument("--schema", help="a JSON Schema file")
    s.add_argument("--prompt", required=True, help="the prompt, a file holding it, or - for standard input")
    _generation_options(s)
    s.set_defaults(func=cmd_generate, needs_grammar=False)
    s = sub.add_parser("bench", help="run a shipped benchmark (jsonschemabench, maskbench, test-suite)",
                       add_help=False)
    s.add_argument("benchmark", choices=["jsonschemabench", "maskbench", "test-suite"])
    s.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options (--help for them)")
    s.set_defaults(func=cmd_bench, needs_grammar=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``constrained`` console script."""
    args = build_parser().parse_args(argv)
    if args.needs_grammar and not args.regex and not args.grammar:
        print("constrained: give a grammar file or --regex", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except ConstrainedError as e:
        print(f"constrained: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as e:
        print(f"constrained: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
