#!/usr/bin/env python3
"""Soak test of `strata serve` over two workers (not part of CTest: it takes minutes).

    scripts/soak.py [--requests 10000] [--clients 8] [--binary build/src/cli/strata] [--model M]

Starts two `strata worker` processes and a server over them on loopback, then sends a bounded number
of requests from several client threads: streamed, non-streamed, cancelled mid-way (the client
closes the connection) and malformed. Half-way through one worker is killed with SIGKILL and
restarted on its port. The server must never die; every request must get an answer (a result or an
error object), a malformed one a 4xx. Prints the requests by outcome and the server's resident
memory at start, after warm-up and at the end (growth after warm-up must stay under 10%).
Only loopback addresses are used; every loop is bounded.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

samples = {}  # one response body per error outcome

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_worker(binary, port, token_file, log):
    return subprocess.Popen([binary, "worker", "-H", "127.0.0.1", "-p", str(port), "-t", "1",
                             "--token-file", token_file, "--cache-dir", os.path.join(log.name + ".cache")],
                            stdout=log, stderr=log)


def wait_for(cond, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def request_kinds():
    chat = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 24}
    completion = {"prompt": "Once upon a time", "max_tokens": 24}
    malformed = ['{"messages": [', '{"messages": 5}', '[' * 5000 + ']' * 5000, '{"prompt": "x", "max_tokens": -3}',
                 '{"messages":[{"role":"user","content":[{"type":1}]}]}', 'not json at all']
    return chat, completion, malformed


def one_request(port, kind, rng, outcomes, lock, phase):
    chat, completion, malformed = request_kinds()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        if kind == "malformed":
            body = rng.choice(malformed)
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            ok = 400 <= r.status < 500 and b'"error"' in data
            outcome = "malformed: 4xx" if ok else f"malformed: unexpected {r.status}"
        elif kind == "cancelled":
            body = dict(completion, max_tokens=2000, stream=True, ignore_eos=True)
            conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read1(64) if hasattr(r, "read1") else r.read(64)
            outcome = "cancelled mid-way"
        else:
            stream = kind == "streamed"
            body = dict(chat if rng.random() < 0.5 else completion, stream=stream, temperature=0.8,
                        seed=rng.randrange(1 << 30))
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status == 200 and (not stream or b"[DONE]" in data):
                outcome = f"{kind}: ok"
            elif b'"error"' in data:
                outcome = f"{kind}: error object ({r.status})"  # e.g. a worker was down
                with lock:
                    samples.setdefault((phase, outcome), data[-300:])
            else:
                outcome = f"{kind}: NO ANSWER ({r.status})"
    except (OSError, http.client.HTTPException) as e:
        outcome = f"{kind}: connection failed ({type(e).__name__})"
    finally:
        conn.close()
    with lock:
        outcomes[(phase, outcome)] += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/src/cli/strata"))
    ap.add_argument("--model", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="strata-soak-")
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write("soak-%d\n" % random.randrange(1 << 40))
    os.chmod(token_file, 0o600)
    logs = [open(os.path.join(tmp, n), "w") for n in ("worker0.log", "worker1.log", "server.log")]
    ports = [free_port(), free_port()]
    workers = [start_worker(args.binary, p, token_file, logs[i]) for i, p in enumerate(ports)]
    time.sleep(1.0)
    ready = os.path.join(tmp, "ready")
    server = subprocess.Popen([args.binary, "serve", "-m", args.model, "-c", "4096", "-np", "4", "--port", "0",
                               "--ready-file", ready, "--rpc", ",".join(f"127.0.0.1:{p}" for p in ports),
                               "-ts", "1,1,1", "--token-file", token_file, "--rpc-timeout", "5000"],
                              stdout=logs[2], stderr=logs[2])
    try:
        if not wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 120):
            sys.exit("server did not become ready; see " + logs[2].name)
        port = int(open(ready).read().strip().rsplit(":", 1)[1])
        rss = {"start": rss_kib(server.pid)}
        outcomes, lock = Counter(), threading.Lock()
        kinds = ["non-streamed"] * 45 + ["streamed"] * 35 + ["cancelled"] * 10 + ["malformed"] * 10
        counter = iter(range(args.requests))
        counter_lock = threading.Lock()
        warm_at, kill_at = args.requests // 10, args.requests // 2
        restart_at = kill_at + args.requests // 10
        events = {}

        started = [0]

        def watch_health():
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    conn.request("GET", "/health")
                    if conn.getresponse().status == 200:
                        with counter_lock:
                            events["/health 200 again at request"] = started[0]
                        return
                except (OSError, http.client.HTTPException):
                    pass
                time.sleep(0.1)

        def client(seed):
            rng = random.Random(seed)
            while True:
                with counter_lock:
                    i = next(counter, None)
                    if i is None:
                        return
                    if i == warm_at:
                        rss["after warm-up"] = rss_kib(server.pid)
                    if i == kill_at:
                        workers[1].send_signal(signal.SIGKILL)
                        workers[1].wait()
                        events["killed worker 1 at request"] = i
                    if i == restart_at:
                        workers[1] = start_worker(args.binary, ports[1], token_file, logs[1])
                        events["restarted worker 1 at request"] = i
                        threading.Thread(target=watch_health, daemon=True).start()
                    started[0] = i
                    recovered = events.get("/health 200 again at request")
                    phase = "1 before the kill" if i < kill_at else \
                        "3 after /health is 200 again" if recovered is not None and i > recovered + args.clients else \
                        "2 worker down or recovering"
                if server.poll() is not None:
                    sys.exit("THE SERVER DIED (exit %s); see %s" % (server.returncode, logs[2].name))
                one_request(port, rng.choice(kinds), rng, outcomes, lock, phase)

        start = time.time()
        threads = [threading.Thread(target=client, args=(s,)) for s in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.time() - start
        alive = server.poll() is None
        rss["end"] = rss_kib(server.pid) if alive else 0
        print(f"{args.requests} requests from {args.clients} clients in {seconds:.1f} s; server alive: {alive}")
        for k, v in events.items():
            print(f"  {k} {v}")
        for (phase, outcome), n in sorted(outcomes.items()):
            print(f"  {phase}: {outcome}: {n}")
        for (phase, outcome), body in sorted(samples.items()):
            print(f"  e.g. {phase}: {outcome}: {body.decode(errors='replace').strip()[-200:]}")
        print("server RSS (MiB): " + ", ".join(f"{k} {v / 1024:.1f}" for k, v in rss.items()))
        growth = (rss["end"] - rss["after warm-up"]) / max(1, rss["after warm-up"])
        print(f"growth after warm-up: {100 * growth:.1f}%")
        bad = [o for p, o in outcomes if "NO ANSWER" in o or "unexpected" in o or "connection failed" in o]
        # With the worker back, the cluster must serve again.
        bad += [o for p, o in outcomes if p.startswith("3") and "error object" in o]
        if "/health 200 again at request" not in events:
            # Not one of the soak's criteria (the fault tests check recovery), but worth saying.
            print("WARNING: the cluster did not report /health 200 again before the last request")
        if not alive or bad or growth >= 0.10:
            sys.exit("soak FAILED")
        print("soak passed")
    finally:
        for p in [server] + workers:
            if p.poll() is None:
                p.terminate()
        for p in [server] + workers:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
