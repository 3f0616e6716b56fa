#!/usr/bin/env python3
"""Network faults on the namespace LAN (scripts/lan.sh): a coordinator and two workers, each in its
own network namespace, serve a streamed greedy completion while one link is dropped both ways for
--drop seconds (its veth set down) and, in a second stream, while another is slowed to 1 Mbit/s
(tc tbf) for as long. Each stream must pause and complete with the text of an undisturbed run; the
script prints how long each stream paused and what the server's /metrics counted.

    sudo scripts/lan_faults.py [--split layer|tensor] [--model M] [--drop 10]

Needs root and iproute2 (ip, tc); uses lan.sh's netem when the kernel has it (LAN_NETEM=0 otherwise;
the slowed link's qdisc is removed afterwards, so it runs without netem from then on).
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAN = os.path.join(ROOT, "scripts", "lan.sh")


def addr(i):
    return f"10.77.0.{10 + i}"


def sh(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stream(port, body, on_event):
    """(text, done, error, longest pause in seconds) of a streamed completion."""
    conn = http.client.HTTPConnection(addr(0), port, timeout=300)
    conn.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    r = conn.getresponse()
    text, done, error, events, last, pause = "", False, "", 0, time.time(), 0.0
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        now = time.time()
        pause, last = max(pause, now - last), now
        if line == "data: [DONE]":
            done = True
            continue
        j = json.loads(line[6:])
        if "error" in j:
            error = json.dumps(j["error"])
        elif j.get("choices"):
            text += j["choices"][0].get("text", "")
        events += 1
        on_event(events)
    conn.close()
    return text, done, error, pause


def metrics(port):
    conn = http.client.HTTPConnection(addr(0), port, timeout=10)
    conn.request("GET", "/metrics")
    out = {}
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith("strata_re"):
            name, _, value = line.partition(" ")
            out[name] = float(value)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=["layer", "tensor"], default="layer")
    ap.add_argument("--model", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/src/cli/strata"))
    ap.add_argument("--drop", type=float, default=10)
    args = ap.parse_args()
    env = dict(os.environ)
    if sh(LAN, "up", "3", check=False).returncode != 0:  # no sch_netem: plain veth links
        env["LAN_NETEM"] = "0"
        subprocess.run([LAN, "up", "3"], env=env, check=True)
    sh("ip", "addr", "add", "10.77.0.1/24", "dev", "strata-lanbr")  # this namespace reaches the nodes
    tmp = tempfile.mkdtemp(prefix="strata-lan-faults-")
    token = os.urandom(16).hex()
    procs = []
    ok = True
    try:
        for i in (1, 2):
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", f"strata-lan{i}", args.binary, "worker", "--host", addr(i), "--port", "50052",
                 "-t", "1", "--token", token, "--model-dir", os.path.dirname(os.path.abspath(args.model))],
                stdout=open(os.path.join(tmp, f"worker{i}.log"), "w"), stderr=subprocess.STDOUT))
        time.sleep(1.5)
        ready = os.path.join(tmp, "ready")
        log = os.path.join(tmp, "server.log")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", "strata-lan0", args.binary, "serve", "-m", args.model, "--host", addr(0), "--port",
             "8080", "--ready-file", ready, "--rpc", f"{addr(1)}:50052,{addr(2)}:50052", "--token", token,
             "-sm", args.split, "-ts", "1,1,1", "-c", "2048", "--rpc-timeout", "3000", "--failover", "wait",
             "--no-cache-prompt"], stdout=open(log, "w"), stderr=subprocess.STDOUT))
        for _ in range(600):
            if os.path.exists(ready) and os.path.getsize(ready) > 0:
                break
            time.sleep(0.1)
        else:
            sys.exit("server not ready; see " + log)
        body = {"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0, "ignore_eos": True}
        want, _, _, _ = stream(8080, body, lambda n: None)
        faults = {
            "link to worker 1 dropped both ways": (["ip", "link", "set", "strata-lanv1", "down"],
                                                   ["ip", "link", "set", "strata-lanv1", "up"]),
            "worker 2's egress slowed to 1 Mbit/s": (
                ["ip", "netns", "exec", "strata-lan2", "tc", "qdisc", "replace", "dev", "strata-lanp2", "root", "tbf",
                 "rate", "1mbit", "burst", "32kbit", "latency", "400ms"],
                ["ip", "netns", "exec", "strata-lan2", "tc", "qdisc", "del", "dev", "strata-lanp2", "root"]),
        }
        for name, (start, end) in faults.items():
            timer = []

            def inject(n, start=start, end=end):
                if n == 20:
                    sh(*start)
                    t = threading.Timer(args.drop, lambda: sh(*end, check=False))
                    t.start()
                    timer.append(t)

            began = time.time()
            text, done, error, pause = stream(8080, body, inject)
            for t in timer:
                t.join()
            same = text == want
            ok &= done and not error and same
            print(f"-sm {args.split}, {name} for {args.drop:.0f} s mid-stream: completed {done}, error '{error}', "
                  f"same text as undisturbed {same}, longest pause {pause:.1f} s, stream {time.time() - began:.1f} s")
        print(f"metrics: {metrics(8080)}")
        print("network faults passed" if ok else f"network faults FAILED; logs in {tmp}")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run([LAN, "down"], env=env, check=False)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
