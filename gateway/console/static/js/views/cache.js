// Cache view: the response cache's hit rate and savings per model and per
// team (GET /admin/cache/stats: summed over every node when the gateway
// shares Redis, this node's own otherwise), and a purge of a team's, a
// model's or every entry on every node (DELETE /admin/cache), confirmed in
// a dialog first.

import { get, del, ApiError } from '../api.js';
import { h, replace, setText, syncList, busy, fmtInt, fmtUSD } from '../dom.js';
import { record, history, SPAN_MS } from '../data.js';
import { lineChart } from '../charts.js';

export default {
  id: 'cache',
  title: 'Cache',
  mount(root) {
    const summary = h('dl', { class: 'cards' });
    const note = h('p', { class: 'hint' });
    const err = h('p', { class: 'error', role: 'alert' });
    const models = statTable('cache-models-h', 'Model');
    const teams = statTable('cache-teams-h', 'Team');
    const chart = h('div');

    // purge: a team (or every team) and, for a team, one model (or all)
    const team = h('select', { id: 'cache-purge-team', name: 'team' });
    const model = h('select', { id: 'cache-purge-model', name: 'model' });
    const purge = h('button', { type: 'button', class: 'danger' }, 'Purge…');
    const msg = h('p', { class: 'msg', role: 'status' });
    const question = h('p', { id: 'cache-confirm-text' });
    const confirmBtn = h('button', { type: 'button', class: 'danger', value: 'purge' }, 'Purge');
    const cancelBtn = h('button', { type: 'button', value: 'cancel' }, 'Cancel');
    const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': 'cache-confirm-h', 'aria-describedby': question.id },
      h('h2', { id: 'cache-confirm-h' }, 'Purge cached answers?'), question,
      h('div', { class: 'actions' }, confirmBtn, cancelBtn));
    const form = h('div', { class: 'inline-form' },
      h('label', { for: team.id }, 'Team'), team,
      h('label', { for: model.id }, 'Model'), model,
      purge);

    replace(root,
      summary, err, note,
      h('h2', { id: 'cache-models-h' }, 'By model'), h('div', { class: 'scroll' }, models.table),
      h('h2', { id: 'cache-teams-h' }, 'By team'), h('div', { class: 'scroll' }, teams.table),
      h('h2', {}, 'Hit rate'), chart,
      h('h2', {}, 'Purge'),
      h('p', { class: 'hint' }, 'Removes the stored answers on every node and in Redis; the next identical request calls the upstream again.'),
      form, msg, dialog);

    let names = { teams: [], models: [] };
    options(team, 'All teams', []);
    options(model, 'All models', []);
    const scopeText = () => {
      const t = team.value, m = model.value;
      if (!t) return 'every cached answer of every team';
      return m ? `the cached answers of team ${t} for model ${m}` : `every cached answer of team ${t}`;
    };
    team.addEventListener('change', () => { model.disabled = !team.value; if (!team.value) model.value = ''; });
    model.disabled = true;
    purge.addEventListener('click', () => {
      setText(question, `This removes ${scopeText()}, on every node. It cannot be undone.`);
      dialog.showModal();
      cancelBtn.focus();
    });
    cancelBtn.addEventListener('click', () => { dialog.close(); purge.focus(); });
    confirmBtn.addEventListener('click', () => busy(confirmBtn, async () => {
      const scope = scopeText();
      try {
        const r = await del('/admin/cache' + scopeOf(team.value, model.value));
        setText(msg, `Purged ${scope}: ${fmtInt(r.removed)} ${r.removed === 1 ? 'entry' : 'entries'} removed${r.shared ? ' from the shared cache' : ' on this node (no shared cache)'}.`);
        await refresh();
      } catch (e) {
        setText(msg, `Purging ${scope} failed: ${e instanceof ApiError ? e.message : e}`);
      } finally {
        dialog.close();
        purge.focus();
      }
    }));

    async function refresh() {
      const s = await get('/admin/cache/stats');
      setText(err, '');
      replace(summary,
        card('Scope', s.shared ? 'cluster (every node)' : 'this node'),
        card('Hit rate', pct(s.hit_rate), 'hit-rate'),
        card('Hits', fmtInt(s.hits)),
        card('Misses', fmtInt(s.misses)),
        card('Coalesced', fmtInt(s.coalesced)),
        card('Tokens saved', fmtInt(s.saved_tokens)),
        card('USD saved', fmtUSD(s.saved_usd)),
        card('Entries stored', `${fmtInt(s.entries)} (${fmtBytes(s.bytes)})`));
      setText(note, s.shared
        ? 'Summed over every node: each node adds its counts every 2 seconds. Entries and bytes count what was stored (expiry is not counted back; a purge resets them).'
        : 'This node only: it has no shared cache (no Redis, or Redis unreachable).');
      models.update(s.models || [], (r) => r.model);
      teams.update(s.teams || [], (r) => r.team);
      record('cache-hit-rate', s.hit_rate || 0);
      for (const m of s.models || []) record('cache-hit-rate:' + m.model, m.hit_rate || 0);
      replace(chart, lineChart({
        label: 'Hit rate (hits and coalesced of all cacheable requests, since the counters started), by model',
        series: [{ name: 'all models', points: history('cache-hit-rate') }]
          .concat((s.models || []).map((m) => ({ name: m.model, points: history('cache-hit-rate:' + m.model) }))),
        spanMs: SPAN_MS,
        yMax: 1,
        yFormat: pct,
      }));
      const next = { teams: (s.teams || []).map((r) => r.team), models: (s.models || []).map((r) => r.model) };
      if (next.teams.join('\n') !== names.teams.join('\n')) options(team, 'All teams', next.teams);
      if (next.models.join('\n') !== names.models.join('\n')) options(model, 'All models', next.models);
      names = next;
    }
    return { refresh };
  },
};

