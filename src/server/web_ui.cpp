#include "server/web_ui.h"

namespace strata::server {

const std::string& web_ui_html() {
  static const std::string html = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Strata</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: grid; grid-template-columns: 1fr 420px; height: 100vh; }
  main { display: flex; flex-direction: column; padding: 16px; min-width: 0; }
  aside { border-left: 1px solid #ddd; padding: 16px; overflow: auto; background: #fafafa; }
  h1 { font-size: 18px; margin: 0 0 8px; } h2 { font-size: 15px; margin: 16px 0 8px; }
  #log { flex: 1; overflow: auto; border: 1px solid #ddd; border-radius: 6px; padding: 8px; background: white; }
  .msg { margin: 6px 0; white-space: pre-wrap; } .user { color: #064; } .assistant { color: #222; }
  .error { color: #b00; }
  form { display: flex; gap: 8px; margin-top: 8px; }
  textarea { flex: 1; height: 60px; font: inherit; }
  button { padding: 0 18px; }
  table { width: 100%; border-collapse: collapse; font-size: 13px; }
  td, th { text-align: left; padding: 4px; border-bottom: 1px solid #eee; vertical-align: top; }
  .bar { background: #e5e5e5; border-radius: 3px; height: 10px; width: 120px; position: relative; }
  .bar > div { background: #3a7; height: 10px; border-radius: 3px; }
  .down { color: #b00; font-weight: bold; }
  #stats { font-size: 13px; }
</style>
</head>
<body>
<main>
  <h1>Strata <span id="model"></span></h1>
  <div id="log"></div>
  <form id="chat">
    <textarea id="input" placeholder="Say something..."></textarea>
    <button id="send" type="submit">Send</button>
  </form>
  <div style="font-size:12px;margin-top:6px">API key (if the server needs one): <input id="key" size="24"></div>
</main>
<aside>
  <h2>Cluster</h2>
  <table id="nodes"><thead><tr><th>node</th><th>layers</th><th>memory</th><th>ping</th></tr></thead><tbody></tbody></table>
  <h2>Speed</h2>
  <div id="stats">-</div>
  <h2>Plan</h2>
  <div id="decisions" style="font-size:12px"></div>
</aside>
<script>
const messages = [];
const log = document.getElementById('log');
const keyInput = document.getElementById('key');
keyInput.value = localStorage.getItem('strata-key') || '';
keyInput.onchange = () => localStorage.setItem('strata-key', keyInput.value);
function headers() {
  const h = {'Content-Type': 'application/json'};
  if (keyInput.value) h['Authorization'] = 'Bearer ' + keyInput.value;
  return h;
}
function add(role, text) {
  const d = document.createElement('div');
  d.className = 'msg ' + role;
  d.textContent = (role === 'user' ? 'you: ' : '') + text;
  log.appendChild(d);
  log.scrollTop = log.scrollHeight;
  return d;
}
function mib(b) { return (b / 1048576).toFixed(1) + ' MiB'; }
async function refresh() {
  try {
    const r = await fetch('/v1/cluster', {headers: headers()});
    if (!r.ok) { document.getElementById('stats').textContent = 'status ' + r.status; return; }
    const c = await r.json();
    document.getElementById('model').textContent = '- ' + c.model + ' (' + c.architecture + ', ' + c.n_layer + ' layers, ' + c.slots + ' slots)';
    const body = document.querySelector('#nodes tbody');
    body.innerHTML = '';
    for (const n of c.nodes) {
      const tr = document.createElement('tr');
      const layers = n.layers.map(l => l[0] + '-' + l[1]).join(', ') + (n.input ? ' +input' : '') + (n.output ? ' +output' : '');
      const limit = n.memory_usable || n.bytes.total;
      const pct = Math.min(100, 100 * n.bytes.total / limit);
      tr.innerHTML = '<td class="' + (n.up ? '' : 'down') + '"></td><td></td><td><div class="bar"><div style="width:' + pct + '%"></div></div><span></span></td><td></td>';
      tr.children[0].textContent = n.name + (n.up ? '' : ' (down)');
      tr.children[1].textContent = layers || '-';
      tr.children[2].querySelector('span').textContent = mib(n.bytes.total) + ' / ' + mib(limit);
      tr.children[3].textContent = n.endpoint ? n.ping_ms.toFixed(1) + ' ms' : '';
      body.appendChild(tr);
    }
    document.getElementById('stats').textContent = c.stats.tokens_per_second.toFixed(1) + ' tokens/s, ' +
      c.stats.generated_tokens + ' generated, ' + c.stats.active_slots + ' active, ' + c.stats.queue_depth + ' queued';
    document.getElementById('decisions').textContent = c.decisions.map(d => d.text).join('\n');
  } catch (e) { document.getElementById('stats').textContent = 'unreachable'; }
}
document.getElementById('chat').onsubmit = async (ev) => {
  ev.preventDefault();
  const input = document.getElementById('input');
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  messages.push({role: 'user', content: text});
  add('user', text);
  const out = add('assistant', '');
  const r = await fetch('/v1/chat/completions', {method: 'POST', headers: headers(),
    body: JSON.stringify({messages, stream: true, max_tokens: 256})});
  if (!r.ok) { out.className = 'msg error'; out.textContent = (await r.json()).error.message; return; }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', answer = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let at;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') continue;
      const j = JSON.parse(data);
      if (j.error) { out.className = 'msg error'; out.textContent += ' [' + j.error.message + ']'; continue; }
      const delta = j.choices[0].delta.content || '';
      answer += delta;
      out.textContent = answer;
      log.scrollTop = log.scrollHeight;
    }
  }
  messages.push({role: 'assistant', content: answer});
  out.dataset.done = '1';
  refresh();
};
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
)HTML";
  return html;
}

}  // namespace strata::server
