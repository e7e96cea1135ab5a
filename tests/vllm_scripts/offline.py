"""End-to-end checks of both vLLM routes, run inside vLLM's virtualenv (a file: vLLM
spawns workers).  Writes a JSON report that tests/test_vllm_end_to_end.py asserts on.

    python tests/vllm_scripts/offline.py MODEL_DIR CASES.json REPORT.json [--speculative]

CASES.json: {"schemas": [...], "messages": [chat messages per schema], "max_tokens": N, "short_max_tokens": N}.
"""

import json
import sys
import time


def main() -> None:
    model, cases_path, report_path = sys.argv[1:4]
    speculative = "--speculative" in sys.argv
    cases = json.load(open(cases_path))
    import constrained.integrations.vllm as cv

    assert cv.register(), "the backend route did not register"
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kwargs = dict(model=model, dtype="float32", enforce_eager=True, gpu_memory_utilization=0.3, seed=0,
                  max_model_len=2048, structured_outputs_config={"backend": "constrained"})
    if speculative:
        kwargs["speculative_config"] = {"method": "ngram", "num_speculative_tokens": 3,
                                        "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    t0 = time.time()
    llm = LLM(**kwargs)
    report = {"startup_s": time.time() - t0, "speculative": speculative}
    tok = llm.get_tokenizer()
    prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in cases["messages"]]
    schemas, max_tokens = cases["schemas"], cases["max_tokens"]

    def run(params_list, key):
        t = time.time()
        outs = llm.generate(prompts[: len(params_list)], params_list, use_tqdm=False)
        report[key] = [{"text": o.outputs[0].text, "finish": o.outputs[0].finish_reason,
                        "tokens": len(o.outputs[0].token_ids)} for o in outs]
        report[key + "_s"] = time.time() - t

    backend = [SamplingParams(temperature=0, max_tokens=max_tokens,
                              structured_outputs=StructuredOutputsParams(json=s)) for s in schemas]
    run(backend, "backend")
    if not speculative:
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
