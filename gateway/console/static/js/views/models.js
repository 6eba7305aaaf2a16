// Models view: every public model with its strategy (changeable through PUT
// /admin/models/{name}), its deployments (enable/disable through the admin
// API) with each node's live state, and charts of the latency estimates and
// traffic shares the page has seen in the last minutes.

import { post, put, adminPath, ApiError } from '../api.js';
import { h, replace, setText, syncList, busy, fmtMs, fmtTime, fmtAgo, fmtInt } from '../dom.js';
import { deployments, models, nodesHealth, isEnabled, sumOutcomes, record, history, SPAN_MS } from '../data.js';
import { lineChart } from '../charts.js';

// The strategies and objectives of SPEC 5; the API validates what is sent.
const STRATEGIES = ['simple_shuffle', 'round_robin', 'least_busy', 'latency', 'cost', 'usage', 'adaptive'];
const OBJECTIVES = ['balanced', 'latency', 'cost'];

export default {
  id: 'models',
  title: 'Models',
  mount(root) {
    const err = h('p', { class: 'error', role: 'alert' });
    const list = h('div', { class: 'models' });
    replace(root,
      h('p', { class: 'hint' }, 'State is per node: each node learns its deployments’ health on its own. ' +
        'A deployment cooling down is skipped while another is available; it takes a probe request now and then, and comes back when a probe succeeds or the cooldown ends.'),
      err, list);
    let uid = 0;

    async function refresh() {
      const [deps, mods, health] = await Promise.all([deployments(), models(), nodesHealth()]);
      setText(err, '');
      const names = new Map();
      for (const d of deps) {
        if (!names.has(d.model)) names.set(d.model, []);
        names.get(d.model).push(d);
      }
      const modelInfo = new Map((mods || []).map((m) => [m.name, m]));
      for (const m of mods || []) if (!names.has(m.name)) names.set(m.name, []);
      const now = Date.now();
      const items = [...names.keys()].sort().map((name) => ({ name, deps: names.get(name), info: modelInfo.get(name), missing: mods === null }));
      syncList(list, items, (it) => it.name, (it) => modelCard(it, ++uid, refresh), (el, it) => el._update(it, health, now));
    }
    return { refresh };
  },
};

function modelCard(first, n, refresh) {
  const hid = `model-${n}`;
  const msg = h('p', { class: 'msg', role: 'status' });
  const strategyBox = h('div', { class: 'strategy' });
  const tbody = h('tbody');
  const charts = h('div', { class: 'charts' });
  const sec = h('section', { class: 'panel', 'aria-labelledby': hid, 'data-model': first.name },
    h('h2', { id: hid }, first.name),
    strategyBox,
    msg,
    h('div', { class: 'scroll' }, h('table', { class: 'grid-table', 'aria-label': `Deployments of ${first.name}` },
      h('thead', {}, h('tr', {}, ['Deployment', 'Provider', 'State on each node', 'Enabled']
        .map((c) => h('th', { scope: 'col' }, c)))),
      tbody)),
    charts);

  // strategy form: built once, left alone while the operator edits it
  let form = null;
  function strategyForm(it) {
    if (it.missing) {
      replace(strategyBox, h('p', { class: 'na' }, 'Strategy: not available on this gateway (no /admin/models).'));
      form = null;
      return;
    }
    if (!form) {
      const sid = `strategy-${n}`;
      const oid = `objective-${n}`;
      const strategy = h('select', { id: sid, name: 'strategy' }, STRATEGIES.map((s) => h('option', { value: s }, s)));
      const objective = h('select', { id: oid, name: 'objective' }, OBJECTIVES.map((s) => h('option', { value: s }, s)));
      const apply = h('button', { type: 'submit' }, 'Apply');
      const fieldErr = h('span', { class: 'field-error', id: `strategy-err-${n}` });
      const source = h('span', { class: 'hint' });
      strategy.setAttribute('aria-describedby', fieldErr.id);
      const f = h('form', { class: 'inline-form' },
        h('label', { for: sid }, 'Strategy'), strategy,
        h('label', { for: oid }, 'Objective'), objective,
        apply, source, fieldErr);
      const syncObjective = () => { objective.disabled = strategy.value !== 'adaptive'; };
      strategy.addEventListener('change', () => { f._dirty = true; syncObjective(); });
      objective.addEventListener('change', () => { f._dirty = true; });
      f.addEventListener('submit', (ev) => {
        ev.preventDefault();
        busy(apply, async () => {
          setText(fieldErr, '');
          const body = { strategy: strategy.value };
          if (strategy.value === 'adaptive') body.objective = objective.value;
          try {
            await put(adminPath`/admin/models/${first.name}`, body);
            f._dirty = false;
            setText(msg, `Strategy of ${first.name} is now ${strategy.value}${body.objective ? ' (' + body.objective + ')' : ''}.`);
            await refresh();
          } catch (e) {
            setText(fieldErr, e.message);
          }
        });
      });
      f._set = (info) => {
        setText(source, info.source === 'default' ? 'the default strategy (routing.default_strategy)' : '');
        if (f._dirty || f.contains(document.activeElement)) return;
        strategy.value = info.strategy || STRATEGIES[0];
        objective.value = info.objective || 'balanced';
        syncObjective();
      };
      form = f;
      replace(strategyBox, f);
    }
    form._set(it.info || {});
  }

  sec._update = (it, health, now) => {
    strategyForm(it);
    const nodes = health.nodes;
    const rows = it.deps.slice().sort((a, b) => a.id.localeCompare(b.id));
    syncList(tbody, rows, (d) => d.id, (d) => deploymentRow(d, msg, refresh), (tr, d) => tr._update(d, nodes, now));
    // history: latency (mean over the nodes that have an estimate) and
    // traffic share (recent attempts across nodes, over the pool's)
    const per = rows.map((d) => {
      const hs = nodes.map((nd) => nd.deployments.find((x) => x.id === d.id)).filter(Boolean);
      const lat = hs.map((x) => x.latency_estimate_seconds).filter((v) => v > 0);
      return { id: d.id, lat: lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length : null, n: hs.reduce((a, x) => a + sumOutcomes(x.recent_outcomes), 0) };
    });
    const total = per.reduce((a, p) => a + p.n, 0);
    for (const p of per) {
      if (p.lat !== null) record('lat:' + p.id, p.lat);
      if (total > 0) record('share:' + p.id, p.n / total);
    }
    replace(charts,
      lineChart({
        label: `Latency estimate of ${it.name}${nodes.length > 1 ? ' (mean over nodes)' : ''}`,
        series: rows.map((d) => ({ name: d.id, points: history('lat:' + d.id) })),
        spanMs: SPAN_MS, yFormat: (v) => fmtMs(v) === '–' ? '0' : fmtMs(v),
      }),
      lineChart({
        label: `Traffic share of ${it.name}`,
        series: rows.map((d) => ({ name: d.id, points: history('share:' + d.id) })),
        spanMs: SPAN_MS, yMax: 1, yFormat: (v) => Math.round(v * 100) + '%',
      }));
  };
  return sec;
}

