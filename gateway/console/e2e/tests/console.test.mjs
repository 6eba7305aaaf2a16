// The operator console in a real browser (Debian's chromium, headless,
// driven by playwright-core) against real gateway processes on loopback:
// two nodes sharing one redis-server (one node when redis-server is not
// installed), a mockllm upstream the test kills and restarts, and
// simulated providers. Each step leaves a screenshot in artifacts/.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  artifacts, buildBinary, freePort, has, launchBrowser, start, stopAll, tmpDir, waitFor, waitHTTP,
} from '../lib/harness.mjs';

const ADMIN = 'e2e-admin-key-7f3a';
const ALPHA = 'sk-e2e-alpha-team-key';
const BETA = 'sk-e2e-beta-team-key';
const GAMMA = 'sk-e2e-gamma-ci-key';
const DEPLOYMENTS = ['chat-sim', 'chat-mock', 'big-sim', 'embed-sim'];
const MODELS = ['chat', 'big', 'embed'];
const TEAMS = ['alpha', 'beta'];

const env = {}; // filled by before()
let browser;
let page;

function config({ node, redisPort, mockPort, listen }) {
  return `
server: {listen: "127.0.0.1:${listen}", node_id: ${node}}
admin: {key: ${ADMIN}}
data_dir: ${JSON.stringify(path.join(env.dir, 'data-' + node))}
${redisPort ? `redis: {url: "redis://127.0.0.1:${redisPort}/0", key_prefix: "e2e:"}` : ''}
providers:
  - {name: sim-fast, kind: simulated, simulate: {ttfb: 5ms, tokens_per_second: 5000, output_tokens: 8}}
  - {name: sim-big, kind: simulated, simulate: {ttfb: 15ms, tokens_per_second: 5000, output_tokens: 8}}
  - {name: upstream, kind: openai, base_url: "http://127.0.0.1:${mockPort}/v1", api_key: mock-credential}
deployments:
  - {id: chat-sim, model: chat, provider: sim-fast, price: {input: 0.5, output: 1.5}}
  - {id: chat-mock, model: chat, provider: upstream, price: {input: 0.4, output: 1.2}}
  - {id: big-sim, model: big, provider: sim-big, price: {input: 3, output: 15}}
  - {id: embed-sim, model: embed, provider: sim-fast, operations: [embeddings]}
  - {id: cached-sim, model: cached, provider: sim-fast, price: {input: 1, output: 2}}
models:
  - {name: chat, strategy: round_robin}
  - {name: big, strategy: latency}
  - {name: cached, cache: {enabled: true}} # with alpha's switch: the one model and team the cache is on for
teams:
  - {name: alpha, keys: ["${ALPHA}"], models: ["*"], rpm: 600, tpm: 1000000, max_parallel: 8, budget: {usd: 5, period: 24h}, cache: {enabled: true}}
  - {name: beta, keys: ["${BETA}"], models: [chat, auto], rpm: 60}
  - name: gamma # budgets at the key and end-user levels, alerted by the first request (SPEC 3.1)
    models: [chat]
    user_limits: {budget: {usd: 1, period: daily, alert_at: 0.000001}}
    keys: [{key: "${GAMMA}", name: gamma-ci, budget: {usd: 1, period: daily, alert_at: 0.000001}}]
routing:
  cooldown_base: 2s
  cooldown_max: 4s
  failures_before_cooldown: 2
  fallbacks:
    - {primary: chat, reason: general, models: [big]}
smart_routing:
  routes:
    - {alias: auto, easy: chat, hard: big}
`;
}

async function startMock() {
  env.mock = start(env.bin, ['mockllm', '-listen', `127.0.0.1:${env.mockPort}`, '-ttfb', '2ms', '-tps', '0'], path.join(env.dir, 'mockllm.log'));
  await waitHTTP(`http://127.0.0.1:${env.mockPort}/v1/models`, 'mockllm');
}

