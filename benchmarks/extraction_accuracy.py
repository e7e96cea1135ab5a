"""Extraction accuracy, grounded vs ungrounded (`constrained.extract_many(..., grounded=...)`).

Tasks: MaskBench dev records (all splits, taken round-robin by split) whose first valid
instance is a flat object (2 to 8 members, scalars only, at least one non-empty
string, none over 80 characters), the schema under ``--max-schema`` characters (the
schema is part of the prompt, whose length sets the cost of every step on a CPU).  The instance's members are written as
prose: one template sentence per member (``The customer id is 42.``, ``We recorded
smtp.gmail.com as the email smtp server.``), key names turned into words, members
shuffled, templates drawn with a fixed seed.  The model (the default,
SmolLM2-135M-Instruct, greedy, `extract`'s prompt and grammar) extracts the schema's
value from the prose once per mode (``--modes``, `MODE_OPTIONS`: the `extract`
options of each): ``ungrounded``, ``grounded`` (``grounded=True``: every free string
value a span of the prose), ``complete`` (``complete=True``: every declared member
asked for, answered or null), ``grounded-complete``, ``grounded-all``/
``grounded-all-complete`` (``grounded="all"``: numbers grounded too).  ``--absent``
leaves one member per task out of the prose (and out of the fields scored) and
reports how often each mode fills it anyway.  ``--nested`` takes instead the records
whose first valid instance nests objects (at least one member an object; 2 to 8 scalar
leaves, the same limits on strings): each leaf is a field, its sentence names the path
in words (``The address city is Paris.``), scored at its path.  ``--arrays`` takes flat
objects with at least one array of 2 to 4 scalars (strings of at most 40 characters
without a comma or " and "; the other limits as for flat ones): the array is one field, written as a list in its sentence
(``The tags is red, green and blue.``) and scored as a whole.

``--evidence`` (flat tasks) grounds each root member in chosen sentences of the prose
instead of the whole of it (``"x-grounded-text"`` on the member; the prompt is the
same): ``gold``, the sentence the prose wrote its value in (the ceiling of choosing
the sentence); ``top1`` / ``top2``, the one or two sentences the model scores highest
for its key (`sentence_scores`).

Scored per *field* of the instance: exact match of the extracted member (same JSON
value: ``"587"`` is not ``587``); a missing member is wrong.  Also: the share of
tasks whose every field matches, outputs that do not validate against the schema
(``invalid``: jsonschema with format checking, the draft's validator; must be 0),
texts that raised (``errors``; each text's budget is ``--max-tokens``, raised to the
shortest output plus a slack where some mode has no output within it, the same for every
mode: `task_budget`), output tokens per second (the value re-encoded) and the wall time per text (`extract`, one text at a
time; compiling each text's grounded grammar included; the modes alternate their order
per task, so none gets all the warm caches).

    python benchmarks/extraction_accuracy.py [--tasks 80] [--max-tokens 128] [--max-schema 3000]
        [--modes ungrounded grounded ...] [--absent] [--nested | --arrays] [--evidence gold|top1|top2]
        [--data ../shared/data/maskbench/dev.jsonl.gz] [--out benchmarks/results] [--name extraction_accuracy]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"
MODES = ("ungrounded", "grounded")
MODE_OPTIONS = {
    "ungrounded": {},
    "grounded": {"grounded": True},
    "complete": {"complete": True},
    "grounded-complete": {"grounded": True, "complete": True},
    "grounded-all": {"grounded": "all"},
    "grounded-all-complete": {"grounded": "all", "complete": True},
}
"""`extract` options per mode (``--modes``; the default runs the first two)."""
TEMPLATES = (
    "The {k} is {v}.",
    "Its {k}: {v}.",
    "For the {k}, use {v}.",
    "We recorded {v} as the {k}.",
    "Note that the {k} is set to {v}.",
    "{K} — {v}.",
    "As for the {k}, it is {v}.",
)
OPENERS = ("Here are the details.", "A short note on the record follows.", "Details from the form:",
           "The following was reported.")


def words(key: str) -> str:
    """``smtpServerName`` / ``smtp_server_name`` -> ``smtp server name``."""
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)
    return re.sub(r"[_\-.]+", " ", key).strip().lower() or key


def leaves(instance: dict, path: tuple = ()) -> list[tuple[tuple, object]]:
    """``(path, value)`` of each scalar leaf of ``instance`` (nested objects walked in order).

    Example: ``leaves({"a": 1, "b": {"c": "x"}})`` is ``[(("a",), 1), (("b", "c"), "x")]``."""
    out: list[tuple[tuple, object]] = []
    for k, v in instance.items():
        out += leaves(v, path + (k,)) if isinstance(v, dict) else [(path + (k,), v)]
    return out


def at(value, path: tuple):
    """The member of ``value`` at ``path``; `MISSING` where there is none."""
    for k in path:
        if not isinstance(value, dict) or k not in value:
            return MISSING
        value = value[k]
    return value


MISSING = object()


def without(instance: dict, path: tuple) -> dict:
    """``instance`` less its leaf at ``path`` (objects left empty dropped too)."""
    out = {}
    for k, v in instance.items():
        if k == path[0] and len(path) == 1:
            continue
        if k == path[0] and isinstance(v, dict):
            v = without(v, path[1:])
            if not v:
                continue
        out[k] = v
    return out


def spelled(value) -> str:
    """How a value is written in the prose: strings as they are, arrays as a list in
    words (``a, b and c``), others as JSON."""
    if isinstance(value, list):
        items = [spelled(v) for v in value]
        return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)
    return value if isinstance(value, str) else json.dumps(value)


def _listed(value) -> bool:
    """An array the ``--arrays`` prose can write unambiguously (module docstring)."""
    return isinstance(value, list) and 2 <= len(value) <= 4 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool)
        or isinstance(x, str) and x.strip() and len(x) <= 40 and "," not in x and " and " not in x and "\n" not in x
        for x in value)


def prose(instance: dict, rng: random.Random) -> str:
    """The instance's members as template sentences, in a shuffled order."""
    items = leaves(instance)
    rng.shuffle(items)
    out = [rng.choice(OPENERS)]
    for path, v in items:
        t = rng.choice(TEMPLATES)
        k = " ".join(words(p) for p in path)
        out.append(t.format(k=k, K=k.capitalize(), v=spelled(v)))
    return " ".join(out)