function deploymentRow(d, msg, refresh) {
  const toggle = h('button', { type: 'button', class: 'small' });
  const enabledText = h('span', { class: 'enabled-text' });
  const tr = h('tr', {},
    h('th', { scope: 'row' }), h('td'), h('td', { class: 'nodes-cell' }),
    h('td', { class: 'actions' }, enabledText, toggle));
  let on = true;
  toggle.addEventListener('click', () => busy(toggle, async () => {
    const id = tr.dataset.id;
    try {
      await post(adminPath`/admin/deployments/${id}/` + (on ? 'disable' : 'enable'));
      setText(msg, `${id} ${on ? 'disabled' : 'enabled'}.`);
      await refresh();
    } catch (e) {
      setText(msg, `${on ? 'Disabling' : 'Enabling'} ${id} failed: ${e instanceof ApiError ? e.message : e}`);
    }
  }));
  tr._update = (dep, nodes, now) => {
    tr.dataset.id = dep.id;
    on = isEnabled(dep);
    const c = tr.children;
    setText(c[0], dep.id);
    setText(c[1], dep.provider || '–');
    const per = nodes.map((nd) => ({ node: nd.node, hl: nd.deployments.find((x) => x.id === dep.id) }));
    // one line per node, in a table of its own so the columns line up
    replace(c[2], h('table', { class: 'per-node', 'aria-label': `${dep.id} on each node` },
      h('thead', {}, h('tr', {}, ['Node', 'State', 'Latency estimate', 'In flight', 'Recent outcomes'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, per.map(({ node, hl }) => h('tr', {},
        h('th', { scope: 'row', class: 'nowrap' }, node),
        h('td', {}, stateOf(on, hl, now)),
        h('td', { class: 'nowrap' }, hl ? fmtMs(hl.latency_estimate_seconds) : '–'),
        h('td', {}, hl ? fmtInt(hl.in_flight) : '–'),
        h('td', {}, outcomes(hl)))))));
    setText(enabledText, on ? 'enabled' : 'disabled');
    setText(toggle, on ? 'Disable' : 'Enable');
    tr.classList.toggle('off', !on);
  };
  return tr;
}

function stateOf(enabled, x, now) {
  if (!enabled) return h('span', { class: 'state off' }, 'disabled');
  if (!x) return h('span', { class: 'state' }, 'no state yet');
  if (x.cooling) {
    const parts = [`cooling until ${fmtTime(x.cooldown_until)} (${fmtAgo(x.cooldown_until, now)})`];
    if (x.cooldown_trigger) parts.push(`after ${x.cooldown_trigger}`);
    if (x.probing) parts.push('probing now');
    else if (x.next_probe) parts.push(new Date(x.next_probe).getTime() <= now ? 'probe due' : `next probe ${fmtAgo(x.next_probe, now)}`);
    return h('span', { class: 'state cooling' }, parts.join(' · '));
  }
  if (x.probing) return h('span', { class: 'state probing' }, 'probing');
  if (x.streak > 0) return h('span', { class: 'state warn' }, `healthy · ${x.streak} failure${x.streak > 1 ? 's' : ''} in a row`);
  return h('span', { class: 'state ok' }, 'healthy');
}

function outcomes(x) {
  if (!x || !x.recent_outcomes) return '–';
  const e = Object.entries(x.recent_outcomes).sort((a, b) => b[1] - a[1]);
  if (!e.length) return 'none';
  return e.map(([k, v]) => `${k} ${v}`).join(', ');
}