before(async () => {
  fs.mkdirSync(artifacts, { recursive: true });
  env.dir = tmpDir('sy-e2e-');
  env.bin = buildBinary(env.dir);
  env.mockPort = await freePort();
  await startMock();
  env.redisPort = has('redis-server') ? await freePort() : 0;
  if (env.redisPort) {
    env.redis = start('redis-server', ['--port', String(env.redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      path.join(env.dir, 'redis.log'));
    await waitFor(() => new Promise((resolve) => {
      const s = net.connect(env.redisPort, '127.0.0.1', () => { s.end(); resolve(true); });
      s.on('error', () => resolve(false));
    }), 'redis-server');
  } else {
    console.log('# redis-server not installed: one gateway node, no cluster view beyond it');
  }
  env.nodes = [];
  for (const node of env.redisPort ? ['node-a', 'node-b'] : ['node-a']) {
    const listen = await freePort();
    const file = path.join(env.dir, node + '.yaml');
    fs.writeFileSync(file, config({ node, redisPort: env.redisPort, mockPort: env.mockPort, listen }));
    const proc = start(env.bin, ['serve', '-config', file], path.join(env.dir, node + '.log'));
    env.nodes.push({ node, url: `http://127.0.0.1:${listen}`, proc });
  }
  for (const n of env.nodes) await waitHTTP(n.url + '/readyz', n.node);
  env.url = env.nodes[0].url;
  browser = await launchBrowser();
  page = await browser.newPage();
  page.setDefaultTimeout(10_000);
  page.on('pageerror', (e) => { env.pageErrors = (env.pageErrors || []).concat(e.message); });
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) env.consoleErrors = (env.consoleErrors || []).concat(m.text());
  });
});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  await stopAll();
  for (const n of env.nodes || []) {
    const log = path.join(env.dir, n.node + '.log');
    if (fs.existsSync(log)) fs.copyFileSync(log, path.join(artifacts, n.node + '.log'));
  }
});

// ---- helpers ------------------------------------------------------------

async function admin(method, p, body) {
  const r = await fetch(env.url + p, {
    method, headers: { Authorization: 'Bearer ' + ADMIN, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(5000),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

async function chat(key, model, content, headers = {}, url = env.url) {
  const r = await fetch(url + '/v1/chat/completions', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }] }),
    signal: AbortSignal.timeout(10_000),
  });
  await r.arrayBuffer();
  return r;
}

async function shot(name) {
  await page.screenshot({ path: path.join(artifacts, name + '.png'), fullPage: true });
}

async function view(name) {
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { level: 1, name, exact: true }).waitFor();
  // one refresh has run once "Updated" shows after the view changed
  await page.waitForFunction(() => /Updated/.test(document.getElementById('updated').textContent));
}

// a top-level row of a view's table (not a row of a table nested in a cell)
const row = (text) => page.locator('.grid-table > tbody > tr', { hasText: text });

/**
 * Every control in the view can be found by its role and visible label: a
 * button's name is its text, an input's or select's is its <label>.
 */
async function assertControlsNamedByLabel(where) {
  const controls = await page.evaluate(() => {
    const out = [];
    const vis = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
    for (const el of document.querySelectorAll('main button, main input, main select, main a[href], header button, nav a')) {
      if (!vis(el)) continue;
      let role = el.tagName === 'BUTTON' ? 'button' : el.tagName === 'A' ? 'link' : el.tagName === 'SELECT' ? 'combobox' : 'textbox';
      let label = el.tagName === 'BUTTON' || el.tagName === 'A' ? el.textContent.trim() : '';
      if (el.tagName === 'INPUT' || el.tagName === 'SELECT') {
        const l = el.id && document.querySelector(`label[for="${CSS.escape(el.id)}"]`);
        label = l ? l.textContent.trim() : '';
        if (el.type === 'number') role = 'spinbutton';
        if (el.type === 'password') role = 'textbox';
        if (el.getAttribute('list')) role = 'combobox';
      }
      out.push({ role, label, aria: el.getAttribute('aria-label'), type: el.type || '' });
    }
    return out;
  });
  assert.ok(controls.length > 0, `${where}: no controls`);
  for (const c of controls) {
    assert.ok(c.label, `${where}: a ${c.role} has no visible label`);
    assert.equal(c.aria, null, `${where}: ${c.role} "${c.label}" overrides its label with aria-label`);
    if (c.type === 'password' || c.type === 'datetime-local') continue; // roles without a stable mapping
    const n = await page.getByRole(c.role, { name: c.label, exact: true }).count();
    assert.ok(n > 0, `${where}: no ${c.role} named "${c.label}" although one shows that label`);
  }
}

