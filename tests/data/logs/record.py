"""Record real llama-server output for the log-parser tests (run: .venv/bin/python tests/data/logs/record.py).

Each case starts the embedded llama-server (CPU build) with the demo model, optionally sends one
request and stops it with SIGINT. Output (stdout+stderr merged, as the app reads it) goes to
<name>.log; the exact argv and the request's JSON response go to <name>.cmd.json.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))
from llm_tuner.services.binaries import SERVER, locate  # noqa: E402
from llm_tuner.services.demo_model import find_demo_model  # noqa: E402

BIN = str(locate(SERVER).path)
MODEL = str(find_demo_model())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(name: str, extra: list[str], *, request: bool = False, port: int | None = None, wait_s: float = 60,
        model: str | None = MODEL, prompt: str = "The capital of France is", n_predict: int = 24,
        ctx: str = "1024", mem_limit_mib: int | None = None, model_name: str = "gemma-3-270m-q4_k_m.gguf",
        keep: re.Pattern | None = None, scrape: bool = False, requests: int = 2) -> None:
    port = port or free_port()
    argv = [BIN] + (["-m", model] if model else []) + ["--host", "127.0.0.1", "--port", str(port),
                                                       "-c", ctx, "-np", "1", "-t", "2", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    env["NO_COLOR"] = "1"
    out = open(HERE / f"{name}.log", "w")
    def limit() -> None:  # an address-space cap provokes a real allocation failure on CPU
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (mem_limit_mib * 2**20, mem_limit_mib * 2**20))

    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL,
                         preexec_fn=limit if mem_limit_mib else None)
    response = None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and p.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    break
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.2)
    if p.poll() is None and request:
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "cache_prompt": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=body,
                                     headers={"Content-Type": "application/json"})
        for _ in range(requests):  # a second request reuses the cached prompt
            with urllib.request.urlopen(req, timeout=600) as r:
                response = (response or []) + [json.loads(r.read())["timings"]]
    if p.poll() is None and scrape:  # the server's own view after the requests: /metrics text, /slots JSON
        for endpoint, suffix in (("metrics", "metrics.txt"), ("slots", "slots.json")):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/{endpoint}", timeout=10) as r:
                (HERE / f"{name}.{suffix}").write_bytes(r.read())
    if p.poll() is None:
        time.sleep(0.5)
        p.send_signal(2)
    code = p.wait(30)
    out.close()
    if mem_limit_mib:
        env_note = {"NO_COLOR": "1", "RLIMIT_AS_MiB": str(mem_limit_mib)}
    else:
        env_note = {"NO_COLOR": "1"}
    if keep is not None:  # only the lines a test needs (a small file)
        path = HERE / f"{name}.log"
        path.write_text("".join(x for x in path.read_text().splitlines(True) if keep.search(x)))
    display = ["llama-server"] + [a.replace(model or MODEL, model_name) for a in argv[1:]]
    (HERE / f"{name}.cmd.json").write_text(json.dumps(
        {"argv": display, "env": env_note, "exit_code": code, "timings": response}, indent=1) + "\n")
    print(name, "exit", code)


# the memory lines of a -lv 4 log (core.memory_log) and the lines that frame them
MEMORY_LINES = re.compile(r"buffer size =|loading model tensors|constructing llama_context|memory_breakdown_print|"
                          r"llama_kv_cache: size|llama_memory_recurrent: size|llama_server: model loaded|listening on")


def hybrid(name: str) -> None:
    """A random-weight qwen35 hybrid (gated delta net, full attention every 4th layer): KV and RS buffers."""
    import tempfile

    from tests.support.random_hybrid import write_qwen35

    with tempfile.TemporaryDirectory() as d:
        model = str(write_qwen35(Path(d) / "qwen35-hybrid-random.gguf", n_layer=4, nextn=0, n_embd=256, n_ff=512,
                                 n_head=4, n_head_kv=2, head_dim=64, d_state=64, n_group=2, n_v_heads=16,
                                 weight_type="F16"))
        run(name, ["-lv", "4", "-fit", "off"], model=model, model_name="qwen35-hybrid-random.gguf", ctx="512",
            keep=MEMORY_LINES)


if __name__ == "__main__":
    only = set(sys.argv[1:])
    cases = {
        "plain_default": lambda: run("plain_default", ["--metrics"], request=True),
        "plain_lv4": lambda: run("plain_lv4", ["--metrics", "-lv", "4"], request=True),
        "jsonl_default": lambda: run("jsonl_default", ["--metrics", "--log-jsonl"], request=True),
        "plain_spec_ngram": lambda: run("plain_spec_ngram", ["--metrics", "--spec-type", "ngram-simple"], request=True,
                                        prompt="1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3",
                                        n_predict=48),
        "jsonl_spec_ngram": lambda: run("jsonl_spec_ngram", ["--metrics", "--log-jsonl", "--spec-type", "ngram-simple"],
                                        request=True,
                                        prompt="1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3",
                                        n_predict=48),
        "fail_unknown_flag": lambda: run("fail_unknown_flag", ["--mlock"]),
        "fail_removed_flag": lambda: run("fail_removed_flag", ["--draft", "4"]),
        "fail_unknown_device": lambda: run("fail_unknown_device", ["-dev", "CUDA0"]),
        "fail_model_missing": lambda: run("fail_model_missing", [], model="/nonexistent/model.gguf"),
        "fail_quant_v_no_fa": lambda: run("fail_quant_v_no_fa", ["-ctv", "q8_0", "-fa", "off"]),
        "fail_quant_v_no_fa_jsonl": lambda: run("fail_quant_v_no_fa_jsonl", ["-ctv", "q8_0", "-fa", "off", "--log-jsonl"]),
        "fail_oom_kv": lambda: run("fail_oom_kv", ["-lv", "4"], ctx="2000000", mem_limit_mib=2048),
        "fail_oom_kv_jsonl": lambda: run("fail_oom_kv_jsonl", ["--log-jsonl"], ctx="2000000", mem_limit_mib=2048),
        "fail_model_missing_jsonl": lambda: run("fail_model_missing_jsonl", ["--log-jsonl"], model="/nonexistent/model.gguf"),
    }
    cases["hybrid_lv4"] = lambda: hybrid("hybrid_lv4")
    # --no-repack: this machine's CPU build crashed in the warm-up on the repacked (AMX) demo weights
    cases["endpoints_spec_ngram"] = lambda: run(
        "endpoints_spec_ngram", ["--metrics", "--slots", "--no-repack", "--spec-type", "ngram-simple"], request=True,
        prompt="1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3", n_predict=48, scrape=True,
        keep=re.compile(r"draft acceptance|listening on"))
    # the demo model as its own draft (default sampling): every step drafts, and acceptance falls by position
    cases["endpoints_spec_draft"] = lambda: run(
        "endpoints_spec_draft", ["--metrics", "--spec-type", "draft-simple", "--spec-draft-model", MODEL,
                                 "--spec-draft-n-max", "4"], request=True,
        prompt="Once upon a time, in a small village by the sea, there lived an old fisherman who", n_predict=64,
        scrape=True, requests=1, keep=re.compile(r"draft acceptance|listening on"))
    for name, fn in cases.items():
        if not only or name in only:
            fn()
    if not only or "fail_port_in_use" in only:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            run("fail_port_in_use", [], port=s.getsockname()[1])
