// Drives `strata serve` (a random-ish model with the real Qwen3 chat template) with the official
// openai and @anthropic-ai/sdk clients: forced tool calls and JSON-schema answers validated with ajv
// over many seeds, streamed tool calls against the whole answer, the Responses API and Anthropic's
// Messages API, streamed and not, against `strata run` on the templated prompt.
// Usage: node chat_clients.mjs BASE_URL EXPECTED_JSON
// EXPECTED_JSON: {"model", "user", "text" (strata run's greedy answer), "max_tokens", "stop" (a piece of text),
//                 "before_stop" (text before it), "prompt_tokens", optionally "sections"}
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import fs from 'node:fs';

const [base, expectedPath] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0 });
const ajv = new Ajv();
let failures = 0;
function check(name, got, expected) {
  if (JSON.stringify(got) === JSON.stringify(expected)) {
    console.log(`ok   ${name}`);
  } else {
    failures++;
    console.log(`FAIL ${name}\n  got      ${JSON.stringify(got)}\n  expected ${JSON.stringify(expected)}`);
  }
}

const weatherSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const timeSchema = { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false };
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weatherSchema } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone', parameters: timeSchema } },
];
const validWeather = ajv.compile(weatherSchema);
const validTime = ajv.compile(timeSchema);
const noThinking = { chat_template_kwargs: { enable_thinking: false } };
const messages = [{ role: 'user', content: want.user }];

function validCall(call) {
  let args;
  try { args = JSON.parse(call.arguments); } catch { return `arguments are not JSON: ${call.arguments}`; }
  const valid = call.name === 'get_weather' ? validWeather : call.name === 'get_time' ? validTime : null;
  if (!valid) return `unknown tool ${call.name}`;
  return valid(args) ? 'valid' : `${call.arguments}: ${ajv.errorsText(valid.errors)}`;
}


// Each section runs even when one before it threw; a throw counts as a failure.
// EXPECTED_JSON may list the sections to run ("sections": ["1", "4"]): a random-weight model has
// no strata run text to compare with, only structure to check.
async function section(name, fn) {
  if (want.sections && !want.sections.includes(name.split('.')[0])) return;
  try {
    await fn();
  } catch (e) {
    failures++;
    console.log(`FAIL ${name} threw: ${e.status ?? ''} ${e.message}`);
  }
}
// 1. tool_choice required, 20 seeds: every answer is a call whose arguments validate.
await section('1. tool_choice required, 20 seeds: every answer is a call whose arguments validate.', async () => {
let validCalls = 0;
const firstProblems = [];
for (let seed = 1; seed <= 20; seed++) {
  const r = await openai.chat.completions.create({
    model: want.model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 300, temperature: 1,
    seed, ...noThinking });
  const calls = r.choices[0].message.tool_calls ?? [];
  const verdicts = calls.map((c) => validCall(c.function));
  if (r.choices[0].finish_reason === 'tool_calls' && calls.length > 0 && verdicts.every((v) => v === 'valid')) validCalls++;
  else if (firstProblems.length < 3) firstProblems.push({ seed, finish: r.choices[0].finish_reason, verdicts, content: r.choices[0].message.content });
}
check('tool_choice required: 20 seeds give calls valid against their schema', { validCalls, firstProblems }, { validCalls: 20, firstProblems: [] });
});
// 2. A named tool: only that one is called.
await section('2. A named tool: only that one is called.', async () => {
const named = await openai.chat.completions.create({
  model: want.model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_time' } },
  parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed: 7, ...noThinking });
check('named tool_choice calls that tool with valid arguments',
  (named.choices[0].message.tool_calls ?? []).map((c) => [c.function.name, validCall(c.function)]), [['get_time', 'valid']]);
});
// 3. Streamed calls (parallel ones too): the concatenated deltas equal the whole answer's calls (same seed).
await section("3. Streamed calls: the concatenated deltas equal the whole answer's calls (same seed).", async () => {
for (const seed of [3, 11, 19]) {
  const body = { model: want.model, messages, tools, tool_choice: 'required', max_tokens: 400, temperature: 1, seed, ...noThinking };
  const whole = await openai.chat.completions.create(body);
  const stream = await openai.chat.completions.create({ ...body, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    for (const d of choice.delta.tool_calls ?? []) {
      calls[d.index] ??= { name: '', arguments: '', hasId: false };
      if (d.id) calls[d.index].hasId = true;
      calls[d.index].name += d.function?.name ?? '';
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  check(`streamed tool calls (seed ${seed}) equal the whole answer's`,
    { calls, finish },
    { calls: whole.choices[0].message.tool_calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments, hasId: true })),
      finish: whole.choices[0].finish_reason });
}
});
// 4. response_format json_schema, 20 seeds: the content parses and validates.
await section('4. response_format json_schema, 20 seeds: the content parses and validates.', async () => {
let validJson = 0;
const jsonProblems = [];
for (let seed = 1; seed <= 20; seed++) {
  const r = await openai.chat.completions.create({
    model: want.model, messages, max_tokens: 300, temperature: 1, seed, ...noThinking,
    response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weatherSchema, strict: true } } });
  let ok = false;
  try { ok = validWeather(JSON.parse(r.choices[0].message.content)); } catch { ok = false; }
  if (ok) validJson++;
  else if (jsonProblems.length < 3) jsonProblems.push({ seed, content: r.choices[0].message.content, finish: r.choices[0].finish_reason });
}
check('response_format json_schema: 20 seeds give valid JSON', { validJson, jsonProblems }, { validJson: 20, jsonProblems: [] });
});
// 5. The Responses API: plain text equals strata run; streamed deltas too; a forced call is a function_call item.
await section('5. The Responses API: plain text equals strata run; streamed deltas too; a forced call is a function_call item.', async () => {
const resp = await openai.responses.create({ model: want.model, input: want.user, max_output_tokens: want.max_tokens, temperature: 0 });
check('responses.create output_text equals strata run', resp.output_text, want.text);
check('responses.create usage', [resp.usage.input_tokens, resp.usage.output_tokens > 0, resp.usage.input_tokens_details.cached_tokens >= 0],
  [want.prompt_tokens, true, true]);
const rstream = await openai.responses.create({ model: want.model, input: want.user, max_output_tokens: want.max_tokens, temperature: 0, stream: true });
let rtext = '';
let lastSeq = -1, ordered = true, final = null;
const types = new Set();
for await (const ev of rstream) {
  types.add(ev.type);
  if (ev.sequence_number !== lastSeq + 1) ordered = false;
  lastSeq = ev.sequence_number;
  if (ev.type === 'response.output_text.delta') rtext += ev.delta;
  if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
}
check('streamed responses: text equals strata run', rtext, want.text);
check('streamed responses: numbered events, created first, the whole response last',
  [ordered, types.has('response.created'), types.has('response.output_item.done'), final?.output_text], [true, true, true, want.text]);
});

