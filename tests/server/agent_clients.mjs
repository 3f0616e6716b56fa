// A real coding-agent CLI and the official SDKs against `strata serve`, through a recording proxy:
// every request they send is kept (the corpus, as sent), every answer must be a 200 with a complete
// body or event stream, and afterwards each recorded request is sent again straight to the server
// and must get the same.
// Usage: node agent_clients.mjs STORY_URL CHAT_URL CLAUDE_BINARY WORK_DIR
// STORY_URL: a server whose model ends its answers (a story model that writes end-of-text), for the
// CLI turn that must succeed; CHAT_URL: a server whose model spells any JSON (byte-fallback tokens),
// for tool calls. The corpus is replayed against CHAT_URL.
// Prints "ok"/"FAIL" lines, then "N passed, M failed"; exits 1 on any failure.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import Ajv from 'ajv';

const [storyUrl, base, claude, work] = process.argv.slice(2);
let target = storyUrl;  // where the proxy forwards to
const corpus = path.join(work, 'corpus');
fs.rmSync(corpus, { recursive: true, force: true });
fs.mkdirSync(corpus, { recursive: true });
let passed = 0, failed = 0;
const ajv = new Ajv();
function check(name, ok, detail = '') {
  if (ok) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name} ${detail}`); }
}

// Whether an answer is whole: a JSON body, or an event stream that ends as its format ends.
function complete(contentType, body) {
  if ((contentType || '').includes('text/event-stream')) {
    return body.includes('event: message_stop') || body.includes('data: [DONE]') || body.includes('event: response.completed');
  }
  try { JSON.parse(body); return true; } catch { return false; }
}

// The recording proxy: forwards everything to the server, keeps each request and how it was answered.
const exchanges = [];
const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const n = exchanges.length;
    const record = { method: req.method, url: req.url, headers: {}, body: body.length ? JSON.parse(body) : null };
    for (const [k, v] of Object.entries(req.headers)) if (k.startsWith('anthropic-') || k === 'content-type') record.headers[k] = v;
    if (req.method === 'POST') fs.writeFileSync(path.join(corpus, `${String(n).padStart(3, '0')}.json`), JSON.stringify(record));
    const exchange = { url: req.url, status: 0, done: false };
    exchanges.push(exchange);
    const url = new URL(req.url, target);
    // Plain answers, so the recording can tell a whole stream; the client gets the same bytes.
    const headers = { ...req.headers, host: url.host };
    delete headers['accept-encoding'];
    const up = http.request(url, { method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      let text = '';
      answer.on('data', (c) => { text += c; res.write(c); });
      answer.on('end', () => {
        exchange.status = answer.statusCode;
        exchange.done = req.method === 'HEAD' || complete(answer.headers['content-type'], text);
        if (!exchange.done || answer.statusCode !== 200) exchange.body = text.slice(0, 400);
        res.end();
      });
    });
    up.on('error', (e) => { exchange.body = String(e); res.writeHead(502); res.end(); });
    up.end(body);
  });
});
await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
const proxyUrl = `http://127.0.0.1:${proxy.address().port}`;

// The agent CLI, non-interactive, as a user runs it against a local server (telemetry off).
async function runClaude(name, args) {
  const home = path.join(work, 'home');
  fs.mkdirSync(home, { recursive: true });
  const env = {
    ...process.env, HOME: home, ANTHROPIC_BASE_URL: proxyUrl, ANTHROPIC_API_KEY: 'sk-local',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_TELEMETRY: '1', DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1', API_TIMEOUT_MS: '600000',
  };
  const before = exchanges.length;
  // Asynchronously: the proxy runs in this same process.
  const r = await new Promise((resolve) => {
    const child = spawn(claude, args, { env, cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { err += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 600000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out, err }); });
  });
  let result = null;
  try { result = JSON.parse(r.out); } catch { /* checked below */ }
  check(`${name}: the CLI printed its JSON result`, result && result.type === 'result', `exit ${r.code}: ${r.out.slice(0, 600)} ${r.err.slice(0, 600)}`);
  const posts = exchanges.slice(before).filter((e) => e.url.startsWith('/v1/messages'));
  check(`${name}: it sent Messages requests`, posts.length > 0, JSON.stringify(exchanges.slice(before)));
  return { result, code: r.code, posts };
}