// statTable is a table of counters, one row per model or team, kept in place.
function statTable(labelledBy, what) {
  const tbody = h('tbody');
  const table = h('table', { class: 'grid-table', 'aria-labelledby': labelledBy },
    h('thead', {}, h('tr', {}, [what, 'Hit rate', 'Hits', 'Misses', 'Coalesced', 'Bypasses', 'Tokens saved', 'USD saved']
      .map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  return {
    table,
    update(rows, name) {
      syncList(tbody, rows, name, () => {
        const tr = h('tr', {}, h('th', { scope: 'row' }));
        tr.append(h('td', {}, h('meter', { min: 0, max: 1, low: 0.2, optimum: 1 }), ' ', h('span', { class: 'bar-val' })));
        for (let i = 0; i < 6; i++) tr.append(h('td', { class: 'num' }));
        return tr;
      }, (tr, r) => {
        const c = tr.children;
        setText(c[0], name(r) || '–');
        c[1].querySelector('meter').value = r.hit_rate || 0;
        setText(c[1].querySelector('span'), pct(r.hit_rate));
        setText(c[2], fmtInt(r.hits));
        setText(c[3], fmtInt(r.misses));
        setText(c[4], fmtInt(r.coalesced));
        setText(c[5], fmtInt(r.bypasses));
        setText(c[6], fmtInt(r.saved_tokens));
        setText(c[7], fmtUSD(r.saved_usd));
      });
    },
  };
}

// options refills a select, keeping its choice when it still exists.
function options(sel, all, values) {
  const keep = sel.value;
  replace(sel, h('option', { value: '' }, all), values.map((v) => h('option', { value: v }, v)));
  sel.value = values.includes(keep) ? keep : '';
}

function card(label, value, cls) {
  return h('div', { class: 'card' }, h('dt', {}, label), h('dd', { class: cls || null }, value));
}

function pct(v) {
  return `${(100 * (Number(v) || 0)).toFixed(1)}%`;
}

function fmtBytes(n) {
  const v = Number(n) || 0;
  if (v < 1024) return `${v} B`;
  if (v < 1024 * 1024) return `${(v / 1024).toFixed(1)} KiB`;
  return `${(v / 1024 / 1024).toFixed(1)} MiB`;
}

export { pct, fmtBytes, scopeOf };

// scopeOf is the purge's query for a team and model ("" for all): a model
// only with its team, as the admin API requires.
function scopeOf(team, model) {
  const q = new URLSearchParams();
  if (team) q.set('team', team);
  if (team && model) q.set('model', model);
  return q.size ? '?' + q : '';
}