// ---- the tests, in order, sharing one browser ----------------------------

test('sign in with the admin key, kept in the tab only', async () => {
  await page.goto(env.url + '/ui/');
  const csp = (await page.request.get(env.url + '/ui/')).headers()['content-security-policy'];
  assert.match(csp, /frame-ancestors 'none'/);
  await page.getByLabel('Admin key').fill('not-the-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'refused this key' }).waitFor();
  // keyboard only: type the key and press Enter
  await page.getByLabel('Admin key').fill('');
  await page.getByLabel('Admin key').focus();
  await page.keyboard.type(ADMIN);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Cluster' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('switchyard.adminKey')), ADMIN);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.deepEqual(await browser.cookies(), []);
  assert.ok(!page.url().includes(ADMIN));
});

test('cluster: every node, Redis state, catalog version', async () => {
  await view('Cluster');
  for (const n of env.nodes) await row(n.node).first().waitFor({ timeout: 15_000 });
  const redis = env.redisPort ? 'up' : 'disabled';
  await page.locator('.card', { hasText: 'Redis' }).filter({ hasText: redis }).waitFor();
  await page.locator('.card', { hasText: 'Catalog version' }).waitFor();
  await assertControlsNamedByLabel('cluster');
  await shot('cluster');
});

test('keyboard: Tab and Enter move between views, focus lands on the view', async () => {
  await page.getByRole('link', { name: 'Cluster', exact: true }).focus();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Models');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Models' }).waitFor();
  await page.waitForFunction(() => document.activeElement && document.activeElement.tagName === 'H1');
  await page.getByRole('combobox', { name: 'Strategy' }).first().waitFor();
  await page.keyboard.press('Tab'); // from the heading to the first control of the view
  const first = await page.evaluate(() => document.activeElement.tagName + ' ' + (document.activeElement.labels?.[0]?.textContent || document.activeElement.textContent));
  assert.match(first, /^(SELECT Strategy|BUTTON Disable)/, 'the first control after the heading: ' + first);
});

test('models: every model and deployment with its per-node state', async () => {
  await view('Models');
  for (const m of MODELS) await page.getByRole('region', { name: m, exact: true }).waitFor();
  for (const d of DEPLOYMENTS) await row(d).waitFor();
  const cw = await admin('GET', '/admin/health?node=all');
  if (env.nodes.length > 1 && Array.isArray(cw.body.nodes)) { // cluster-wide health: every node's state
    const nodes = await page.getByRole('table', { name: 'chat-sim on each node' }).textContent();
    for (const n of env.nodes) assert.ok(nodes.includes(n.node), `chat-sim lists node ${n.node}: ${nodes}`);
  }
  await assertControlsNamedByLabel('models');
  await shot('models');
});

