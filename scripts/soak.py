#!/usr/bin/env python3
"""Soak tests of `strata serve` over loopback workers (not part of CTest: they take minutes).

    scripts/soak.py cluster [--minutes 30] [--workers 3] [--split layer|tensor] [--np 4] [--clients 8]
                            [--kill-every 300] [--down 10] [--stop 10] [--failover wait]
    scripts/soak.py long-context [--tokens 200000] [--ctx 262144] [--turn-words 8000]

cluster: a coordinator and N workers under a mixed load (streamed, non-streamed, cancelled mid-way,
malformed) for the given time. Every --kill-every seconds one worker is killed with SIGKILL and
started again --down seconds later; half-way between, another is stopped with SIGSTOP for --stop
seconds (hung, not dead) and then continued. The server must never die and never deadlock; every
request must get an answer (a result, or an error object naming why), a malformed one a 4xx.
Prints requests by phase and outcome, p50/p99 latency per phase, the server's resumed and failed
counts, and each process's resident memory, descriptors and threads at warm-up and at the end.

long-context: one conversation on a small hybrid (Gated DeltaNet + attention) model over two
workers, grown turn by turn to --tokens at -c --ctx with the prompt cache: each turn must compute
only its new tokens, its time per new token must stay on the line a + b * depth fitted on the first
turns (each new token attends to all earlier ones), no process may gain descriptors or threads,
and none may grow by 5% over --steady-turns short turns at the full length (while the conversation
grows the memory it holds grows with it; that is printed per 1k tokens).

Only loopback addresses are used; every loop is bounded.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- processes --------------------------------------------------------------------------------

def proc_facts(pid):
    """Resident MiB, open descriptors and threads of a live process."""
    rss, threads = 0, 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return {"rss_mib": round(rss, 1), "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": threads}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


class Cluster:
    """Workers on fixed loopback ports and a server over them."""

    def __init__(self, binary, n_workers, tmp):
        self.binary, self.tmp = binary, tmp
        self.token_file = os.path.join(tmp, "token")
        with open(self.token_file, "w") as f:
            f.write("soak-%d\n" % random.randrange(1 << 40))
        os.chmod(self.token_file, 0o600)
        self.ports = [free_port() for _ in range(n_workers)]
        self.workers = [self.start_worker(i) for i in range(n_workers)]
        self.server = None
        time.sleep(1.0)

    def log(self, name):
        return open(os.path.join(self.tmp, name), "a")

    def start_worker(self, i):
        return subprocess.Popen([self.binary, "worker", "-H", "127.0.0.1", "-p", str(self.ports[i]), "-t", "1",
                                 "--token-file", self.token_file, "--cache-dir", os.path.join(self.tmp, f"cache{i}")],
                                stdout=self.log(f"worker{i}.log"), stderr=subprocess.STDOUT)

    def start_server(self, args):
        ready = os.path.join(self.tmp, "ready")
        self.server = subprocess.Popen(
            [self.binary, "serve", "--port", "0", "--ready-file", ready, "--token-file", self.token_file,
             "--rpc", ",".join(f"127.0.0.1:{p}" for p in self.ports)] + args,
            stdout=self.log("server.log"), stderr=subprocess.STDOUT)
        if not wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 600):
            sys.exit("server did not become ready; see " + os.path.join(self.tmp, "server.log"))
        self.port = int(open(ready).read().strip().rsplit(":", 1)[1])

    def facts(self):
        out = {"server": proc_facts(self.server.pid)}
        for i, w in enumerate(self.workers):
            if w.poll() is None:
                try:
                    out[f"worker{i} (pid {w.pid})"] = proc_facts(w.pid)
                except FileNotFoundError:
                    pass
        return out

    def stop(self):
        procs = [p for p in [self.server] + self.workers if p]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def http_json(port, method, path, body=None, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        return r.status, data
    finally:
        conn.close()


def metrics(port):
    status, data = http_json(port, "GET", "/metrics", timeout=10)
    out = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def settled_facts(cluster):
    """Facts once the last answer's connection has closed on the server's side too."""
    time.sleep(1.0)
    return cluster.facts()


def print_facts(title, facts):
    print(title)
    for name, f in facts.items():
        print(f"  {name}: RSS {f['rss_mib']} MiB, {f['fds']} descriptors, {f['threads']} threads")


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


# ---- cluster soak -----------------------------------------------------------------------------

MALFORMED = ['{"messages": [', '{"messages": 5}', '[' * 5000 + ']' * 5000, '{"prompt": "x", "max_tokens": -3}',
             '{"messages":[{"role":"user","content":[{"type":1}]}]}', 'not json at all']


def one_request(port, kind, rng):
    """(outcome, seconds, sample body) of one request of this kind."""
    chat = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 24}
    completion = {"prompt": "Once upon a time", "max_tokens": 24}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    start = time.time()
    sample = b""
    try:
        if kind == "malformed":
            conn.request("POST", "/v1/chat/completions", rng.choice(MALFORMED), {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            outcome = "4xx" if 400 <= r.status < 500 and b'"error"' in data else f"UNEXPECTED {r.status}"
        elif kind == "cancelled":
            body = dict(completion, max_tokens=2000, stream=True, ignore_eos=True)
            conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read1(64)
            outcome = "cancelled mid-way"
        else:
            stream = kind == "streamed"
            body = dict(chat if rng.random() < 0.5 else completion, stream=stream, temperature=0.8,
                        seed=rng.randrange(1 << 30))
            path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status == 200 and b'"error"' not in data and (not stream or b"[DONE]" in data):
                outcome = "ok"
            elif b'"error"' in data:
                outcome, sample = f"error object ({r.status})", data[-300:]
            else:
                outcome = f"NO ANSWER ({r.status})"
    except (OSError, http.client.HTTPException) as e:
        outcome = f"CONNECTION FAILED ({type(e).__name__})"
    finally:
        conn.close()
    return f"{kind}: {outcome}", time.time() - start, sample


class Faults:
    """The kill/restart and stop/continue schedule, and the phase a request starts in."""

    def __init__(self, cluster, args):
        self.c, self.args = cluster, args
        self.phase, self.epoch, self.last_fault = "steady", 0, ""
        self.events = []
        self.lock = threading.Lock()
        self.t0 = time.time()

    def say(self, what):
        with self.lock:
            self.events.append(f"{time.time() - self.t0:7.1f} s  {what}")
            print(self.events[-1], flush=True)

    def set_phase(self, p):
        with self.lock:
            self.phase = p
            self.epoch += 1
            if p != "steady":
                self.last_fault = p

    def label(self, phase, epoch):
        """A request's phase: the fault it started in, or the one it lived through, or steady."""
        with self.lock:
            if phase != "steady":
                return phase
            return f"through '{self.last_fault}'" if epoch != self.epoch else "steady"

    def healthy(self):
        try:
            return http_json(self.c.port, "GET", "/health", timeout=5)[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    def run(self, end):
        n = len(self.c.workers)
        victim, stopped = n - 1, 0 if n > 1 else None
        next_kill = self.t0 + self.args.kill_every
        next_stop = self.t0 + self.args.kill_every / 2
        while time.time() < end:
            now = time.time()
            if now >= next_kill:
                self.c.workers[victim].send_signal(signal.SIGKILL)
                self.c.workers[victim].wait()
                self.set_phase("worker killed")
                self.say(f"SIGKILL worker{victim}")
                time.sleep(self.args.down)
                self.c.workers[victim] = self.c.start_worker(victim)
                self.say(f"worker{victim} started again")
                self.await_recovery()
                next_kill += self.args.kill_every
            elif stopped is not None and stopped != victim and now >= next_stop:
                self.c.workers[stopped].send_signal(signal.SIGSTOP)
                self.set_phase("worker stopped")
                self.say(f"SIGSTOP worker{stopped}")
                time.sleep(self.args.stop)
                self.c.workers[stopped].send_signal(signal.SIGCONT)
                self.say(f"SIGCONT worker{stopped}")
                self.await_recovery()
                next_stop += self.args.kill_every
            time.sleep(0.2)

    def await_recovery(self):
        ok = wait_for(self.healthy, 120)
        self.say("/health 200 again" if ok else "/health NOT 200 within 120 s")
        self.set_phase("steady")


def soak_cluster(args):
    tmp = tempfile.mkdtemp(prefix="strata-soak-")
    print(f"logs in {tmp}")
    c = Cluster(args.binary, args.workers, tmp)
    try:
        ts = ",".join(["1"] * (args.workers + 1))
        c.start_server(["-m", args.model, "-c", str(1024 * args.np), "-np", str(args.np), "-sm", args.split,
                        "-ts", ts, "--rpc-timeout", "5000", "--failover", args.failover, "--recover-timeout", "60"])
        faults = Faults(c, args)
        results = defaultdict(Counter)
        latency = defaultdict(list)
        samples = {}
        lock = threading.Lock()
        end = time.time() + args.minutes * 60
        warm = {}

        def client(seed):
            rng = random.Random(seed)
            kinds = ["non-streamed"] * 45 + ["streamed"] * 35 + ["cancelled"] * 10 + ["malformed"] * 10
            while time.time() < end:
                if c.server.poll() is not None:
                    return
                phase, epoch = faults.phase, faults.epoch
                outcome, seconds, sample = one_request(c.port, rng.choice(kinds), rng)
                phase = faults.label(phase, epoch)
                with lock:
                    results[phase][outcome] += 1
                    if outcome.endswith(": ok"):
                        latency[phase].append(seconds)
                    if sample:
                        samples.setdefault((phase, outcome), sample)

        threads = [threading.Thread(target=client, args=(s,)) for s in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(min(30, args.minutes * 6))
        warm = c.facts()
        faults.run(end)
        for t in threads:
            t.join(timeout=600)
        hung = sum(t.is_alive() for t in threads)
        alive = c.server.poll() is None
        final = c.facts() if alive else {}
        m = metrics(c.port) if alive else {}
        total = sum(sum(r.values()) for r in results.values())
        print(f"\n{total} requests from {args.clients} clients in {args.minutes} min over {args.workers} workers "
              f"(-sm {args.split}, -np {args.np}, --failover {args.failover}); server alive: {alive}; "
              f"clients still waiting: {hung}")
        for phase in sorted(results):
            lat = latency[phase]
            print(f"  phase '{phase}': p50 {percentile(lat, 50) * 1000:.0f} ms, p99 {percentile(lat, 99) * 1000:.0f} ms "
                  f"over {len(lat)} answered")
            for outcome, n in sorted(results[phase].items()):
                print(f"    {outcome}: {n}")
        for (phase, outcome), body in sorted(samples.items()):
            print(f"  e.g. {phase}: {outcome}: {body.decode(errors='replace').strip()[-200:]}")
        for k in ("strata_requests_resumed_total", "strata_recoveries_total", "strata_requests_failed_total",
                  "strata_requests_cancelled_total"):
            print(f"  {k}: {m.get(k, 'n/a')}")
        print_facts("after warm-up:", warm)
        print_facts("at the end:", final)
        bad = [o for r in results.values() for o in r if "NO ANSWER" in o or "UNEXPECTED" in o or "CONNECTION" in o]
        growth = (final["server"]["rss_mib"] - warm["server"]["rss_mib"]) / warm["server"]["rss_mib"] if alive else 1
        print(f"server RSS growth after warm-up: {100 * growth:.1f}%")
        if not alive or hung or bad or growth >= 0.10:
            sys.exit("soak FAILED")
        print("soak passed")
    finally:
        c.stop()


# ---- long context -----------------------------------------------------------------------------

def tiny_hybrid(binary, ctx, tmp):
    """A small Qwen3.5-MoE-shaped model (one attention layer in four) with a long training context."""
    path = os.path.join(tmp, "hybrid-long.gguf")
    subprocess.run([binary, "synth", "--arch", "qwen35moe", "--layers", "4", "--embd", "128", "--heads", "4",
                    "--kv-heads", "2", "--head-dim", "32", "--experts", "8", "--experts-used", "2", "--expert-ff", "64",
                    "--full-attn-interval", "4", "--ctx", str(ctx), "-o", path], check=True, stdout=subprocess.DEVNULL)
    return path


def soak_long_context(args):
    tmp = tempfile.mkdtemp(prefix="strata-long-")
    print(f"logs in {tmp}")
    model = args.model or tiny_hybrid(args.binary, args.ctx, tmp)
    c = Cluster(args.binary, 2, tmp)
    words = "the a cat dog ran over hill sun tree river small big red blue old new house road time day".split()
    rng = random.Random(7)
    try:
        c.start_server(["-m", model, "-c", str(args.ctx), "-np", "1", "-ts", "1,1,1", "--rpc-timeout", "600000"])
        text, turns, warm = "", [], None
        while True:
            text += " ".join(rng.choice(words) for _ in range(args.turn_words)) + "\n"
            start = time.time()
            status, data = http_json(c.port, "POST", "/v1/completions",
                                     {"prompt": text, "max_tokens": 8, "temperature": 0, "cache_prompt": True})
            seconds = time.time() - start
            if status != 200:
                sys.exit(f"turn {len(turns)} failed ({status}): {data[-300:]!r}")
            j = json.loads(data)
            t = j["timings"]
            n_prompt = j["usage"]["prompt_tokens"]
            turns.append({"prompt": n_prompt, "computed": t["prompt_n"], "seconds": seconds,
                          "depth": n_prompt - t["prompt_n"] / 2,  # the new tokens' mean position
                          "ms_per_new": 1000 * seconds / max(1, t["prompt_n"])})
            text += j["choices"][0]["text"]
            print(f"turn {len(turns) - 1}: {n_prompt} tokens, computed {t['prompt_n']} in {seconds:.2f} s "
                  f"({turns[-1]['ms_per_new']:.3f} ms per new token)", flush=True)
            if len(turns) == 2:
                warm = settled_facts(c)
            if n_prompt + 2 * t["prompt_n"] >= min(args.tokens, args.ctx - 64):
                break
        full = settled_facts(c)
        # Then turns that add a few words each at the full length: the working set stays the same,
        # so any growth now is a leak, not the longer conversation's own memory.
        for i in range(args.steady_turns):
            text += " ".join(rng.choice(words) for _ in range(16)) + "\n"
            status, data = http_json(c.port, "POST", "/v1/completions",
                                     {"prompt": text, "max_tokens": 8, "temperature": 0, "cache_prompt": True})
            if status != 200:
                sys.exit(f"steady turn {i} failed ({status}): {data[-300:]!r}")
            text += json.loads(data)["choices"][0]["text"]
        final = settled_facts(c)
        print_facts("after warm-up (turn 1):", warm)
        print_facts(f"at {turns[-1]['prompt']} tokens:", full)
        print_facts(f"after {args.steady_turns} more turns at that length:", final)
        later = turns[2:]
        # A new token attends to every earlier one, so its cost is a + b * depth; fitted on turns 1-3,
        # a later turn far above the line computes more than its new tokens or slows with age.
        fit = turns[1:4]
        b = (fit[-1]["ms_per_new"] - fit[0]["ms_per_new"]) / max(1.0, fit[-1]["depth"] - fit[0]["depth"])
        a = statistics.mean(t["ms_per_new"] - b * t["depth"] for t in fit)
        worst = max(later, key=lambda t: t["ms_per_new"] / (a + b * t["depth"]))
        ratio = worst["ms_per_new"] / (a + b * worst["depth"])
        print(f"ms per new token = {a:.4f} + {b * 1000:.5f} per 1k tokens of depth (fitted on turns 1-3); "
              f"furthest later turn {ratio:.2f}x the line at depth {worst['depth']:.0f}")
        grown = turns[-1]["prompt"] - turns[1]["prompt"]
        for name, f in full.items():
            if name in warm:
                print(f"  {name}: {1024 * (f['rss_mib'] - warm[name]['rss_mib']) / max(1, grown / 1000):.1f} KiB "
                      f"more per 1k tokens of conversation while it grew")
        usual = statistics.median(t["computed"] for t in turns)
        failed = [t for t in later if t["computed"] > 1.5 * usual]  # a turn that computed its history again
        bad = [] if ratio < 1.5 else [f"a turn took {ratio:.2f}x the fitted time per new token"]
        for name, f in final.items():
            w, ful = warm.get(name), full.get(name)
            if not w or not ful:
                continue
            if (f["rss_mib"] - ful["rss_mib"]) / ful["rss_mib"] >= 0.05:
                bad.append(f"{name} RSS grew {ful['rss_mib']} -> {f['rss_mib']} MiB at a constant length")
            if f["fds"] > w["fds"] or f["threads"] > w["threads"]:
                bad.append(f"{name} descriptors {w['fds']} -> {f['fds']}, threads {w['threads']} -> {f['threads']}")
        if failed:
            bad.append(f"{len(failed)} turn(s) computed more than their new tokens")
        for b in bad:
            print("  " + b)
        if bad:
            sys.exit("long-context soak FAILED")
        print("long-context soak passed")
    finally:
        c.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/src/cli/strata"))
    sub = ap.add_subparsers(dest="mode", required=True)
    cl = sub.add_parser("cluster")
    cl.add_argument("--model", default=os.path.join(ROOT, "../shared/models/stories260K.gguf"))
    cl.add_argument("--minutes", type=float, default=30)
    cl.add_argument("--workers", type=int, default=3)
    cl.add_argument("--split", choices=["layer", "tensor"], default="layer")
    cl.add_argument("--np", type=int, default=4)
    cl.add_argument("--clients", type=int, default=8)
    cl.add_argument("--kill-every", type=float, default=300)
    cl.add_argument("--down", type=float, default=10)
    cl.add_argument("--stop", type=float, default=10)
    cl.add_argument("--failover", choices=["off", "wait", "replan"], default="wait")
    lc = sub.add_parser("long-context")
    lc.add_argument("--model", default="", help="default: a small hybrid model made with `strata synth`")
    lc.add_argument("--tokens", type=int, default=200000)
    lc.add_argument("--ctx", type=int, default=262144)
    lc.add_argument("--turn-words", type=int, default=8000, help="words added per turn (about 1.85 tokens each)")
    lc.add_argument("--steady-turns", type=int, default=6, help="short turns at the full length, for leaks")
    args = ap.parse_args()
    soak_cluster(args) if args.mode == "cluster" else soak_long_context(args)


if __name__ == "__main__":
    main()
