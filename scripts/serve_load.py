#!/usr/bin/env python3
"""Client load against an OpenAI-compatible server (strata serve or llama-server); starts nothing.

Every client thread sends its requests one after another over one keep-alive connection to
/v1/completions, all at temperature 0 with ignore_eos (both servers' field), so that every completion
is exactly --max-tokens tokens long and the two servers do the same work. Each request gets another
built-in prompt (they start with different words, so slots share no prefix) unless --prompt is given.

Prints total completion tokens, wall time, total tokens/s and per-request latency p50/p90, and checks
that every response carries usage.completion_tokens == --max-tokens with finish_reason "length".
Exit status: 0 when every request passed that check, 1 otherwise, 2 for bad arguments.

  scripts/serve_load.py --url http://127.0.0.1:8080 --clients 8 --requests-per-client 4 --max-tokens 64
"""

import argparse
import http.client
import json
import math
import sys
import threading
import time
import urllib.parse

PROMPTS = [
    "Once upon a time, in a small village by the sea,",
    "The recipe for a good loaf of bread starts with",
    "In 1969, astronauts first walked on",
    "Dear diary, today I learned that",
    "Quantum computers differ from classical ones because",
    "My favourite way to spend a rainy afternoon is",
    "The three primary colours are",
    "A short poem about autumn leaves:",
    "Here is a list of tips for new programmers:",
    "Photosynthesis is the process by which",
    "When the train finally arrived at the station,",
    "Explain why the sky is blue in simple words:",
    "Zebras have stripes, scientists think, because",
    "Ingredients: two eggs, a cup of flour and",
    "Victor opened the old wooden box and found",
    "Gravity keeps the planets in orbit since",
]

MAX_CLIENTS = 1024
MAX_REQUESTS = 100000
MAX_TOKENS = 1 << 16


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
    return s[k]


class Client(threading.Thread):
    def __init__(self, index, args, start_gate, target):
        super().__init__(daemon=True)
        self.index = index
        self.args = args
        self.start_gate = start_gate
        self.target = target  # (host, port, path prefix)
        self.results = []  # (latency seconds, completion tokens, error or "")

    def connect(self):
        host, port, _ = self.target
        return http.client.HTTPConnection(host, port, timeout=self.args.timeout)

    def body(self, n):
        prompt = self.args.prompt
        if prompt is None:
            prompt = PROMPTS[(self.index * self.args.requests_per_client + n) % len(PROMPTS)]
        return json.dumps({
            "prompt": prompt,
            "max_tokens": self.args.max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": False,
        })

    def check(self, status, raw):
        """Completion tokens of a good response, or raises ValueError saying what is wrong."""
        if status != 200:
            raise ValueError(f"HTTP {status}: {raw[:200]!r}")
        r = json.loads(raw)
        tokens = r.get("usage", {}).get("completion_tokens")
        choices = r.get("choices") or [{}]
        reason = choices[0].get("finish_reason")
        if tokens != self.args.max_tokens:
            raise ValueError(f"completion_tokens {tokens}, expected {self.args.max_tokens} (finish_reason {reason})")
        if reason != "length":
            raise ValueError(f"finish_reason {reason!r}, expected 'length'")
        return tokens

    def run(self):
        conn = self.connect()
        path = self.target[2] + "/v1/completions"
        self.start_gate.wait()
        for n in range(self.args.requests_per_client):
            body = self.body(n)
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                tokens = self.check(resp.status, raw)
                self.results.append((time.perf_counter() - t0, tokens, ""))
            except (OSError, http.client.HTTPException, ValueError) as e:
                self.results.append((time.perf_counter() - t0, 0, f"{type(e).__name__}: {e}"))
                conn.close()
                conn = self.connect()
        conn.close()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL (http only)")
    p.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    p.add_argument("--requests-per-client", type=int, default=4, help="requests each client sends in turn (default 4)")
    p.add_argument("--max-tokens", type=int, default=64, help="completion tokens per request (default 64)")
    p.add_argument("--prompt", help="one prompt for every request (default: a built-in set of different ones)")
    p.add_argument("--timeout", type=float, default=600, help="seconds a request may take (default 600)")
    p.add_argument("--label", default="", help="name printed with the figures")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line instead")
    a = p.parse_args(argv)
    url = urllib.parse.urlsplit(a.url)
    if url.scheme != "http" or not url.hostname:
        p.error(f"--url {a.url!r}: expected http://HOST[:PORT]")
    for name, value, hi in (("--clients", a.clients, MAX_CLIENTS),
                            ("--requests-per-client", a.requests_per_client, MAX_REQUESTS),
                            ("--max-tokens", a.max_tokens, MAX_TOKENS)):
        if not 1 <= value <= hi:
            p.error(f"{name} {value} out of range 1..{hi}")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    a.target = (url.hostname, url.port or 80, url.path.rstrip("/"))
    return a


def run_load(a):
    gate = threading.Barrier(a.clients + 1)
    clients = [Client(i, a, gate, a.target) for i in range(a.clients)]
    for c in clients:
        c.start()
    gate.wait()
    t0 = time.perf_counter()
    for c in clients:
        c.join()
    wall = time.perf_counter() - t0
    results = [r for c in clients for r in c.results]
    errors = [r[2] for r in results if r[2]]
    tokens = sum(r[1] for r in results)
    latencies = [r[0] for r in results if not r[2]] or [0.0]
    return {
        "label": a.label,
        "url": a.url,
        "clients": a.clients,
        "requests": len(results),
        "failed": len(errors),
        "first_error": errors[0] if errors else "",
        "completion_tokens": tokens,
        "wall_s": round(wall, 3),
        "tokens_per_s": round(tokens / wall, 2) if wall > 0 else 0.0,
        "latency_p50_s": round(percentile(latencies, 50), 3),
        "latency_p90_s": round(percentile(latencies, 90), 3),
    }


def main(argv):
    a = parse_args(argv)
    s = run_load(a)
    if a.json:
        print(json.dumps(s))
    else:
        name = f"{s['label']} " if s["label"] else ""
        print(f"{name}{s['url']}: {s['requests']} requests from {s['clients']} clients, {s['failed']} failed")
        print(f"  completion tokens {s['completion_tokens']} in {s['wall_s']:.2f} s: {s['tokens_per_s']:.1f} tokens/s")
        print(f"  latency per request: p50 {s['latency_p50_s']:.2f} s, p90 {s['latency_p90_s']:.2f} s")
        if s["failed"]:
            print(f"  first failure: {s['first_error']}", file=sys.stderr)
    return 1 if s["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
