#!/usr/bin/env python3
"""A coding agent's traffic against a running server (strata serve or llama-server); starts nothing.

The agent's conversation grows turn by turn (a long system prompt, then user and assistant
messages); before every turn a side request with another system prompt and another question takes
the slot (agents ask for titles, summaries, safety checks this way). With one slot (-np 1) that
side request evicts the conversation unless the server keeps it (--cache-ram).

For every turn it prints the prompt tokens, the tokens taken from a cache (usage's cached_tokens)
and the prompt time (timings.prompt_ms), then a cold prompt of the last turn's length
(cache_prompt false) and each turn's prompt time as a share of it. All requests at temperature 0.

  scripts/agent_pattern.py --url http://127.0.0.1:8080 --system-tokens 20000 --side-tokens 2000 --turns 4
Exit status: 0, or 1 when a request failed.
"""

import argparse
import json
import sys
import urllib.request


def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.load(r)


def words(prefix, n):
    # About one token a word for a BPE vocabulary; the first answer's usage says the real count.
    return " ".join(f"{prefix}{i % 97}" for i in range(n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--system-tokens", type=int, default=20000, help="words in the agent's system prompt")
    ap.add_argument("--side-tokens", type=int, default=2000, help="words in each side request")
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    a = ap.parse_args()
    system = "You are a coding agent. " + words("rule", a.system_tokens)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Fix the failing test."}]
    base = {"max_tokens": a.max_tokens, "temperature": 0}
    times = []
    try:
        for turn in range(a.turns):
            side = [{"role": "system", "content": "Summarize. " + words(f"side{turn}x", a.side_tokens)},
                    {"role": "user", "content": f"Title for turn {turn}?"}]
            post(a.url, dict(base, messages=side))
            r = post(a.url, dict(base, messages=messages))
            u, t = r["usage"], r["timings"]
            times.append(t["prompt_ms"])
            print(f"turn {turn}: prompt {u['prompt_tokens']} tokens, cached {u['prompt_tokens_details']['cached_tokens']}, "
                  f"computed {t['prompt_n']}, prompt {t['prompt_ms']:.0f} ms", flush=True)
            messages.append({"role": "assistant", "content": r["choices"][0]["message"]["content"] or ""})
            messages.append({"role": "user", "content": f"Now run the tests again, step {turn}."})
        messages = messages[:-1]  # the last turn's prompt again, cold
        cold = post(a.url, dict(base, messages=messages, cache_prompt=False))
    except Exception as e:  # a failed request is the result
        print(f"request failed: {e}", file=sys.stderr)
        return 1
    cold_ms = cold["timings"]["prompt_ms"]
    print(f"cold: prompt {cold['usage']['prompt_tokens']} tokens in {cold_ms:.0f} ms")
    print("turns after the first, prompt time / cold: " + ", ".join(f"{ms / cold_ms:.3f}" for ms in times[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