// 5b. The Responses API with a forced call.
await section('5b. The Responses API with a forced call.', async () => {
const rcall = await openai.responses.create({
  model: want.model, input: [{ role: 'user', content: [{ type: 'input_text', text: want.user }] }],
  tools: [{ type: 'function', name: 'get_weather', parameters: weatherSchema }], tool_choice: 'required',
  parallel_tool_calls: false, max_output_tokens: 300, temperature: 0, ...noThinking });
const fc = rcall.output.filter((i) => i.type === 'function_call');
check('responses with tool_choice required: a valid function_call item', fc.map((c) => [c.name, validCall(c), c.call_id.length > 0]),
  [['get_weather', 'valid', true]]);
try {
  await openai.responses.create({ model: want.model, input: 'x', previous_response_id: 'resp_123' });
  check('previous_response_id is refused', 'accepted', 400);
} catch (e) {
  check('previous_response_id is refused with 400', e.status, 400);
}
});
// 6. Anthropic's Messages API.
await section("6. Anthropic's Messages API.", async () => {
const msg = await anthropic.messages.create({ model: want.model, max_tokens: want.max_tokens, temperature: 0, messages });
check('messages.create text equals strata run', msg.content.map((b) => b.text).join(''), want.text);
check('messages.create stop_reason and usage', [msg.stop_reason, msg.usage.input_tokens + msg.usage.cache_read_input_tokens],
  ['max_tokens', want.prompt_tokens]);
const astream = anthropic.messages.stream({ model: want.model, max_tokens: want.max_tokens, temperature: 0, messages });
let atext = '';
const aevents = [];
astream.on('text', (t) => { atext += t; });
astream.on('streamEvent', (e) => aevents.push(e.type));
const afinal = await astream.finalMessage();
check('streamed messages: text deltas equal strata run', atext, want.text);
check('streamed messages: event order', [aevents[0], aevents.at(-2), aevents.at(-1), afinal.stop_reason],
  ['message_start', 'message_delta', 'message_stop', 'max_tokens']);
const stopped = await anthropic.messages.create({
  model: want.model, max_tokens: want.max_tokens, temperature: 0, messages, stop_sequences: [want.stop] });
check('stop_sequences: the text before it, stop_reason stop_sequence',
  [stopped.content.map((b) => b.text).join(''), stopped.stop_reason, stopped.stop_sequence], [want.before_stop, 'stop_sequence', want.stop]);
});

// 7. Anthropic tools and count_tokens.
await section('7. Anthropic tools and count_tokens.', async () => {
const atools = [{ name: 'get_weather', description: 'Weather for a city', input_schema: weatherSchema }];
const ause = await anthropic.messages.create({
  model: want.model, max_tokens: 300, temperature: 0, messages, tools: atools, tool_choice: { type: 'any', disable_parallel_tool_use: true },
  thinking: { type: 'disabled' } });
const uses = ause.content.filter((b) => b.type === 'tool_use');
check('tool_choice any: a tool_use block with valid input, stop_reason tool_use',
  [uses.map((u) => [u.name, validWeather(u.input)]), ause.stop_reason], [[['get_weather', true]], 'tool_use']);
const ustream = anthropic.messages.stream({
  model: want.model, max_tokens: 300, temperature: 0, messages, tools: atools, tool_choice: { type: 'any', disable_parallel_tool_use: true },
  thinking: { type: 'disabled' } });
const ufinal = await ustream.finalMessage();
check('streamed tool_use (input_json_delta) equals the whole answer',
  ufinal.content.filter((b) => b.type === 'tool_use').map((u) => [u.name, u.input]), uses.map((u) => [u.name, u.input]));
const counted = await anthropic.messages.countTokens({ model: want.model, messages });
check('count_tokens counts the templated prompt', counted.input_tokens, want.prompt_tokens);
try {
  await anthropic.messages.create({ model: want.model, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] });
  check('an image block is refused', 'accepted', 400);
} catch (e) {
  check('an image block is refused with 400 in Anthropic\'s error shape', [e.status, e.error?.type, e.error?.error?.type], [400, 'error', 'invalid_request_error']);
}
});
process.exit(failures ? 1 : 0);
