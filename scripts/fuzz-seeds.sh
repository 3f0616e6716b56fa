#!/usr/bin/env bash
# Builds the seed corpora of the fuzz harnesses from ../shared, one folder per harness under <out>.
# Nothing here is committed: the seeds are made at run time from the shared models.
# Usage: scripts/fuzz-seeds.sh <fuzz-build-dir> <out>
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz-seeds.sh <fuzz-build-dir> <out>}
out=${2:?usage: fuzz-seeds.sh <fuzz-build-dir> <out>}
shared=${STRATA_SHARED_DIR:-../shared}
rm -rf "$out"
mkdir -p "$out"/{gguf_reader,chat_template,openai_request,worker_messages,tokenizer,grammar,chat_output}

# Protobuf messages, metadata images, a synthetic GGUF, chat templates, vocab test strings.
STRATA_SHARED_DIR="$shared" "$build/fuzz/fuzz_seed_writer" "$out"

# Truncated GGUF headers: the reader must fail cleanly at every cut.
for f in "$shared"/models/stories260K.gguf "$shared"/models/TinyStories-656K-Q8_0.gguf \
         "$shared"/models/vocab/ggml-vocab-gpt-2.gguf "$shared"/models/vocab/ggml-vocab-bert-bge.gguf \
         "$shared"/models/synth/qwen35moe-q4_k_m.gguf; do
  stem=$(basename "$f" .gguf)
  for n in 24 64 512 4096 32768; do head -c "$n" "$f" >"$out/gguf_reader/head-$stem-$n"; done
done

# Small templates of our own that use what real templates use: loops with loop.*, macros, namespace,
# set blocks, filters, tests, slicing, string methods, tojson, raise_exception, strftime_now.
tmpl=$out/chat_template
cat >"$tmpl/own-chatml" <<'JINJA'
{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] | trim + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif -%}
JINJA
cat >"$tmpl/own-features" <<'JINJA'
{{ bos_token }}{% set ns = namespace(system='', n=0) %}
{%- macro render(m, idx) -%}[{{ idx }}:{{ m.role | upper }}] {{ (m.content | replace('\n', ' '))[:40] }}{%- endmacro -%}
{%- for m in messages %}{% if m.role == 'system' %}{% set ns.system = m.content %}{% elif m.role in ['user', 'assistant', 'tool'] %}{% set ns.n = ns.n + 1 %}
{%- if loop.index == 2 and m.role != 'user' %}{{ raise_exception('first must be user') }}{% endif -%}
{{ render(m, loop.index0) }}{% if m.tool_calls is defined %}{% for c in m.tool_calls %} {{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}{% endif %}
{% else %}?{% endif %}{% endfor -%}
{%- if tools %}{% for t in tools %}{{ t | tojson(indent=2) }}{% endfor %}{% endif -%}
{{ ns.system[:10] ~ '|' ~ ns.system[-3:] | lower }} {{ messages | length }} {{ ns.n is even }} {{ strftime_now('%Y-%m-%d') }}
{%- set words = 'a b c' .split() %}{{ words | join(',') }} {{ (messages | map(attribute='role') | list)[::-1] }}
{%- if add_generation_prompt %}<assistant>{% if not enable_thinking %}<think></think>{% endif %}{% endif %}{{ eos_token }}
JINJA
printf '%s\0%s\0%s' "$(cat "$tmpl/own-features")" 'Say "hi" {{ x }} \u00e9' '[{"type": "function", "function": {"name": "f"}}]' \
  >"$tmpl/own-features-tools"
cat >"$tmpl/own-values" <<'JINJA'
{%- set d = {'a': 1, 'b': [1, 2.5, none, true], 'c': {'x': 'y'}} -%}
{{ d.items() | list }} {{ d | dictsort }} {{ d.b | select('number') | sum }} {{ range(3, 12, 4) | list }}
{{ 7 // 2 }} {{ 2 ** 10 }} {{ 'abc' in 'xabcx' }} {{ [1, 2] + [3] }} {{ d.get('z', 'dflt') }}
{%- for k, v in d.items() %}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}
{{ messages[-1].content.startswith('t') }} {{ 'X'.join(['1', '2']) }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }}
{%- filter upper %}block {{ 1 }}{% endfilter %}{% raw %}{{ not parsed }}{% endraw %}
JINJA

# OpenAI request bodies, chat and completions (the harness tries each body as both).
req=$out/openai_request
cat >"$req/chat-basic" <<'JSON'
{"model": "stories260K", "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Once upon a time"}]}
JSON
cat >"$req/chat-sampling" <<'JSON'
{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 42, "stop": ["\n", "The end"], "presence_penalty": 0.5, "frequency_penalty": 0.5, "repeat_penalty": 1.1, "n": 1}
JSON
cat >"$req/chat-stream" <<'JSON'
{"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Tell a story"}], "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 3, "max_completion_tokens": 8}
JSON
cat >"$req/chat-tools" <<'JSON'
{"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21C"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}], "chat_template_kwargs": {"enable_thinking": false}}
JSON
cat >"$req/chat-parts" <<'JSON'
{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "<|im_start|>world\u00e9"}]}, {"role": "assistant", "content": "Hi", "reasoning_content": "thinking"}], "stop": "x"}
JSON
cat >"$req/completion-basic" <<'JSON'
{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 32, "temperature": 0}
JSON
cat >"$req/completion-tokens" <<'JSON'
{"prompt": "Lily and Tom <s></s>", "max_tokens": 4, "stream": true, "logprobs": 2, "stop": ["a", "b", "c", "d"], "seed": -1}
JSON
printf '{"prompt": 1, "messages": {}, "max_tokens": -5, "temperature": 1e400}' >"$req/invalid-types"
printf '[{"a": [1, 2, {"b": null}]}]' >"$req/not-an-object"

