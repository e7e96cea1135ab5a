"""End-to-end checks of both vLLM routes, run inside vLLM's virtualenv (a file: vLLM
spawns workers).  Writes a JSON report that tests/test_vllm_end_to_end.py asserts on.

    python tests/vllm_scripts/offline.py MODEL_DIR CASES.json REPORT.json [--speculative] [--backend NAME]

(``--backend``: vLLM's structured-output backend for the ``structured_outputs`` requests,
default ``constrained``; the logits-processor checks run with ``constrained`` only.)

CASES.json: {"schemas": [...], "messages": [chat messages per schema], "max_tokens": N, "short_max_tokens": N}.
"""

import json
import sys
import time


def main() -> None:
    model, cases_path, report_path = sys.argv[1:4]
    speculative = "--speculative" in sys.argv
    backend_name = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "constrained"
    cases = json.load(open(cases_path))
    import constrained.integrations.vllm as cv

    assert cv.register(), "the backend route did not register"
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kwargs = dict(model=model, dtype="float32", enforce_eager=True, gpu_memory_utilization=0.3, seed=0,
                  max_model_len=2048, structured_outputs_config={"backend": backend_name})
    if speculative:
        kwargs["speculative_config"] = {"method": "ngram", "num_speculative_tokens": 3,
                                        "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    t0 = time.time()
    llm = LLM(**kwargs)
    report = {"startup_s": time.time() - t0, "speculative": speculative}
    tok = llm.get_tokenizer()
    prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in cases["messages"]]
    schemas, max_tokens = cases["schemas"], cases["max_tokens"]

    engine = llm.llm_engine

    def run(params_list, key):
        """All requests into the engine at once (one batch); a refused one is recorded
        with its error and the others go on."""
        t = time.time()
        rows = {}
        for i, (prompt, params) in enumerate(zip(prompts, params_list)):
            rid = f"{key}-{i}"
            rows[rid] = {"text": None, "finish": None, "tokens": 0, "error": None}
            try:
                engine.add_request(rid, prompt, params)
            except Exception as e:          # noqa: BLE001 - the report says what was raised
                rows[rid]["error"] = f"{type(e).__name__}: {e}"
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    o = out.outputs[0]
                    rows[out.request_id].update(text=o.text, finish=o.finish_reason, tokens=len(o.token_ids))
        report[key] = list(rows.values())
        report[key + "_s"] = time.time() - t

    backend = [SamplingParams(temperature=0, max_tokens=max_tokens,
                              structured_outputs=StructuredOutputsParams(json=s)) for s in schemas]
    run(backend, "backend")
    if not speculative and backend_name == "constrained":
        lp = [SamplingParams(temperature=0, max_tokens=max_tokens, extra_args={"constrained": {"json_schema": s}})
              for s in schemas]
        run(lp, "logits_processor")
        short = [SamplingParams(temperature=0, max_tokens=cases["short_max_tokens"],
                                extra_args={"constrained": {"json_schema": s}}) for s in schemas]
        run(short, "logits_processor_short")
        sampled = [SamplingParams(temperature=1.0, seed=i, max_tokens=cases["short_max_tokens"],
                                  extra_args={"constrained": {"json_schema": s}}) for i, s in enumerate(schemas)]
        run(sampled, "logits_processor_sampled")
        plain = [SamplingParams(temperature=0, max_tokens=16)]
        run(plain, "unconstrained")
        errors = {}
        for name, params in [
            ("lp_bad_schema", SamplingParams(max_tokens=8, extra_args={"constrained": {"json_schema": {"type": 12}}})),
            ("lp_bad_spec", SamplingParams(max_tokens=8, extra_args={"constrained": {"regex": "a", "lark": "x"}})),
            ("backend_bad_schema", SamplingParams(max_tokens=8, structured_outputs=StructuredOutputsParams(
                json={"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}))),
        ]:
            try:
                llm.generate(["x"], params, use_tqdm=False)
                errors[name] = None
            except Exception as e:          # noqa: BLE001 - the report says what was raised
                errors[name] = f"{type(e).__name__}: {e}"
        report["errors"] = errors
        run(lp[:2], "after_errors")
    json.dump(report, open(report_path, "w"), indent=1)


if __name__ == "__main__":
    main()