test('a deployment that fails cools down, shows it, and comes back', async () => {
  await view('Models');
  await env.mock.stop();
  // round robin alternates chat-sim and chat-mock; chat-mock now refuses
  // connections, fails over to chat-sim, and cools after two failures
  for (let i = 0; i < 8; i++) {
    const r = await chat(ALPHA, 'chat', 'hello ' + i);
    assert.equal(r.status, 200, 'the pool still serves while one deployment is down');
  }
  await row('chat-mock').filter({ hasText: 'cooling until' }).waitFor({ timeout: 15_000 });
  await shot('models-cooling');
  // a request while chat-sim is disabled must go to the fallback chain
  await row('chat-sim').getByRole('button', { name: 'Disable', exact: true }).click();
  await row('chat-sim').filter({ hasText: 'disabled' }).getByRole('button', { name: 'Enable', exact: true }).waitFor();
  const off = await admin('GET', '/admin/deployments');
  assert.equal(off.body.deployments.find((d) => d.id === 'chat-sim').enabled, false, 'the admin API agrees: disabled');
  const degraded = await chat(ALPHA, 'chat', 'while the pool is down', { 'X-Request-Id': 'e2e-degraded-1' });
  assert.equal(degraded.status, 200);
  assert.equal(degraded.headers.get('x-switchyard-degraded'), 'true');
  env.degradedId = 'e2e-degraded-1';
  await row('chat-sim').getByRole('button', { name: 'Enable', exact: true }).click();
  await row('chat-sim').getByRole('button', { name: 'Disable', exact: true }).waitFor();
  const on = await admin('GET', '/admin/deployments');
  assert.notEqual(on.body.deployments.find((d) => d.id === 'chat-sim').enabled, false, 'the admin API agrees: enabled');

  await startMock();
  // the cooldown ends (or a probe succeeds): healthy again, and serving
  await waitFor(async () => {
    await chat(ALPHA, 'chat', 'recovered? ' + Date.now());
    return (await row('chat-mock').textContent()).match(/healthy/) && !(await row('chat-mock').textContent()).includes('cooling');
  }, 'chat-mock healthy again', 30_000, 700);
  await shot('models-recovered');
});

test('change a strategy and see the admin API agree', async (t) => {
  await view('Models');
  const card = page.getByRole('region', { name: 'chat', exact: true });
  const na = await card.getByText('not available on this gateway').count();
  if (na) {
    t.diagnostic('no /admin/models on this gateway: the card says so');
    return;
  }
  await card.getByLabel('Strategy', { exact: true }).selectOption('adaptive');
  await card.getByLabel('Objective', { exact: true }).selectOption('latency');
  await card.getByRole('button', { name: 'Apply', exact: true }).click();
  await card.getByText('Strategy of chat is now adaptive').waitFor();
  const r = await admin('GET', '/admin/models');
  const list = Array.isArray(r.body) ? r.body : r.body.models;
  const m = list.find((x) => (x.name || x.model) === 'chat');
  assert.equal(m.strategy, 'adaptive');
  assert.equal(m.objective, 'latency');
});

test('fallbacks: the API validation shows next to the field; add, edit, delete', async () => {
  await view('Fallbacks');
  await row('chat').filter({ hasText: 'general' }).waitFor();
  await page.getByLabel('Primary model').fill('big');
  await page.getByLabel('Reason').selectOption('context_window');
  await page.getByLabel('Fallback models').fill('big');
  await page.getByRole('button', { name: 'Save chain' }).click();
  const err = page.locator('#fb-err-fallbackModels');
  await err.filter({ hasText: /./ }).waitFor();
  assert.equal(await page.getByLabel('Fallback models').getAttribute('aria-invalid'), 'true');
  await shot('fallbacks-validation');
  await page.getByLabel('Fallback models').fill('chat');
  await page.getByRole('button', { name: 'Save chain' }).click();
  await row('big').filter({ hasText: 'context_window' }).waitFor();
  let r = await admin('GET', '/admin/fallbacks');
  assert.ok(r.body.fallbacks.some((c) => c.primaryModel === 'big' && c.reason === 'context_window'));
  // edit the seeded chain: adding embed is refused (it shares no operation with chat)
  await row('chat').filter({ hasText: 'general' }).getByRole('button', { name: 'Edit' }).click();
  assert.equal(await page.getByLabel('Fallback models').inputValue(), 'big');
  await page.getByLabel('Fallback models').fill('big, embed');
  await page.getByRole('button', { name: 'Save chain' }).click();
  await err.filter({ hasText: /embed/ }).waitFor();
  await page.getByLabel('Fallback models').fill('big');
  await page.getByRole('button', { name: 'Save chain' }).click();
  await page.getByText('Saved: chat (general)').waitFor();
  await row('big').filter({ hasText: 'context_window' }).getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('button', { name: 'Undo' }).waitFor();
  await waitFor(async () => (await row('context_window').count()) === 0, 'deleted chain gone');
  r = await admin('GET', '/admin/fallbacks');
  assert.ok(!r.body.fallbacks.some((c) => c.primaryModel === 'big'));
  await assertControlsNamedByLabel('fallbacks');
  await shot('fallbacks');
});