// 1. One turn without tools: the answer is the model's text.
{
  const { result, code } = await runClaude('claude -p, no tools', ['-p', 'Say hello.', '--output-format', 'json', '--tools', '']);
  check('claude -p, no tools: the turn succeeded', code === 0 && result && result.subtype === 'success' && !result.is_error,
    JSON.stringify(result).slice(0, 600));
  check('claude -p, no tools: the answer has text', result && typeof result.result === 'string' && result.result.length > 0);
}
// 2. With tools, on the model that spells JSON: the generic tool-call format (its template has none)
// makes the answer a text or calls, which the CLI answers with tool_result blocks. The turn may end
// at max_tokens (a story model), but no request may fail. --max-turns bounds the conversation.
target = base;
{
  const { result } = await runClaude('claude -p, tools', ['-p', 'Read the file notes.txt and say what it holds.',
    '--output-format', 'json', '--tools', 'Read', 'Glob', '--max-turns', '3']);
  check('claude -p, tools: no request failed', result && result.api_error_status === null, JSON.stringify(result).slice(0, 600));
}
// 3. The official SDKs, through the proxy too: a multi-turn Anthropic conversation with tool_use and
// tool_result blocks, streamed, and OpenAI chats whose calls are checked against the schemas (ajv) on
// a model whose template has no tool-call format: required over 20 seeds, a named tool, auto.
{
  const pathSchema = { type: 'object', properties: { path: { type: 'string', maxLength: 40 } }, required: ['path'] };
  const timeSchema = { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] };
  const valid = { read_file: ajv.compile(pathSchema), get_time: ajv.compile(timeSchema) };
  const anthropic = new Anthropic({ baseURL: proxyUrl, apiKey: 'sk-local', maxRetries: 0 });
  const tools = [{ name: 'read_file', description: 'Reads a file', input_schema: pathSchema }];
  const first = await anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 200, tools,
    tool_choice: { type: 'any', disable_parallel_tool_use: true }, messages: [{ role: 'user', content: 'What is in notes.txt?' }] });
  const use = first.content.find((b) => b.type === 'tool_use');
  check('anthropic sdk: tool_choice any gives a valid tool_use block', use && use.name === 'read_file' && valid.read_file(use.input), JSON.stringify(first));
  const stream = anthropic.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 24, tools, system: 'Answer briefly.',
    messages: [{ role: 'user', content: 'What is in notes.txt?' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use ? use.id : 'x', content: 'Buy milk.' }, { type: 'text', text: 'So?' }] }] });
  const final = await stream.finalMessage();
  check('anthropic sdk: the streamed turn after a tool_result ends', ['end_turn', 'max_tokens', 'tool_use'].includes(final.stop_reason), JSON.stringify(final));

  const openai = new OpenAI({ baseURL: proxyUrl + '/v1', apiKey: 'sk-local', maxRetries: 0 });
  const fns = [{ type: 'function', function: { name: 'read_file', parameters: pathSchema } },
    { type: 'function', function: { name: 'get_time', parameters: timeSchema } }];
  const ask = (seed, tool_choice) => openai.chat.completions.create({ model: 'gpt-5', max_completion_tokens: 300,
    reasoning_effort: 'low', parallel_tool_calls: false, seed, tool_choice, tools: fns,
    messages: [{ role: 'developer', content: 'Use tools.' }, { role: 'user', content: 'Read notes.txt' }] });
  const validCall = (c) => { try { return c && valid[c.function.name] && valid[c.function.name](JSON.parse(c.function.arguments)); } catch { return false; } };
  let good = 0;
  const bad = [];
  for (let seed = 0; seed < 20; seed++) {
    const r = await ask(seed, 'required');
    const calls = r.choices[0].message.tool_calls || [];
    if (calls.length === 1 && validCall(calls[0]) && r.choices[0].finish_reason === 'tool_calls') good++; else bad.push(JSON.stringify(r.choices[0]));
  }
  check('openai sdk: tool_choice required, 20 seeds: one schema-valid call each', good === 20, bad.slice(0, 2).join(' '));
  const named = await ask(3, { type: 'function', function: { name: 'get_time' } });
  const namedCall = named.choices[0].message.tool_calls?.[0];
  check('openai sdk: a named tool is the one called', namedCall && namedCall.function.name === 'get_time' && validCall(namedCall), JSON.stringify(named.choices[0]));
  let autoOk = 0;
  for (let seed = 0; seed < 4; seed++) {
    const m = (await ask(seed, 'auto')).choices[0].message;
    if ((m.tool_calls || []).every(validCall) && (m.tool_calls?.length || typeof m.content === 'string')) autoOk++;
  }
  check('openai sdk: auto answers with text or valid calls', autoOk === 4);
}

for (const e of exchanges) {
  check(`proxied ${e.url}: 200 and complete`, e.status === 200 && e.done, `${e.status} ${e.body || ''}`);
}
proxy.close();

// 4. The corpus again, straight to the server.
for (const file of fs.readdirSync(corpus).sort()) {
  const rec = JSON.parse(fs.readFileSync(path.join(corpus, file), 'utf8'));
  const r = await fetch(new URL(rec.url, base), { method: 'POST', headers: { ...rec.headers, 'content-type': 'application/json', 'x-api-key': 'sk-local' }, body: JSON.stringify(rec.body) });
  const text = await r.text();
  check(`replayed ${file} (${rec.url}): 200 and complete`, r.status === 200 && complete(r.headers.get('content-type'), text), `${r.status} ${text.slice(0, 300)}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