def _usable(inst, nested: bool, arrays: bool = False) -> bool:
    """Whether a record's first valid instance makes a task (module docstring)."""
    if not isinstance(inst, dict):
        return False
    if nested and not any(isinstance(v, dict) and v for v in inst.values()):
        return False
    if arrays and not any(_listed(v) for v in inst.values()):
        return False
    values = [v for _, v in leaves(inst)] if nested else list(inst.values())
    if not 2 <= len(values) <= 8 or not all(isinstance(v, (str, int, float, bool)) or arrays and _listed(v)
                                            for v in values):
        return False
    return any(isinstance(v, str) and v.strip() for v in values) \
        and not any(isinstance(v, str) and (len(v) > 80 or "\n" in v) for v in values)


def tasks(n: int, path: Path = DATA, seed: int = 0, max_schema: int = 3000, absent: bool = False,
          nested: bool = False, arrays: bool = False) -> list[dict]:
    """``n`` tasks ``{id, split, schema, instance, text}``, round-robin over splits.

    ``absent``: one leaf per task (drawn with a fixed seed) is left out of the prose
    and of the instance scored (``task["absent"]``, its path): how often a mode fills a
    member the text does not give.  ``nested``: instances that nest objects, ``arrays``:
    flat ones with arrays (module docstring), instead of flat ones of scalars."""
    by_split: dict[str, list[dict]] = defaultdict(list)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            valid = [t["data"] for t in rec.get("tests", []) if t.get("valid")]
            if not valid or not _usable(valid[0], nested, arrays):
                continue
            inst = valid[0]
            if len(json.dumps(rec["schema"])) >= max_schema:
                continue
            by_split[rec["split"]].append({"id": rec["id"], "split": rec["split"], "schema": rec["schema"],
                                           "instance": inst})
    rng = random.Random(seed)
    for rows in by_split.values():
        rng.shuffle(rows)
    out: list[dict] = []
    splits = sorted(by_split)
    while len(out) < n and any(by_split.values()):
        for s in splits:
            if by_split[s] and len(out) < n:
                out.append(by_split[s].pop())
    for task in out:
        if absent:
            key = random.Random(f"absent:{seed}:{task['id']}").choice(sorted(p for p, _ in leaves(task["instance"])))
            task["absent"] = list(key)
            task["instance"] = without(task["instance"], key)
        task["text"] = prose(task["instance"], random.Random(f"{seed}:{task['id']}"))
    return out


