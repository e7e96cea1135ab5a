"""Both vLLM routes and the OpenAI-compatible server, end to end on the default model.

vLLM runs in its own virtualenv (``python -m constrained.integrations.vllm.venv``, part
of the README's test command); each test runs a script of tests/vllm_scripts/ there
and asserts on its JSON report.  Without that venv the tests skip, saying how to make it.

What is checked: every output of either route is valid for its schema, or was cut by
``max_tokens`` where the schema's shortest output does not fit (computed here with the
same vocabulary); bad specs fail their own request with a validation error and the
engine goes on; requests without a constraint are untouched; greedy outputs through the
backend route are the same with n-gram speculative decoding as without.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from process_group import run_in_group

from constrained.integrations.vllm.venv import vllm_python

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "vllm_scripts"
DEV = REPO.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"
N_SCHEMAS = 8
MAX_TOKENS = 64
SHORT_MAX_TOKENS = 20

pytestmark = pytest.mark.skipif(vllm_python() is None,
                                reason="no vLLM venv: python -m constrained.integrations.vllm.venv")


def _model_dir() -> str:
    from constrained.models.loading import default_model_dir

    return str(default_model_dir())


SCRIPT_TIMEOUT = 600   # seconds per script: under pytest's --timeout, so a stuck engine fails here, killed


def _run(script: str, *args: str, timeout: int = SCRIPT_TIMEOUT) -> None:
    """Run a script of tests/vllm_scripts in the vLLM venv; fail with its output when it
    fails or outlives ``timeout``.  The script and everything it starts (vLLM's engine
    processes, the server) form one process group, ended whatever happens
    (`process_group.run_in_group`): nothing it left behind holds a pipe of this process
    or the CPUs of the tests after it."""
    rc, output = run_in_group([str(vllm_python()), str(SCRIPTS / script), *args], timeout)
    if rc is None:
        pytest.fail(f"{script} did not finish within {timeout} s (killed):\n{output[-6000:]}")
    if rc:
        pytest.fail(f"{script} exited with {rc}:\n{output[-6000:]}")


def test_the_venv_keeps_its_own_numba_cache():
    # vLLM's numba is another version than the tests': sharing the working tree's
    # __pycache__ would make each side recompile and overwrite the other's object code
    import numba

    out = subprocess.run([str(vllm_python()), "-c", "import numba; print(numba.__version__); "
                          "print(numba.config.CACHE_DIR)"], capture_output=True, text=True, timeout=120)
    version, cache_dir = out.stdout.split("\n")[:2]
    assert cache_dir and Path(cache_dir).resolve().is_relative_to(Path(vllm_python()).parents[1].resolve()), out
    assert numba.config.CACHE_DIR != cache_dir or version == numba.__version__


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    from constrained.bench.jsonschemabench import prompt_messages, round_robin_by_split

    rows = [json.loads(line) for line in gzip.open(DEV)] if DEV.is_file() else []
    if not rows:
        pytest.skip(f"no dev set at {DEV}")
    picked = round_robin_by_split(rows)[:N_SCHEMAS]
    data = {"schemas": [r["schema"] for r in picked], "ids": [r["id"] for r in picked],
            "messages": [prompt_messages(r["schema"], schema_chars=1500) for r in picked],
            "max_tokens": MAX_TOKENS, "short_max_tokens": SHORT_MAX_TOKENS}
    path = tmp_path_factory.mktemp("vllm") / "cases.json"
    path.write_text(json.dumps(data))
    return path, data


@pytest.fixture(scope="module")
def shortest(cases):
    """Tokens in each schema's shortest output, with the model's vocabulary."""
    from constrained.bench.vllm_serving import shortest_output_tokens

    counts = shortest_output_tokens(dict(enumerate(cases[1]["schemas"])), _model_dir())
    return [counts[k] for k in range(len(cases[1]["schemas"]))]


def _check_outputs(outputs, schemas, shortest, budget):
    valid = 0
    for o, schema, need in zip(outputs, schemas, shortest):
        try:
            jsonschema.validators.validator_for(schema)(schema).validate(json.loads(o["text"]))
            valid += 1
        except (ValueError, jsonschema.ValidationError) as e:
            assert o["finish"] == "length" and (need is None or need > budget), \
                f"invalid output {o['text']!r} ({e}) although a {need}-token output fits in {budget}"
    return valid


@pytest.fixture(scope="module")
def offline(cases, tmp_path_factory):
    report = tmp_path_factory.mktemp("vllm") / "offline.json"
    _run("offline.py", _model_dir(), str(cases[0]), str(report))
    return json.loads(report.read_text())


def test_offline_both_routes_give_valid_outputs(offline, cases, shortest):
    schemas = cases[1]["schemas"]
    for key, budget in [("backend", MAX_TOKENS), ("logits_processor", MAX_TOKENS),
                        ("logits_processor_short", SHORT_MAX_TOKENS), ("logits_processor_sampled", SHORT_MAX_TOKENS)]:
        assert len(offline[key]) == len(schemas)
        assert _check_outputs(offline[key], schemas, shortest, budget) >= len(schemas) // 2, key


def test_offline_bad_specs_fail_alone(offline):
    errors = offline["errors"]
    assert "VLLMValidationError" in errors["lp_bad_schema"] and "keyword 'type'" in errors["lp_bad_schema"]
    assert "exactly one of" in errors["lp_bad_spec"]
    assert "VLLMValidationError" in errors["backend_bad_schema"] and "$ref" in errors["backend_bad_schema"]
    assert len(offline["after_errors"]) == 2 and all(o["tokens"] for o in offline["after_errors"])
    assert offline["unconstrained"][0]["tokens"] == 16        # no constraint: the model's own 16 tokens


def test_speculative_ngram_backend_matches_plain_greedy(offline, cases, tmp_path_factory):
    report = tmp_path_factory.mktemp("vllm") / "speculative.json"
    _run("offline.py", _model_dir(), str(cases[0]), str(report), "--speculative")
    spec = json.loads(report.read_text())
    assert spec["speculative"]
    assert [o["text"] for o in spec["backend"]] == [o["text"] for o in offline["backend"]]


def test_openai_server_both_routes(tmp_path):
    report = tmp_path / "server.json"
    _run("server.py", _model_dir(), str(report))
    r = json.loads(report.read_text())
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
              "required": ["name", "age"], "additionalProperties": False}
    for key in ("response_format", "vllm_xargs", "vllm_xargs_short"):
        assert r[key]["status"] == 200, r[key]
        jsonschema.validate(json.loads(r[key]["text"]), schema)
    assert r["vllm_xargs_short"]["usage"]["completion_tokens"] <= 14
    assert r["response_format_short"]["status"] == 200
    assert r["bad_schema"]["status"] == 400 and "keyword 'type'" in r["bad_schema"]["error"]
    assert r["bad_xargs"]["status"] == 400 and "regex" in r["bad_xargs"]["error"]
    assert r["after_errors"] == 200
