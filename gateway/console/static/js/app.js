// app.js: sign-in, navigation between views and the refresh loop. A view
// is a module whose default export has {id, title, mount(root) -> {refresh,
// unmount?}}; the app refreshes the shown view every REFRESH_MS, one
// refresh at a time, and pauses while the tab is hidden.

import { adminKey, setAdminKey, get, whenUnauthorized, ApiError } from './api.js';
import { h, replace, setText, fmtTime } from './dom.js';
import { clearHistory } from './data.js';
import cluster from './views/cluster.js';
import models from './views/models.js';
import fallbacks from './views/fallbacks.js';
import teams from './views/teams.js';
import smart from './views/smart.js';
import requests from './views/requests.js';
import usage from './views/usage.js';
import cache from './views/cache.js';

const REFRESH_MS = 2000;
const VIEWS = [cluster, models, fallbacks, teams, usage, smart, requests, cache];

const $ = (id) => document.getElementById(id);

let current = null; // {view, inst, timer, gen}
let generation = 0;

function signedIn() {
  return adminKey() !== '';
}

function showSignIn(message) {
  stopView();
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('view').hidden = true;
  $('signin').hidden = false;
  setText($('signin-error'), message || '');
  setText($('updated'), '');
  $('admin-key').value = '';
  $('admin-key').focus();
}

async function signIn(ev) {
  ev.preventDefault();
  const key = $('admin-key').value.trim();
  const btn = $('signin-button');
  if (!key) {
    setText($('signin-error'), 'Enter the admin key (admin.key in the configuration).');
    return;
  }
  btn.disabled = true;
  try {
    await get('/admin/cluster', { key, signOutOn401: false });
    setAdminKey(key);
    $('admin-key').value = '';
    setText($('signin-error'), '');
    route();
  } catch (err) {
    const msg = err instanceof ApiError && err.unauthorized
      ? 'The admin API refused this key. Use the value of admin.key (SWITCHYARD_ADMIN_KEY).'
      : 'Sign-in failed: ' + err.message;
    setText($('signin-error'), msg);
  } finally {
    btn.disabled = false;
  }
}

function signOut(message) {
  setAdminKey('');
  clearHistory();
  showSignIn(message);
}

function stopView() {
  generation++;
  if (current) {
    clearTimeout(current.timer);
    if (current.inst.unmount) current.inst.unmount();
    current = null;
  }
}

function viewFromHash() {
  const [id, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  const view = VIEWS.find((v) => v.id === id) || VIEWS[0];
  return { view, arg: rest.length ? decodeURIComponent(rest.join('/')) : '' };
}

function route() {
  if (!signedIn()) {
    showSignIn();
    return;
  }
  const { view, arg } = viewFromHash();
  $('signin').hidden = true;
  $('nav').hidden = false;
  $('signout').hidden = false;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.view === view.id) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (current && current.view === view) {
    if (current.inst.open) current.inst.open(arg);
    return;
  }
  stopView();
  setText($('updated'), 'Loading…');
  const root = $('view');
  root.hidden = false;
  replace(root);
  document.title = `${view.title} · Switchyard console`;
  const heading = h('h1', { tabindex: '-1' }, view.title);
  root.append(heading);
  const body = h('div', { class: 'view-body' });
  root.append(body);
  const inst = view.mount(body, { arg });
  current = { view, inst, timer: 0 };
  if (document.activeElement === document.body || document.activeElement?.closest('#nav')) heading.focus({ preventScroll: true });
  tick(generation);
}

async function tick(gen) {
  if (!current || gen !== generation) return;
  if (document.visibilityState !== 'hidden') {
    try {
      await current.inst.refresh();
      if (gen !== generation) return;
      setText($('updated'), 'Updated ' + fmtTime(Date.now()));
      $('updated').classList.remove('stale');
    } catch (err) {
      if (gen !== generation) return;
      setText($('updated'), 'Refresh failed: ' + err.message);
      $('updated').classList.add('stale');
    }
  }
  if (current && gen === generation) current.timer = setTimeout(() => tick(gen), REFRESH_MS);
}

function init() {
  const nav = $('nav');
  replace(nav, h('ul', {}, VIEWS.map((v) => h('li', {}, h('a', { href: '#' + v.id, 'data-view': v.id }, v.title)))));
  $('signin-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', () => signOut('Signed out. The key was removed from this tab.'));
  whenUnauthorized(() => signOut('The admin API stopped accepting the key (it was changed?). Sign in again.'));
  window.addEventListener('hashchange', route);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && current) {
      clearTimeout(current.timer);
      tick(generation);
    }
  });
  route();
}

init();