test('teams: limits against usage; issue a key, use it, revoke it', async (t) => {
  await view('Teams');
  const missing = await page.getByText('Teams are not available on this gateway').count();
  if (missing) {
    t.diagnostic('no /admin/teams on this gateway: the view says so');
    await shot('teams');
    return;
  }
  for (const t of TEAMS) await page.getByRole('region', { name: t, exact: true }).waitFor();
  const alpha = page.getByRole('region', { name: 'alpha', exact: true });
  await alpha.getByText(/Requests per minute|Live usage is not available on this gateway/).first().waitFor();
  if (await alpha.getByText('Live usage is not available').count()) {
    t.diagnostic('no /admin/teams/{name}/usage on this gateway: the card says so');
  } else {
    await alpha.getByLabel('Requests per minute').waitFor(); // a meter against rpm 600
    await alpha.getByText(/Budget/).first().waitFor();
  }
  await alpha.getByLabel('Key name').fill('e2e-key');
  await alpha.getByRole('button', { name: 'Issue key' }).click();
  const field = alpha.getByLabel('New key', { exact: true });
  await field.waitFor();
  const key = await field.inputValue();
  assert.match(key, /^sk-sy-.{32,}$/);
  await alpha.getByRole('button', { name: 'Copy', exact: true }).click();
  await alpha.getByText('Copied.').waitFor();
  await shot('teams-key-issued');
  // the key works on every node within a second
  for (const n of env.nodes) {
    await waitFor(async () => (await chat(key, 'chat', 'with the new key', {}, n.url)).status === 200, `new key on ${n.node}`, 5000);
  }
  await alpha.getByRole('button', { name: 'Done', exact: true }).click();
  assert.equal(await alpha.getByLabel('New key', { exact: true }).count(), 0, 'the clear key is shown once');
  await row('e2e-key').getByRole('button', { name: 'Revoke' }).click();
  await waitFor(async () => (await row('e2e-key').count()) === 0, 'revoked key gone from the list');
  for (const n of env.nodes) {
    await waitFor(async () => (await chat(key, 'chat', 'revoked?', {}, n.url)).status === 401, `revoked key refused on ${n.node}`, 5000);
  }
  await assertControlsNamedByLabel('teams');
  await shot('teams');
});

