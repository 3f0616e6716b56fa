// Drives `strata serve` with the official openai npm client: models list, completions and chat
// completions, streamed and not. Usage: node openai_client.mjs BASE_URL EXPECTED_JSON
// EXPECTED_JSON: {"model", "prompt", "completion", "chat_user", "chat_completion", "max_tokens"}
import OpenAI from 'openai';
import fs from 'node:fs';

const [base, expectedPath] = process.argv.slice(2);
const want = JSON.parse(fs.readFileSync(expectedPath, 'utf8'));
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused' });
let failures = 0;
function check(name, got, expected) {
  if (JSON.stringify(got) === JSON.stringify(expected)) {
    console.log(`ok   ${name}`);
  } else {
    failures++;
    console.log(`FAIL ${name}\n  got      ${JSON.stringify(got)}\n  expected ${JSON.stringify(expected)}`);
  }
}

const models = await client.models.list();
check('models.list has the model', models.data.map((m) => m.id).includes(want.model), true);

const completion = await client.completions.create({
  model: want.model, prompt: want.prompt, max_tokens: want.max_tokens, temperature: 0 });
check('completions text equals strata run', completion.choices[0].text, want.completion);
check('completions usage counts', completion.usage.completion_tokens > 0 && completion.usage.prompt_tokens > 0, true);

let streamed = '';
const stream = await client.completions.create({
  model: want.model, prompt: want.prompt, max_tokens: want.max_tokens, temperature: 0, stream: true });
for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? '';
check('streamed completions equal strata run', streamed, want.completion);

const chat = await client.chat.completions.create({
  model: want.model, messages: [{ role: 'user', content: want.chat_user }], max_tokens: want.max_tokens, temperature: 0 });
check('chat completion equals strata run on the templated prompt', chat.choices[0].message.content, want.chat_completion);
check('chat finish reason', ['stop', 'length'].includes(chat.choices[0].finish_reason), true);

let chatStreamed = '';
const chatStream = await client.chat.completions.create({
  model: want.model, messages: [{ role: 'user', content: want.chat_user }], max_tokens: want.max_tokens,
  temperature: 0, stream: true });
for await (const chunk of chatStream) chatStreamed += chunk.choices[0]?.delta?.content ?? '';
check('streamed chat equals strata run', chatStreamed, want.chat_completion);

const withLogprobs = await client.chat.completions.create({
  model: want.model, messages: [{ role: 'user', content: want.chat_user }], max_tokens: 4, temperature: 0,
  logprobs: true, top_logprobs: 3 });
const lp = withLogprobs.choices[0].logprobs.content;
check('logprobs per token with 3 alternatives', lp.length === 4 && lp.every((t) => t.top_logprobs.length === 3), true);

try {
  await client.chat.completions.create({ model: want.model, messages: [{ role: 'user', content: 'x' }], n: 2 });
  check('n=2 is refused', 'accepted', 'a 400 error');
} catch (e) {
  check('n=2 is refused with 400', e.status, 400);
}
process.exit(failures ? 1 : 0);