EVIDENCE = ("gold", "top1", "top2")
"""What ``--evidence`` restricts each member's spans to (module docstring)."""
KEY_QUESTION = "Text: {s}\nWhich field does this text give a value for? Answer with the field name."


def sentences(text: str) -> list[str]:
    """``text`` cut at its sentence ends (the grounding's own: `sentence_ends`), stripped."""
    from constrained.automata.substrings import sentence_ends

    out, start = [], 0
    for end in sentence_ends(text):
        out.append(text[start:end + 1].strip())
        start = end + 1
    return out + ([text[start:].strip()] if text[start:].strip() else [])


def gold_sentence(parts: list[str], key: str, value) -> int | None:
    """The sentence of the prose that writes member ``key`` (its value and its key in words)."""
    hits = [i for i, s in enumerate(parts) if spelled(value) in s and words(key).lower() in s.lower()]
    return hits[0] if hits else None


def sentence_scores(lm, parts: list[str], keys: list[str]) -> dict[tuple[str, int], float]:
    """``{(key, sentence index): score}``: the model's log-probability of the key as the
    answer to `KEY_QUESTION` about the sentence, normalised over the keys per sentence
    (a log-softmax), every pair in one padded batch."""
    import torch

    tok, pairs = lm.tokenizer, []
    for i, part in enumerate(parts):
        prefix = tok.apply_chat_template([{"role": "user", "content": KEY_QUESTION.format(s=part)}],
                                         add_generation_prompt=True, tokenize=True)
        prefix = list(prefix if isinstance(prefix, list) else prefix["input_ids"])
        pairs += [(k, i, prefix, tok.encode(k, add_special_tokens=False)) for k in keys]
    seqs = [prefix + cont for _, _, prefix, cont in pairs]
    width, pad = max(map(len, seqs)), tok.pad_token_id or 0
    ids = torch.tensor([[pad] * (width - len(q)) + q for q in seqs])
    att = torch.tensor([[0] * (width - len(q)) + [1] * len(q) for q in seqs])
    with torch.no_grad():
        logp = lm.model(input_ids=ids, attention_mask=att, position_ids=(att.cumsum(-1) - 1).clamp(min=0)
                        ).logits.float().log_softmax(-1)
    raw = {}
    for row, (k, i, prefix, cont) in enumerate(pairs):
        at = width - len(seqs[row]) + len(prefix)
        raw[(k, i)] = sum(logp[row, at + j - 1, cont[j]].item() for j in range(len(cont)))
    out = {}
    for i in range(len(parts)):
        norm = torch.logsumexp(torch.tensor([raw[(k, i)] for k in keys]), 0).item()
        out.update({(k, i): raw[(k, i)] - norm for k in keys})
    return out


