"""End-to-end checks of the OpenAI-compatible vLLM server with this package installed,
run inside vLLM's virtualenv.  Starts the server on a free port with the backend
"constrained", sends requests with ``response_format`` (backend route) and with
``vllm_xargs`` (logits-processor route), a short budget and a bad schema, and writes
a JSON report that tests/test_vllm_end_to_end.py asserts on.

    python tests/vllm_scripts/server.py MODEL_DIR REPORT.json
"""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, body: dict, route: str = "/v1/chat/completions") -> tuple[int, dict]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{route}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text or b"{}")
        except ValueError:
            return e.code, {"error": {"message": text.decode(errors="replace")}}


def main() -> None:
    model, report_path = sys.argv[1:3]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                               "--port", str(port), "--dtype", "float32", "--enforce-eager",
                               "--gpu-memory-utilization", "0.3", "--max-model-len", "2048",
                               "--structured-outputs-config.backend", "constrained"],
                              stdout=sys.stderr, stderr=sys.stderr)
    report: dict = {}
    try:
        t0 = time.time()
        while True:
            if server.poll() is not None:
                raise SystemExit(f"the server exited with {server.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() - t0 > 400:
                raise SystemExit("the server did not start within 400 s")
            time.sleep(2)
        while post(port, {"model": model, "prompt": "Hi", "max_tokens": 1}, "/v1/completions")[0] != 200:
            if time.time() - t0 > 400:      # /health answers before the first request can be served
                raise SystemExit("the server did not serve a request within 400 s")
            time.sleep(2)
        report["startup_s"] = time.time() - t0
        messages = [{"role": "user", "content": "Describe a person as a JSON object with a name and an age."}]
        base = {"model": model, "messages": messages, "temperature": 0}
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
        xargs = {"constrained": json.dumps({"json_schema": SCHEMA})}
        bodies = {
            "response_format": {**base, "max_tokens": 96, "response_format": fmt},
            "vllm_xargs": {**base, "max_tokens": 96, "vllm_xargs": xargs},
            "vllm_xargs_short": {**base, "max_tokens": 14, "vllm_xargs": xargs},
            "response_format_short": {**base, "max_tokens": 14, "response_format": fmt},
            "bad_schema": {**base, "max_tokens": 8,
                           "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}}},
            "bad_xargs": {**base, "max_tokens": 8, "vllm_xargs": {"constrained": json.dumps({"regex": "(a"})}},
        }
        with ThreadPoolExecutor(len(bodies)) as pool:        # concurrently: a bad request fails alone
            results = dict(zip(bodies, pool.map(lambda b: post(port, b), bodies.values())))
        for name, (status, body) in results.items():
            choice = (body.get("choices") or [{}])[0]
            report[name] = {"status": status, "text": (choice.get("message") or {}).get("content"),
                            "finish": choice.get("finish_reason"), "usage": body.get("usage"),
                            "error": (body.get("error") or {}).get("message")}
        report["after_errors"] = post(port, bodies["vllm_xargs"])[0]
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    json.dump(report, open(report_path, "w"), indent=1)


if __name__ == "__main__":
    main()
