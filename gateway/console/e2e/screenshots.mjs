// screenshots.mjs: the README's console pictures, taken from the built-in
// demo (`switchyard` with no arguments) with an admin key set: some mixed
// traffic for a little while so the charts have lines, then the Cluster and
// Models views at laptop width into docs/. Run: npm run screenshots.

import fs from 'node:fs';
import path from 'node:path';
import { buildBinary, freePort, launchBrowser, repoRoot, start, stopAll, tmpDir, waitHTTP } from './lib/harness.mjs';

const ADMIN = 'demo-admin-key';
const KEY = 'sk-switchyard-demo';
const SECONDS = Number(process.env.SECONDS_OF_TRAFFIC || 40);

const dir = tmpDir('sy-shots-');
const bin = buildBinary(dir);
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
start(bin, [], path.join(dir, 'demo.log'), { SWITCHYARD_ADMIN_KEY: ADMIN, SWITCHYARD_SERVER_LISTEN: `127.0.0.1:${port}` });
try {
  await waitHTTP(url + '/readyz', 'demo');
  const browser = await launchBrowser({ width: 1280, height: 860 });
  const page = await browser.newPage();
  await page.goto(url + '/ui/');
  await page.getByLabel('Admin key').fill(ADMIN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('link', { name: 'Models', exact: true }).click();
  const prompts = ['Hello!', 'Summarize this paragraph for me.', 'Prove step by step that sqrt(2) is irrational.', 'thanks!'];
  const end = Date.now() + SECONDS * 1000;
  for (let i = 0; Date.now() < end; i++) {
    const model = ['gpt-4o-mini', 'normal', 'gpt-4o-mini', 'gpt-4o'][i % 4];
    await fetch(url + '/v1/chat/completions', {
      method: 'POST', headers: { Authorization: 'Bearer ' + KEY, 'Content-Type': 'application/json', 'X-Session-Id': 's' + i },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: prompts[i % prompts.length] + ' #' + i }] }),
    }).then((r) => r.arrayBuffer()).catch(() => {});
    await new Promise((r) => setTimeout(r, 60));
  }
  const docs = path.join(repoRoot, 'docs');
  fs.mkdirSync(docs, { recursive: true });
  await page.waitForTimeout(2500);
  await page.locator('section[data-model="gpt-4o-mini"]').screenshot({ path: path.join(docs, 'console-models.png') });
  await page.getByRole('link', { name: 'Cluster', exact: true }).click();
  await page.waitForTimeout(2500);
  await page.screenshot({ path: path.join(docs, 'console-cluster.png') });
  await browser.close();
  console.log('wrote docs/console-models.png and docs/console-cluster.png');
} finally {
  await stopAll();
}