# Grammars (first byte 0: GBNF, 1: JSON schema, 3: schema under a rule prefix); after a NUL, the bytes
# that choose tokens.
gram=$out/grammar
printf '\0root ::= "{" ws (pair ("," ws pair)*)? "}"\npair ::= [a-z]+ ":" ws [0-9]{1,3}\nws ::= [ \\t\\n]{0,2}\n\0abcdefghij' >"$gram/gbnf-object"
printf '\0root ::= ("a" | [^a-z] | "\\u00e9"{2,4})* "."\n# comment\n\0\001\002\003\004\005' >"$gram/gbnf-classes"
printf '\0expr ::= term ([-+*/] term)*\nterm ::= [0-9]+ | "(" expr ")"\nroot ::= expr\n\0zzzzzz' >"$gram/gbnf-arith"
printf '\001{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":70},"b":{"enum":["x",1,null]}},"required":["a"]}\0qwerty' >"$gram/schema-object"
printf '\003{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},"anyOf":[{"$ref":"#/$defs/n"},{"type":"string","maxLength":4,"format":"date"}]}\0abc' >"$gram/schema-refs"
printf '\001{"type":"object","additionalProperties":{"type":"boolean"},"properties":{"ab":{"type":"string","minLength":2}}}\0\377\376' >"$gram/schema-additional"

# Generated text for chat::OutputParser: byte 0 picks format and flags (0x21 Hermes + thinking,
# 0x26 Qwen XML + thinking, starting in reasoning, 0x03 Llama 3), byte 1 seeds the piece sizes.
co=$out/chat_output
printf '\x21\x05<think>\nplan\n</think>\n\nOk.\n<tool_call>\n{"name": "f", "arguments": {"a": 1, "b": {"c": [true, null, "x\\u00e9"]}}}\n</tool_call>' >"$co/hermes"
printf '\x26\x09The plan.\n</think>\n\n<tool_call>\n<function=f>\n<parameter=a>\n12\n</parameter>\n<parameter=b>\n{"k": 1}\n</parameter>\n</function>\n</tool_call>' >"$co/qwen-xml"
printf '\x03\x02<|python_tag|>{"name": "f", "parameters": {"a": 2}}; {"type": "function", "name": "f", "parameters": {}}' >"$co/llama3"

for d in "$out"/*/; do echo "seeds: $(basename "$d"): $(ls "$d" | wc -l) files"; done