test('usage: spend per day by model, top keys and users, budgets', async (t) => {
  const user = 'e2e-user|one';
  for (let i = 0; i < 3; i++) assert.equal((await chat(ALPHA, 'chat', 'usage ' + i, { 'X-Switchyard-User': user })).status, 200);
  const probe = await admin('GET', '/admin/usage?group_by=user');
  if (probe.status === 404) {
    await view('Usage');
    await page.getByText('Usage by level is not available').waitFor();
    t.diagnostic('no /admin/usage on this gateway: the view says so');
    return;
  }
  // the writer sends usage rows to Redis within its usage interval (10 s)
  await waitFor(async () => {
    const r = await admin('GET', '/admin/usage?group_by=user');
    return r.status === 200 && r.body.rows.some((x) => x.user === user && x.requests >= 3);
  }, 'the usage rows in the shared state', 30_000);
  await view('Usage');
  await page.getByRole('img', { name: /Spend per day by model/ }).waitFor();
  const users = page.getByRole('table', { name: 'Top end users' });
  await users.getByRole('rowheader', { name: user, exact: true }).waitFor();
  await page.getByRole('table', { name: 'Top keys' }).locator('tbody tr').first().waitFor();
  await page.getByLabel('alpha', { exact: true }).waitFor(); // alpha's budget meter
  // budgets at every level, each marked once its spend crossed alert_at:
  // gamma's key and its end user
  const gammaUser = 'e2e-budget-user';
  assert.equal((await chat(GAMMA, 'chat', 'budget levels', { 'X-Switchyard-User': gammaUser })).status, 200);
  await waitFor(async () => {
    const r = await admin('GET', '/admin/usage?group_by=user&team=gamma');
    return r.status === 200 && r.body.rows.some((x) => x.user === gammaUser);
  }, "gamma's usage row in the shared state", 30_000);
  await page.getByLabel('Team', { exact: true }).selectOption('gamma');
  for (const label of ['key gamma-ci · gamma', `user ${gammaUser} · gamma`]) {
    const row = page.locator('.budget-row').filter({ has: page.getByLabel(label, { exact: true }) });
    await row.locator('.budget-alert').waitFor({ timeout: 15_000 });
  }
  // the all-teams refresh answers after beta's (alpha's budget usage held
  // back): the view shows beta's, not the answer that came last
  let released;
  const answered = new Promise((r) => { released = r; });
  const holdAlpha = async (route) => { await new Promise((r) => setTimeout(r, 1500)); await route.continue(); released(); };
  await page.route('**/admin/teams/alpha/usage', holdAlpha);
  await page.getByLabel('Team', { exact: true }).selectOption('');
  await page.getByLabel('Team', { exact: true }).selectOption('beta');
  await page.getByText('No team, key or end user in view has a budget', { exact: false }).waitFor();
  // the held answer arrives (if the overtaken refresh still asked: it may
  // stop before) and must change nothing
  await Promise.race([answered, page.waitForTimeout(2500)]);
  await page.waitForTimeout(300);
  await page.getByText('No team, key or end user in view has a budget', { exact: false }).waitFor({ timeout: 1000 });
  await page.unroute('**/admin/teams/alpha/usage', holdAlpha);
  await page.getByLabel('Team', { exact: true }).selectOption('');
  await assertControlsNamedByLabel('usage');
  await shot('usage');
});

test('smart routing: split and score histogram per alias', async () => {
  await chat(ALPHA, 'auto', 'thanks!');
  await chat(ALPHA, 'auto', 'Prove step by step and derive: ```\nfunc main() {\n  x := 1\n}\n``` ' + 'context '.repeat(300));
  await view('Smart routing');
  const card = page.getByRole('region', { name: 'auto', exact: true });
  await card.getByText(/Easy \d+ \(\d+%\) · hard \d+/).waitFor();
  await card.getByRole('img', { name: /Scores of auto against threshold 4/ }).waitFor();
  await shot('smart-routing');
});

test('requests: filter the list and open a degraded request’s timeline', async () => {
  await view('Requests');
  const listed = !(await page.getByText('Listing recent requests is not available').count());
  if (listed) {
    // the API's refusal of a filter shows at that filter
    await page.getByLabel('Status', { exact: true }).fill('abc');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.locator('#rq-err-status').filter({ hasText: /status/ }).waitFor();
    await page.getByLabel('Status', { exact: true }).fill('200');
    await page.getByLabel('Team', { exact: true }).fill('alpha');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('link', { name: env.degradedId, exact: true }).first().click();
  } else {
    await page.getByLabel('Request id').fill(env.degradedId);
    await page.getByRole('button', { name: 'Open', exact: true }).click();
  }
  const detail = page.getByRole('region', { name: 'Request ' + env.degradedId });
  await detail.getByRole('img', { name: 'Attempt timeline of ' + env.degradedId }).waitFor();
  await detail.getByText(/yes: served by a fallback/).waitFor();
  await detail.getByRole('cell', { name: 'big-sim', exact: true }).first().waitFor();
  await assertControlsNamedByLabel('requests');
  await shot('requests-timeline');
});

