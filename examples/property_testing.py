"""Property-test a grammar you wrote against an independent reference.

The grammar: IPv4 addresses.  The reference: Python's ``ipaddress`` module.  A
first, naive grammar (``/[0-9]{1,3}/`` per octet) is unsound: the checker finds
the shortest address ``ipaddress`` rejects and says which tokens produced it.
The fixed grammar passes soundness (masked token walks), completeness (real
addresses under several tokenizations), mask exactness (against the slow
reference recognizer) and a hypothesis property over random derivations.

    python examples/property_testing.py              # byte-level vocabulary (fast)
    python examples/property_testing.py --llama3 ../shared/data/tokenizers/llama3

The same checks as a pytest file need no setup beyond the plugin's fixtures:

    def test_ipv4_grammar(compile_for_test):
        assert_sound(compile_for_test(FIXED), is_ipv4, walks=1000)
"""

from __future__ import annotations

import argparse
import ipaddress

from hypothesis import given, settings

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.testing import (
    SoundnessError,
    assert_complete,
    assert_mask_exact,
    assert_sound,
    grammar_strings,
)

NAIVE = r"""
start: OCTET "." OCTET "." OCTET "." OCTET
OCTET: /[0-9]{1,3}/
"""

FIXED = r"""
start: OCTET "." OCTET "." OCTET "." OCTET
OCTET: /25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]/
"""


def is_ipv4(text: str) -> bool:
    """The independent reference: what Python's standard library accepts."""
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama3", metavar="DIR", help="a Hugging Face tokenizer directory instead of bytes")
    args = ap.parse_args()
    if args.llama3:
        from transformers import AutoTokenizer
        vocab = TokenVocabulary.from_hf(AutoTokenizer.from_pretrained(args.llama3))
    else:
        vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])

    naive = compile_grammar(Grammar.from_lark(NAIVE), vocab, cache_dir=None)
    try:
        assert_sound(naive, is_ipv4, walks=300)
    except SoundnessError as e:
        print("naive grammar, as expected:", str(e)[:300])
    else:
        raise SystemExit("the naive grammar should have failed")

    fixed = compile_grammar(Grammar.from_lark(FIXED), vocab, cache_dir=None)
    print("fixed grammar, finished walks accepted:", assert_sound(fixed, is_ipv4, walks=1000))
    addresses = ["0.0.0.0", "127.0.0.1", "192.168.10.254", "255.255.255.255", "8.8.4.4", "10.0.199.9"]
    print("token paths accepted:", assert_complete(fixed, addresses, tokenizations=4))
    if not args.llama3:      # the reference mask walks a token trie in Python: small vocabularies
        print("states with exact masks:", assert_mask_exact(fixed, walks=20))

    @settings(max_examples=300, deadline=None)
    @given(grammar_strings(Grammar.from_lark(FIXED)))
    def every_derivation_is_an_address(text: bytes) -> None:
        assert is_ipv4(text.decode()), text

    every_derivation_is_an_address()
    print("300 hypothesis derivations: all valid addresses")


if __name__ == "__main__":
    main()
