// harness.mjs: the processes a browser test needs, on loopback only: the
// switchyard binary (built once), redis-server when it is installed, a
// mockllm upstream the test can kill and restart, gateway nodes, and
// Debian's chromium driven by playwright-core. Every wait is bounded and
// every process started here is stopped by its own pid.

import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../../..');
export const artifacts = path.resolve(here, '../artifacts');

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// Without these flags chromium stalls on a closed network (it tries to
// reach update, sync and QUIC endpoints at start).
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const children = new Set();

/** tmpDir makes a fresh folder for this run. */
export function tmpDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** freePort asks the kernel for a free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** has reports whether a command is on PATH. */
export function has(cmd) {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** buildBinary builds cmd/switchyard once (or uses $E2E_SWITCHYARD_BIN). */
export function buildBinary(dir) {
  if (process.env.E2E_SWITCHYARD_BIN) return process.env.E2E_SWITCHYARD_BIN;
  const out = path.join(dir, 'switchyard');
  execFileSync('go', ['build', '-o', out, './cmd/switchyard'], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
  return out;
}

/**
 * start runs a process with its output in logFile; stop() ends it by pid.
 * The gateway reads every SWITCHYARD_* variable as a config override, so
 * none of the caller's reaches it: only those given in env.
 */
export function start(cmd, args, logFile, env = {}) {
  const log = fs.openSync(logFile, 'a');
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SWITCHYARD_')));
  const child = spawn(cmd, args, { stdio: ['ignore', log, log], env: { ...base, ...env } });
  fs.closeSync(log);
  children.add(child);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.once('exit', () => children.delete(child));
  return {
    pid: child.pid,
    exited,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** stopAll ends every process this harness started that still runs. */
export async function stopAll() {
  await Promise.all([...children].map((c) => {
    if (c.exitCode !== null || c.signalCode !== null) return null;
    c.kill('SIGKILL');
    return new Promise((r) => c.once('exit', r));
  }));
}

/** waitFor polls fn until it returns a truthy value, at most timeoutMs. */
export async function waitFor(fn, what, timeoutMs = 15_000, everyMs = 200) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ': ' + last.message : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** waitHTTP waits until url answers anything below 500. */
export function waitHTTP(url, what, timeoutMs = 20_000) {
  return waitFor(async () => {
    const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
    return r.status < 500;
  }, what, timeoutMs);
}

/** launchBrowser starts chromium with a fresh profile folder. */
export async function launchBrowser(viewport = { width: 1280, height: 900 }) {
  const profile = tmpDir('sy-chromium-');
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport, timeout: 30_000,
  });
  return ctx;
}