def with_evidence(lm, task: dict, evidence: str) -> dict:
    """``task``'s schema with each root member grounded in its chosen sentences
    (``x-grounded-text``; ``--evidence``)."""
    import copy

    schema, parts = copy.deepcopy(task["schema"]), sentences(task["text"])
    keys = list(task["instance"])
    scores = sentence_scores(lm, parts, keys) if evidence != "gold" else {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    for k in keys:
        if evidence == "gold":
            chosen = [gold_sentence(parts, k, task["instance"][k])]
        else:
            chosen = sorted(range(len(parts)), key=lambda i, k=k: scores[(k, i)], reverse=True)[:int(evidence[-1])]
        if isinstance(props, dict) and isinstance(props.get(k), dict) and None not in chosen:
            props[k]["x-grounded-text"] = " ".join(parts[i] for i in sorted(chosen))
    return schema


def same(a, b) -> bool:
    """Equal JSON values (booleans are not numbers; ``1 == 1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _valid(schema, value) -> bool:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator) \
        if isinstance(schema, dict) else jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)


def run(model: str, n_tasks: int, max_tokens: int, data: Path = DATA, log: Path | None = None,
        max_schema: int = 3000, ids: list[str] | None = None, modes: tuple[str, ...] = MODES,
        absent: bool = False, nested: bool = False, arrays: bool = False, evidence: str | None = None) -> dict:
    from _environment import environment

    import constrained
    from constrained.models import LanguageModel

    lm = LanguageModel.load(model)
    rows = tasks(n_tasks, data, max_schema=max_schema, absent=absent, nested=nested, arrays=arrays)
    if ids:
        rows = [t for t in rows if t["id"] in ids]
    results = {mode: [] for mode in modes}
    seconds = {mode: 0.0 for mode in modes}
    for i, task in enumerate(rows):
        budget = task_budget(lm, task, max_tokens, modes)
        for mode in (modes if i % 2 == 0 else modes[::-1]):
            t0 = time.perf_counter()
            try:
                schema = with_evidence(lm, task, evidence) if evidence else task["schema"]
                value = constrained.extract(schema, task["text"], model=lm, max_tokens=budget, **MODE_OPTIONS[mode])
            except Exception as e:  # noqa: BLE001 - recorded per text
                value = e
            took = time.perf_counter() - t0
            seconds[mode] += took
            row = score(task, value)
            row["seconds"] = took
            row["max_tokens"] = budget
            row["tokens"] = len(lm.vocab.encode(json.dumps(value, ensure_ascii=False, separators=(",", ":")))) \
                if row["output"] is not None else 0
            results[mode].append(row)
            if log is not None:
                with log.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"mode": mode, **results[mode][-1]}, ensure_ascii=False, default=str) + "\n")
        print(f"{i + 1}/{len(rows)} " + "  ".join(
            f"{m}: {sum(r['correct'] for r in results[m])}/{sum(r['fields'] for r in results[m])}" for m in modes),
            flush=True)
    return {"environment": environment(lm), "model": model, "tasks": len(rows), "max_tokens": max_tokens,
            "budgets_raised": sum(r["max_tokens"] > max_tokens for r in results[modes[0]]),
            "absent": absent, "nested": nested, "arrays": arrays, "evidence": evidence,
            "modes": {m: MODE_OPTIONS[m] for m in modes},
            "per_task": {m: results[m] for m in modes}, "summary": {m: summary(results[m]) for m in modes}}


def task_budget(lm, task: dict, max_tokens: int, modes) -> int:
    """The budget every mode gets for ``task``: ``max_tokens``, raised where some mode's
    grammar (its schema, grounded in the task's text or not, every member asked for or
    not) has no output within it (`constrained.bench.jsonschemabench.budget_for`: the
    shortest output plus a slack), so no text fails for a budget nothing fits in."""
    from constrained import compile_grammar
    from constrained.app import decoding_schema, extraction_grammar
    from constrained.bench.jsonschemabench import budget_for

    budget = max_tokens
    for mode in modes:      # (compiled apart from `extract`'s cache: its compile stays in the timed s/text)
        options = MODE_OPTIONS[mode]
        decoded, _ = decoding_schema(task["schema"], bool(options.get("complete")))
        grammar = extraction_grammar(decoded, task["text"], grounded=options.get("grounded", False))
        budget = max(budget, budget_for(compile_grammar(grammar, lm.vocab, cache_dir=None).matcher(), max_tokens))
    return budget


def from_log(log: Path, model: str = "default", data: Path = DATA, nested: bool = False,
             arrays: bool = False) -> dict:
    """Results from a run's JSON lines (an interrupted run: the tasks done in both modes)."""
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    if any("gold" not in r for r in rows):          # logs written before rows carried their instance
        absent = any("absent_filled" in r for r in rows)
        by_id = {t["id"]: t for t in tasks(10 ** 6, data, max_schema=10 ** 9, absent=absent, nested=nested,
                                            arrays=arrays)}
        for r in rows:
            r.setdefault("gold", by_id[r["id"]]["instance"])
    modes = tuple(dict.fromkeys(r["mode"] for r in rows))
    per = {m: {r["id"]: r for r in rows if r["mode"] == m} for m in modes}
    both = [i for i in per[modes[0]] if all(i in per[m] for m in modes)]
    results = {m: [per[m][i] for i in both] for m in modes}
    return {"model": model, "tasks": len(both), "modes": {m: MODE_OPTIONS.get(m) for m in modes},
            "per_task": results, "summary": {m: summary(results[m]) for m in modes}}


def score(task: dict, value) -> dict:
    """One task's row: per leaf of the instance (`leaves`), whether the output has the
    same JSON value at its path."""
    inst = task["instance"]
    gold = leaves(inst)
    row = {"id": task["id"], "split": task["split"], "fields": len(gold), "text": task["text"], "gold": inst}
    strings = sum(isinstance(v, str) for _, v in gold)
    if isinstance(value, Exception):
        return {**row, "correct": 0, "string_fields": strings,
                "string_correct": 0, "error": f"{type(value).__name__}: {value}"[:300], "invalid": False,
                "output": None}
    got = [at(value, p) for p, _ in gold]
    hits = [(v, g is not MISSING and same(g, v)) for (_, v), g in zip(gold, got)]
    if "absent" in task:
        row["absent_filled"] = at(value, tuple(task["absent"])) is not MISSING
    return {**row, "correct": sum(h for _, h in hits), "string_fields": strings,
            "string_correct": sum(h for v, h in hits if isinstance(v, str)),
            "error": None, "invalid": not _valid(task["schema"], value), "output": value}


def summary(rows: list[dict]) -> dict:
    fields = sum(r["fields"] for r in rows)
    sfields = sum(r["string_fields"] for r in rows)
    return {"texts": len(rows), "fields": fields,
            "field_accuracy": sum(r["correct"] for r in rows) / max(fields, 1),
            "string_field_accuracy": sum(r["string_correct"] for r in rows) / max(sfields, 1),
            "nonstring_field_accuracy": (sum(r["correct"] - r["string_correct"] for r in rows)
                                         / max(fields - sfields, 1)),
            "all_fields_right": sum(r["correct"] == r["fields"] for r in rows) / max(len(rows), 1),
            "invalid": sum(r["invalid"] for r in rows), "errors": sum(r["error"] is not None for r in rows),
            "seconds_per_text": sum(r["seconds"] for r in rows) / max(len(rows), 1),
            "output_tokens": sum(r["tokens"] for r in rows),
            "absent_filled": (sum(r.get("absent_filled", False) for r in rows) / max(len(rows), 1)
                              if any("absent_filled" in r for r in rows) else None),
            "tokens_per_second": sum(r["tokens"] for r in rows) / max(sum(r["seconds"] for r in rows), 1e-9)}


MISSES = ("right", "missing member", "not in the text", "another field's value", "overlaps the gold span",
          "other span", "wrong type / not an object")


def string_miss(row: dict, path: tuple) -> str:
    """Where the string field of ``row`` at ``path`` went (`MISSES`): right, or why not."""
    gold, out, text = at(row["gold"], path), row["output"], row["text"]
    if not isinstance(out, dict):
        return MISSES[6]
    got = at(out, path)
    if got is MISSING:
        return MISSES[1]
    if not isinstance(got, str):
        return MISSES[6]
    if got == gold:
        return MISSES[0]
    if got not in text:
        return MISSES[2]
    if any(got == spelled(v) for p, v in leaves(row["gold"]) if p != path):
        return MISSES[3]
    starts = [i for i in range(len(text)) if text.startswith(gold, i)]
    spans = [i for i in range(len(text)) if text.startswith(got, i)]
    if any(a < g + len(gold) and g < a + len(got) for a in spans for g in starts):
        return MISSES[4]
    return MISSES[5]


def misses(rows: list[dict]) -> dict[str, int]:
    """`string_miss` counts over the string fields of ``rows`` (errors: wrong type)."""
    out = dict.fromkeys(MISSES, 0)
    for r in rows:
        if "gold" not in r:
            continue
        for p, v in leaves(r["gold"]):
            if isinstance(v, str):
                out[string_miss(r, p) if r["error"] is None else MISSES[6]] += 1
    return out


def report(res: dict) -> str:
    s = res["summary"]
    modes = tuple(res["per_task"])
    absent = any(s[m].get("absent_filled") is not None for m in modes)
    header = ("| mode | texts | fields | field accuracy | string fields | other fields | all fields right "
              "| invalid | errors | s/text | output tokens/s |" + (" absent member filled |" if absent else ""))
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if absent else "")]
    for m in modes:
        r = s[m]
        lines.append(f"| {m} | {r['texts']} | {r['fields']} | {r['field_accuracy']:.3f} | "
                     f"{r['string_field_accuracy']:.3f} | {r['nonstring_field_accuracy']:.3f} | "
                     f"{r['all_fields_right']:.3f} | {r['invalid']} | {r['errors']} | {r['seconds_per_text']:.2f} | "
                     f"{r['tokens_per_second']:.2f} |" + (f" {r['absent_filled']:.3f} |" if absent else ""))
    by_split: dict[str, dict[str, list]] = defaultdict(lambda: {m: [0, 0] for m in modes})
    for m in modes:
        for r in res["per_task"][m]:
            by_split[r["split"]][m][0] += r["correct"]
            by_split[r["split"]][m][1] += r["fields"]
    lines += ["", "| string fields | " + " | ".join(MISSES) + " |", "|---|" + "---:|" * len(MISSES)]
    for m in modes:
        counts = misses(res["per_task"][m])
        lines.append(f"| {m} | " + " | ".join(str(counts[k]) for k in MISSES) + " |")
    lines += ["", "| split | fields | " + " | ".join(modes) + " |", "|---|---|" + "---|" * len(modes)]
    for split in sorted(by_split):
        cells = by_split[split]
        lines.append(f"| {split} | {cells[modes[0]][1]} | "
                     + " | ".join(f"{cells[m][0] / max(cells[m][1], 1):.3f}" for m in modes) + " |")
    return "\n".join(lines)