test('cache: hit rate and savings per model and team; a purge asks first, then reaches every node', async () => {
  const q = 'what does the cache keep?';
  const cacheOf = (r) => r.headers.get('x-switchyard-cache') + ' ' + r.status;
  assert.equal(cacheOf(await chat(ALPHA, 'cached', q)), 'miss 200');
  // the entry reaches Redis through the writer (until then another node
  // finds the first request's coalescing lease and follows it: SPEC 18);
  // then every node answers it
  for (const n of env.nodes) {
    await waitFor(async () => cacheOf(await chat(ALPHA, 'cached', q, { 'Cache-Control': 'only-if-cached' }, n.url)) === 'hit 200', 'the stored entry on ' + n.node, 5000, 50);
  }
  for (const n of env.nodes) assert.equal(cacheOf(await chat(ALPHA, 'cached', q, {}, n.url)), 'hit 200', n.node);

  await view('Cache');
  await page.locator('.card', { hasText: 'Scope' }).filter({ hasText: env.redisPort ? 'cluster' : 'this node' }).waitFor();
  const modelRow = page.getByRole('table', { name: 'By model', exact: true }).locator('tbody > tr', { hasText: 'cached' });
  await modelRow.waitFor();
  const teamRow = page.getByRole('table', { name: 'By team', exact: true }).locator('tbody > tr', { hasText: 'alpha' });
  await teamRow.waitFor();
  // every node's hits are counted once its counts are sent (every 2 s)
  await waitFor(async () => Number((await modelRow.locator('td').nth(1).textContent()).replace(/\D/g, '')) >= env.nodes.length + 1, 'the hits of every node', 10_000);
  assert.match(await modelRow.locator('td').nth(6).textContent(), /^\$0\.0\d|^\$\d/, 'USD saved');
  assert.notEqual(await page.locator('.card', { hasText: 'Hit rate' }).locator('dd').textContent(), '0.0%');
  await assertControlsNamedByLabel('cache');
  await shot('cache');

  // a purge of alpha's "cached" entries: cancelled first, then confirmed
  await page.getByLabel('Team', { exact: true }).selectOption('alpha');
  await page.getByLabel('Model', { exact: true }).selectOption('cached');
  await page.getByRole('button', { name: 'Purge…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Purge cached answers?' });
  await dialog.getByText('the cached answers of team alpha for model cached').waitFor();
  await shot('cache-confirm');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'hidden' });
  assert.equal(cacheOf(await chat(ALPHA, 'cached', q, { 'Cache-Control': 'only-if-cached' })), 'hit 200', 'a cancelled purge removes nothing');
  await page.getByRole('button', { name: 'Purge…' }).click();
  await dialog.getByRole('button', { name: 'Purge', exact: true }).click();
  await page.getByRole('status').filter({ hasText: 'Purged the cached answers of team alpha for model cached: 1 entry removed' }).waitFor();
  for (const n of env.nodes) {
    assert.equal(cacheOf(await chat(ALPHA, 'cached', q, { 'Cache-Control': 'only-if-cached' }, n.url)), 'miss 504', 'after the purge on ' + n.node);
  }
  await shot('cache-purged');
});

test('phone width: no view scrolls sideways as a page', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const name of ['Cluster', 'Models', 'Teams', 'Usage', 'Requests', 'Cache']) {
    await view(name);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(over <= 1, `${name} overflows the phone width by ${over}px`);
  }
  await shot('phone-requests');
  await page.setViewportSize({ width: 1280, height: 900 });
});

test('sign out forgets the key; no page error on the way', async () => {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Admin key').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('switchyard.adminKey')), null);
  assert.deepEqual(env.pageErrors || [], [], 'uncaught errors in the page');
  assert.deepEqual(env.consoleErrors || [], [], 'console errors in the page');
});
