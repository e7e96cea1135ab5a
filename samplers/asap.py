"""ASAp: adaptive sampling with approximate expected futures (Park et al., "Grammar-Aligned
Decoding", NeurIPS 2024, arXiv 2405.21047).

Masked sampling draws token ``t`` after prefix ``x`` with probability
``p(t|x)·1[t ∈ M(x)]`` renormalised; the grammar-conditioned target ``Q(w) ∝
P(w)·1[w ∈ L]`` needs instead ``p(t|x)·c(xt)``, where ``c(x)`` — the expected future
grammaticality — is the probability that the model's own continuation of ``x``
ends in the language.  ASAp keeps a trie of the prefixes it visited, holding the
model's conditionals (allowed tokens only) and an over-approximation ``ĉ ≥ c``
per child: 1 until learned (so the first sample is exactly masked sampling).  A
sample walks the trie drawing ``t ∝ p(t|x)·ĉ(xt)``; afterwards ``ĉ`` is recomputed
bottom-up along the sampled path, ``ĉ(x) = Σ_{t∈M(x)} p(t|x)·ĉ(xt)``.  ``ĉ`` only
decreases, outputs are always in the language, and the sampling distribution
converges to ``Q`` as samples accumulate (exactly ``Q`` once ``ĉ = c``).  The model
is called only at prefixes the trie has not seen.

The trie belongs to one (prompt, constraint, temperature): `ASApTrie` can be saved
and loaded to keep refining later; using it with another prompt is a `SamplerError`.

Example:
    >>> import torch
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> from constrained.models import TableModel
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> compiled = compile_grammar(Grammar.from_regex("a|ab|bb"), vocab, cache_dir=None)
    >>> lm = TableModel(vocab, seed=3)
    >>> asap = ASAp(n_samples=20)
    >>> out = asap.run(lm.session([]), compiled.matcher(), lm.eos_ids, max_tokens=4,
    ...                generator=torch.Generator().manual_seed(0))
    >>> {bytes(b"ab"[t] for t in s.tokens) for s in out} <= {b"a", b"ab", b"bb"}
    True
    >>> 0.0 < asap.trie.root_estimate() <= 1.0
    True
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from constrained.errors import SamplerError
from samplers.base import Sample, uniform

TRIE_FORMAT = 1


class _Node:
    """A visited prefix: its allowed tokens and their probabilities (8 bytes per allowed
    token), and ``ĉ`` of the children learned so far (the others are 1)."""

    __slots__ = ("tokens", "logp", "chat", "children", "index")

    def __init__(self, tokens: np.ndarray, logp: np.ndarray) -> None:
        self.tokens = tokens.astype(np.int32)           # allowed ids (EOS ids included when accepting)
        self.logp = logp.astype(np.float32)             # log p(t | prefix)
        self.chat: dict[int, float] = {}                # position in `tokens` -> learned ĉ(child)
        self.children: dict[int, _Node] = {}
        self.index = {int(t): i for i, t in enumerate(self.tokens)}

    def weights(self) -> np.ndarray:
        """``p(t)·ĉ(child)`` for every allowed token."""
        w = np.exp(self.logp.astype(np.float64))
        for i, c in self.chat.items():
            w[i] *= c
        return w

    def estimate(self) -> float:
        """``ĉ`` of this prefix: ``Σ p(t)·ĉ(child)`` (0 where nothing is allowed)."""
        return float(self.weights().sum())


class ASApTrie:
    """The visited prefixes of one (prompt, constraint, temperature) with their learned
    ``ĉ``; `save` / `load` persist it (gzipped JSON)."""

    def __init__(self, key: dict | None = None) -> None:
        self.key = key
        self.root: _Node | None = None
        self.samples = 0

    def root_estimate(self) -> float:
        """``ĉ`` at the root: an upper bound on the probability that the model's own
        sampling ends inside the constraint (it tightens as samples accumulate)."""
        return 1.0 if self.root is None else self.root.estimate()

    def node_count(self) -> int:
        count, stack = 0, [self.root] if self.root is not None else []
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children.values())
        return count

    def node(self, prefix) -> _Node | None:
        """The node of the visited ``prefix`` (None if it was never visited)."""
        node = self.root
        for t in prefix:
            if node is None:
                return None
            node = node.children.get(int(t))
        return node

    def conditional(self, prefix) -> dict[int, float]:
        """ASAp's current next-token distribution after the visited ``prefix``:
        ``p(t)·ĉ(xt)`` normalised (equals the target's conditional once ``ĉ = c``)."""
        node = self.node(prefix)
        if node is None:
            raise SamplerError(f"the prefix {list(prefix)[:16]} was never visited")
        w = node.weights()
        total = w.sum()
        return {int(t): float(x / total) for t, x in zip(node.tokens, w)} if total > 0 else {}

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the trie to ``path`` (gzipped JSON; nodes flattened, parents first)."""
        nodes = []
        stack: list[tuple[int, int | None, _Node]] = [(-1, None, self.root)] if self.root is not None else []
        while stack:
            parent, token, node = stack.pop()
            nodes.append({"parent": parent, "token": token, "tokens": node.tokens.tolist(),
                          "logp": node.logp.tolist(), "chat": [[i, c] for i, c in node.chat.items()]})
            me = len(nodes) - 1
            stack.extend((me, t, child) for t, child in node.children.items())
        doc = {"format": TRIE_FORMAT, "key": self.key, "samples": self.samples, "nodes": nodes}
        with gzip.open(Path(path), "wt", encoding="utf-8") as f:
            json.dump(doc, f)

    @classmethod
    def load(cls, path) -> ASApTrie:
        """Read a trie written by `save`; `SamplerError` if the file is not one."""
        try:
            with gzip.open(Path(path), "rt", encoding="utf-8") as f:
                doc = json.load(f)
            if doc.get("format") != TRIE_FORMAT:
                raise SamplerError(f"{path}: not an ASAp trie of format {TRIE_FORMAT}")
            trie = cls(doc["key"])
            trie.samples = int(doc["samples"])
            built: list[_Node] = []
            for rec in doc["nodes"]:
                node = _Node(np.asarray(rec["tokens"], dtype=np.int64), np.asarray(rec["logp"], dtype=np.float64))
                node.chat = {int(i): float(c) for i, c in rec["chat"]}
                if len(node.logp) != len(node.tokens) or any(not 0 <= i < len(node.tokens) for i in node.chat):
                    raise SamplerError(f"{path}: a node's arrays do not match")
                if rec["parent"] < 0:
                    trie.root = node
                else:
                    built[rec["parent"]].children[int(rec["token"])] = node
                built.append(node)
            return trie
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            raise SamplerError(f"{path}: cannot read an ASAp trie: {e}") from None


class ASAp:
    """Grammar-aligned sampling (see the module docstring).  ``run`` draws ``n_samples``
    samples for the source's prompt, refining the trie after each; the trie persists
    across calls for the same prompt (``self.trie``; pass ``trie=`` to continue a saved
    one).  ``Sample.info["estimate"]`` is the root's ``ĉ`` after that sample;
    ``Sample.logprob`` is the sample's log-probability (EOS included) under the model
    at ``temperature``.  Memory: 8 bytes per allowed token per visited prefix; with a
    real vocabulary (most tokens allowed inside a JSON string) ``min_prob`` (e.g.
    1e-9) drops the allowed tokens less likely than that at each prefix — a bounded
    distortion (at most ``|V|·min_prob`` of probability per step) that keeps a
    node to the few thousand tokens that matter."""

    def __init__(self, n_samples: int = 1, *, temperature: float = 1.0, trie: ASApTrie | None = None,
                 min_prob: float = 0.0) -> None:
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, not {n_samples}")
        if not 0.0 <= min_prob < 1.0:
            raise ValueError(f"min_prob must be in [0, 1), not {min_prob}")
        self.n_samples = n_samples
        self.temperature = temperature
        self.trie = trie
        self.min_prob = min_prob

    def _key(self, source, constraint, max_tokens: int) -> dict:
        prompt = getattr(source, "tokens", None)
        compiled = getattr(constraint, "compiled", None)
        grammar = getattr(getattr(compiled, "grammar", None), "content_hash", None)
        return {"prompt": list(prompt) if prompt is not None else None, "temperature": self.temperature,
                "max_tokens": max_tokens, "min_prob": self.min_prob, "constraint": grammar() if callable(grammar) else type(constraint).__name__}

    def run(self, source, constraint, eos_ids: tuple[int, ...], *, max_tokens: int,
            generator=None) -> list[Sample]:
        key = self._key(source, constraint, max_tokens)
        if self.trie is None:
            self.trie = ASApTrie(key)
        elif self.trie.key != key:
            raise SamplerError("this ASAp trie was learned for another prompt, constraint, temperature or "
                               "max_tokens; start a new ASAp (or trie) for this one")
        return [self._sample(source, constraint, [int(t) for t in eos_ids], max_tokens, generator)
                for _ in range(self.n_samples)]

    # ------------------------------------------------------------------ one sample
    def _expand(self, session, constraint, eos: list[int], depth: int, max_tokens: int) -> _Node:
        import torch

        from constrained.masks import unpack_mask

        logits = session.logits().double()
        logp = torch.log_softmax(logits / max(self.temperature, 1e-6), dim=-1).cpu().numpy()
        if depth >= max_tokens:
            allowed = np.array([t for t in eos if constraint.is_accepting()], dtype=np.int64)
        else:
            bits = unpack_mask(constraint.mask(), logp.shape[0])
            allowed = np.flatnonzero(bits).astype(np.int64)
        keep = np.isfinite(logp[allowed])
        if self.min_prob > 0:
            keep &= logp[allowed] >= np.log(self.min_prob)
        allowed = allowed[keep]
        return _Node(allowed, logp[allowed].astype(np.float64))

    def _sample(self, source, constraint, eos: list[int], max_tokens: int, generator) -> Sample:
        import torch

        trie = self.trie
        assert trie is not None                  # run() made it
        matcher = constraint.fork()
        session = None                       # forked from the source when the model is first needed
        fed = 0
        path: list[_Node] = []               # path[d]: the node after tokens[:d]
        tokens: list[int] = []
        node = trie.root
        logprob = 0.0
        while True:
            if node is None:
                if session is None:
                    session = source.fork()
                if fed < len(tokens):
                    session.extend(tokens[fed:])
                    fed = len(tokens)
                node = self._expand(session, matcher, eos, len(tokens), max_tokens)
                if path:
                    path[-1].children[tokens[-1]] = node
                else:
                    trie.root = node
            path.append(node)
            w = node.weights()
            total = w.sum()
            if not total > 0:
                stop = "dead_end" if len(tokens) < max_tokens else "max_tokens"
                break
            u = float(uniform(1, generator, torch.float64)) * total
            i = min(int(np.searchsorted(np.cumsum(w), u, side="right")), len(w) - 1)
            t = int(node.tokens[i])
            logprob += float(node.logp[i])
            if not matcher.advance(t):       # pragma: no cover - the mask allowed it
                raise RuntimeError(f"the constraint refused token {t} that its mask allowed")
            if t in eos:
                stop = "eos"
                break
            tokens.append(t)
            node = node.children.get(t)
        for d in range(len(path) - 1, 0, -1):      # ĉ back-propagated along the sampled path
            parent = path[d - 1]
            parent.chat[parent.index[tokens[d - 1]]] = path[d].estimate()
        trie.samples += 1
        return Sample(tokens, logprob, stop, info={"estimate": trie.root_estimate()})
