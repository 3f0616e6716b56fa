// Loads the web page in headless Chromium, sends a chat message, waits for the streamed answer and
// the cluster table, checks the DOM and takes a screenshot. Usage: node web_page.mjs URL PNG NODES
import { chromium } from 'playwright-core';

const [url, png, nodes] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
await page.goto(url);
await page.waitForSelector('#nodes tbody tr', { timeout: 20000 });
await page.fill('#input', 'Tell me a story about a cat.');
await page.click('#send');
await page.waitForSelector('.assistant[data-done="1"]', { timeout: 60000 });
const answer = await page.textContent('.assistant');
const rows = await page.$$eval('#nodes tbody tr', (trs) => trs.map((tr) => tr.children[0].textContent));
await page.screenshot({ path: png, fullPage: true });
await browser.close();
let ok = true;
if (!answer || answer.trim().length === 0) { console.log('FAIL the streamed answer is empty'); ok = false; }
if (rows.length !== Number(nodes)) { console.log(`FAIL cluster table has ${rows.length} rows, expected ${nodes}`); ok = false; }
console.log(JSON.stringify({ answer, rows }));
process.exit(ok ? 0 : 1);