def engine_replay(log: Path, vocab, data: Path = DATA, repeats: int = 3) -> dict:
    """The engine's share of extraction throughput, without the model: each task's
    grounded output (valid under both grammars) is re-encoded canonically and walked
    token by token (``mask()`` + ``advance``) through a freshly compiled matcher of each
    mode (compiling the schema, and for grounded the text's grammar, included, as
    `extract` does per text; table memos persist across tasks as in a serving process).
    Modes alternate which goes first per task; the best of ``repeats`` rounds per mode."""
    from constrained import compile_grammar
    from constrained.app import extraction_grammar

    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    outputs = {r["id"]: r for r in rows if r["mode"] == "grounded" and r["output"] is not None}
    by_id = {t["id"]: t for t in tasks(10 ** 6, data, max_schema=10 ** 9) if t["id"] in outputs}
    best = {m: float("inf") for m in MODES}
    tokens = 0
    for _ in range(repeats):
        spent = {m: 0.0 for m in MODES}
        tokens = 0
        for i, (tid, r) in enumerate(outputs.items()):
            task = by_id.get(tid)
            if task is None:
                continue
            ids = vocab.encode(json.dumps(r["output"], ensure_ascii=False, separators=(",", ":")))
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                t0 = time.perf_counter()
                grammar = extraction_grammar(task["schema"], r["text"], grounded=mode == "grounded")
                m = compile_grammar(grammar, vocab).matcher()
                for t in ids:
                    m.mask()
                    if not m.advance(t):
                        raise AssertionError(f"{tid}: {mode} refused the grounded output")
                spent[mode] += time.perf_counter() - t0
            tokens += len(ids)
        best = {m: min(best[m], spent[m]) for m in MODES}
    return {"texts": len(outputs), "tokens": tokens,
            "ms_per_token": {m: 1e3 * best[m] / max(tokens, 1) for m in MODES},
            "grounded_over_ungrounded": best["grounded"] / max(best["ungrounded"], 1e-9)}


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = res["summary"]
    keys = [("field_accuracy", "all fields"), ("string_field_accuracy", "string fields"),
            ("nonstring_field_accuracy", "other fields"), ("all_fields_right", "texts all right")]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    modes = tuple(res["per_task"])
    width = 0.8 / len(modes)
    for i, m in enumerate(modes):
        ax.bar([j + (i - (len(modes) - 1) / 2) * width for j in range(len(keys))], [s[m][k] for k, _ in keys],
               width, label=m)
    ax.set_xticks(range(len(keys)), [label for _, label in keys])
    ax.set_ylim(0, 1)
    ax.set_ylabel("exact match")
    ax.set_title(f"Extraction accuracy, {res['tasks']} dev schemas, prose texts ({res['model']} model)")
    ax.legend(fontsize=8, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--tasks", type=int, default=80)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--max-schema", type=int, default=3000, help="longest schema (JSON characters) taken")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--name", default="extraction_accuracy")
    ap.add_argument("--replay", type=Path, help="only the engine replay of a finished run's JSON lines")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODE_OPTIONS),
                    help="extraction modes compared (extract options: MODE_OPTIONS)")
    ap.add_argument("--absent", action="store_true",
                    help="leave one member per task out of the text: how often each mode fills it anyway")
    ap.add_argument("--nested", action="store_true",
                    help="instances that nest objects, each scalar leaf a field (module docstring)")
    ap.add_argument("--arrays", action="store_true",
                    help="flat instances with arrays of scalars, each array one field (module docstring)")
    ap.add_argument("--evidence", choices=EVIDENCE,
                    help="ground each member in its gold sentence or the model's top 1/2 (module docstring)")
    ap.add_argument("--ids", nargs="+", help="re-run only these task ids, appending to the log (later rows win)")
    ap.add_argument("--summarize", type=Path, help="only the report of a run's JSON lines (interrupted runs too)")
    args = ap.parse_args()
    if args.summarize:
        res = from_log(args.summarize, args.model, args.data, args.nested, args.arrays)
        stem = args.summarize.with_suffix("")
        stem.with_suffix(".json").write_text(json.dumps(res, indent=1, ensure_ascii=False, default=str))
        stem.with_suffix(".md").write_text(report(res) + "\n")
        plot(res, stem.with_suffix(".png"))
        print(report(res))
        return
    if args.replay:
        from constrained.models import LanguageModel

        out = engine_replay(args.replay, LanguageModel.load(args.model).vocab, args.data)
        (args.replay.with_suffix(".engine.json")).write_text(json.dumps(out, indent=1))
        print(json.dumps(out, indent=1))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"{args.name}.jsonl"
    if not args.ids:
        log.unlink(missing_ok=True)
    if args.evidence and (args.nested or args.arrays):
        ap.error("--evidence takes flat tasks only")
    res = run(args.model, args.tasks, args.max_tokens, args.data, log, args.max_schema, args.ids, tuple(args.modes),
              args.absent, args.nested, args.arrays, args.evidence)
    if args.ids:                        # rows appended to the log; --summarize reports the whole log
        return
    (args.out / f"{args.name}.json").write_text(json.dumps(res, indent=1, ensure_ascii=False, default=str))
    table = report(res)
    (args.out / f"{args.name}.md").write_text(table + "\n")
    plot(res, args.out / f"{args.name}.png")
    print(table)


if __name__ == "__main__":
    main()
