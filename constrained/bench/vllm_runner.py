"""The vLLM side of ``constrained bench jsonschemabench --engine vllm``: one backend, one run.

Runs inside vLLM's virtualenv (`constrained.integrations.vllm.venv`); started by
`constrained.bench.vllm_serving`, which reads what it writes.

    python -m constrained.bench.vllm_runner JOBS.json RESULTS.jsonl --backend xgrammar

JOBS.json: ``{"model", "max_tokens", "jobs": [{"id", "schema", "messages"}]}``.  The
backend is one of vLLM's (``xgrammar``, ``guidance``, ``outlines``), ``constrained``
(this project's structured-output backend) or ``constrained-lp`` (this project's
logits processor, with the ``constrained`` backend engine-wide).  Every request is added
to one engine (one batch, as a server would see them) and greedily decoded; a request
the front end refuses is recorded as ``refused`` with the error, and the others go on.
Per request: the output text, finish reason, output tokens, time to first token (from
when all requests were added) and the error, if any; plus the run's wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _params(backend: str, schema, max_tokens: int):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    if backend == "constrained-lp":
        return SamplingParams(temperature=0, max_tokens=max_tokens, extra_args={"constrained": {"json_schema": schema}})
    return SamplingParams(temperature=0, max_tokens=max_tokens, structured_outputs=StructuredOutputsParams(json=schema))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m constrained.bench.vllm_runner")
    ap.add_argument("jobs")
    ap.add_argument("results")
    ap.add_argument("--backend", required=True)
    args = ap.parse_args(argv)
    spec = json.load(open(args.jobs))
    engine_backend = "constrained" if args.backend.startswith("constrained") else args.backend
    if engine_backend == "constrained":
        import constrained.integrations.vllm as cv

        cv.register()
    from vllm import LLM

    t0 = time.time()
    llm = LLM(model=spec["model"], dtype="float32", enforce_eager=True, gpu_memory_utilization=0.3, seed=0,
              max_model_len=spec.get("max_model_len", 4096), structured_outputs_config={"backend": engine_backend})
    startup = time.time() - t0
    tok = llm.get_tokenizer()
    engine = llm.llm_engine
    rows: dict[str, dict] = {}
    start = time.time()
    for job in spec["jobs"]:
        rid = str(job["id"])
        prompt = tok.apply_chat_template(job["messages"], tokenize=False, add_generation_prompt=True)
        row = rows[rid] = {"id": rid, "backend": args.backend, "outcome": None, "error": None}
        try:
            engine.add_request(rid, prompt, _params(args.backend, job["schema"], spec["max_tokens"]))
        except Exception as e:  # noqa: BLE001 - a refused request is a result, not a failure of the run
            row.update(outcome="refused", error=f"{type(e).__name__}: {e}"[:500])
    added = time.time()
    while engine.has_unfinished_requests():
        try:
            outputs = engine.step()
        except Exception as e:  # noqa: BLE001 - the engine died: every unfinished request failed
            for row in rows.values():
                if row["outcome"] is None:
                    row.update(outcome="engine_error", error=f"{type(e).__name__}: {e}"[:500])
            break
        now = time.time()
        for out in outputs:
            row = rows[out.request_id]
            o = out.outputs[0]
            if o.token_ids and "ttft_s" not in row:
                row["ttft_s"] = now - added
            if out.finished:
                row.update(outcome="finished", text=o.text, finish=o.finish_reason, tokens=len(o.token_ids),
                           done_s=now - added)
    wall = time.time() - start
    with open(args.results, "w") as f:
        for row in rows.values():
            row.update(wall_s=wall, startup_s=startup)
            f.write(json.dumps(row) + "\n")
    print(f"{args.backend}: {len(rows)} requests in {wall:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
