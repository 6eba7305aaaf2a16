// Usage view: spend and tokens by level (GET /admin/usage, SPEC 3.1): spend
// per day stacked by model, the top keys and end users, and the budget of
// every level in view against its limit, marked once its spend crossed
// alert_at (the teams', their keys' and their top users' usage answers). Usage rows
// change slowly (the writer sends them every few seconds), so the view
// reads them at most every USAGE_EVERY_MS, or at once when a filter changes.

import { get, enc, adminPath, optional } from '../api.js';
import { h, replace, setText, syncList, fmtInt, fmtUSD, fmtDateTime } from '../dom.js';
import { stackedBars, stackByDay, dayRange } from '../charts.js';

const USAGE_EVERY_MS = 15000;
const TOP = 10;
const MAX_BUDGETS = 50;

export default {
  id: 'usage',
  title: 'Usage',
  mount(root) {
    const teamSel = h('select', { id: 'usage-team', name: 'team' }, h('option', { value: '' }, 'All teams'));
    const daysSel = h('select', { id: 'usage-days', name: 'days' },
      [7, 30, 90].map((n) => h('option', { value: String(n), selected: n === 30 }, `Last ${n} days`)));
    const form = h('form', { class: 'inline-form', role: 'search', 'aria-label': 'Usage filters' },
      h('label', { for: teamSel.id }, 'Team'), teamSel,
      h('label', { for: daysSel.id }, 'Period'), daysSel);
    const err = h('p', { class: 'error', role: 'alert' });
    const na = h('div');
    const note = h('p', { class: 'hint' });
    const chart = h('div', { class: 'charts' });
    const totals = h('dl', { class: 'cards' });
    const keysBody = h('tbody');
    const usersBody = h('tbody');
    const budgets = h('div', { class: 'limits' });
    const budgetsNote = h('p', { class: 'hint' });
    const cols = ['Requests', 'Input tokens', 'Output tokens', 'Cost', 'Cached answers', 'Saved'];
    const table = (label, first, body) => h('div', { class: 'scroll' }, h('table', { class: 'grid-table', 'aria-label': label },
      h('thead', {}, h('tr', {}, [first, 'Team', ...cols].map((c) => h('th', { scope: 'col' }, c)))), body));
    replace(root, form, err, na,
      h('section', { class: 'panel', 'aria-labelledby': 'usage-spend' }, h('h2', { id: 'usage-spend' }, 'Spend per day by model'), note, totals, chart),
      h('section', { class: 'panel', 'aria-labelledby': 'usage-keys' }, h('h2', { id: 'usage-keys' }, 'Top keys'), table('Top keys', 'Key', keysBody)),
      h('section', { class: 'panel', 'aria-labelledby': 'usage-users' }, h('h2', { id: 'usage-users' }, 'Top end users'), table('Top end users', 'End user', usersBody)),
      h('section', { class: 'panel', 'aria-labelledby': 'usage-budgets' }, h('h2', { id: 'usage-budgets' }, 'Budgets'), budgetsNote, budgets));

    let last = 0;
    let gen = 0; // the latest refresh: one a filter change overtook writes nothing when it answers
    let teams = [];
    const changed = () => { last = 0; refresh().catch((e) => setText(err, e.message)); };
    teamSel.addEventListener('change', changed);
    daysSel.addEventListener('change', changed);
    form.addEventListener('submit', (ev) => ev.preventDefault());

    async function refresh() {
      if (Date.now() - last < USAGE_EVERY_MS) return;
      last = Date.now();
      const mine = ++gen;
      const stale = () => mine !== gen;
      const tr = await optional(get('/admin/teams'));
      if (stale()) return;
      teams = tr.missing ? [] : (Array.isArray(tr.data) ? tr.data : tr.data.teams || []);
      teams = teams.slice().sort((a, b) => a.name.localeCompare(b.name));
      syncOptions(teamSel, teams.map((t) => t.name));
      const to = new Date().toISOString().slice(0, 10);
      const n = Number(daysSel.value) || 30;
      const from = new Date(Date.parse(to + 'T00:00:00Z') - (n - 1) * 86400000).toISOString().slice(0, 10);
      const team = teamSel.value;
      const q = (group) => `/admin/usage?group_by=${group}&from=${from}&to=${to}` + (team ? `&team=${enc(team)}` : '');
      const first = await optional(get(q('day,model')));
      if (stale()) return;
      if (first.missing) {
        replace(na, h('p', { class: 'na' }, 'Usage by level is not available on this gateway (no /admin/usage).'));
        return;
      }
      replace(na);
      const [byKey, byUser] = await Promise.all([get(q('team,key')), get(q('team,user'))]);
      if (stale()) return;
      const d = first.data;
      setText(err, '');
      setText(note, (d.shared === false ? `Counted by node ${d.node || ''} alone (no shared usage in Redis right now). ` : '') +
        `${d.from} to ${d.to} (UTC days). Cached answers (the response cache) are not spend: they show apart with what they saved.` +
        (d.folded ? ` ${fmtInt(d.folded)} requests were counted under the end user “(other)” (too many distinct users at once).` : ''));
      const t = d.totals || {};
      replace(totals,
        card('Spend', fmtUSD(t.cost_usd)), card('Requests', fmtInt(t.requests)),
        card('Tokens in / out', `${fmtInt(t.input_tokens)} / ${fmtInt(t.output_tokens)}`),
        card('Cached answers', fmtInt(t.cached_requests)), card('Saved by the cache', fmtUSD(t.saved_usd)));
      const days = dayRange(d.from, d.to);
      replace(chart, stackedBars({
        label: `Spend per day by model, ${d.from} to ${d.to}`, days, series: stackByDay(d.rows, days), yFormat: fmtUSD,
        empty: 'No spend in this period.',
      }));
      fillTop(keysBody, byKey.rows, (r) => r.team + '\u0000' + r.key, (r) => r.key_name || r.key || '(unknown key)');
      fillTop(usersBody, byUser.rows, (r) => r.team + '\u0000' + r.user, (r) => r.user || '(none named)');
      await fillBudgets(team ? teams.filter((x) => x.name === team) : teams, byUser.rows, stale);
    }

    // fillBudgets shows every level in view with a budget against it
    // (SPEC 3.1): the teams, their keys with budgets of their own, and the
    // top end users whose team gives users a budget, each marked when its
    // spend crossed alert_at this period; nothing once stale() says a later
    // refresh began.
    async function fillBudgets(list, userRows, stale) {
      const levels = [];
      for (const t of list) {
        if (t.budget && t.budget.usd > 0) {
          levels.push({ id: 'team:' + t.name, kind: 'team', team: t.name, label: t.name, budget: t.budget, path: adminPath`/admin/teams/${t.name}/usage` });
        }
        for (const k of t.keys || []) {
          if (k.budget && k.budget.usd > 0) {
            levels.push({ id: `key:${t.name}:${k.id}`, kind: 'key', team: t.name, label: `key ${k.name || k.prefix || k.id} · ${t.name}`, budget: k.budget,
              path: adminPath`/admin/teams/${t.name}/keys/${k.id}/usage` });
          }
        }
      }
      const byName = new Map(list.map((t) => [t.name, t]));
      for (const r of (userRows || []).slice(0, TOP)) {
        const t = byName.get(r.team);
        if (!r.user || !t || !(t.user_overrides > 0 || (t.user_limits && t.user_limits.budget && t.user_limits.budget.usd > 0))) continue;
        levels.push({ id: `user:${r.team}:${r.user}`, kind: 'user', team: r.team, label: `user ${r.user} · ${r.team}`, budget: null,
          path: adminPath`/admin/teams/${r.team}/users/${r.user}` });
      }
      const rows = (await Promise.all(levels.slice(0, MAX_BUDGETS * 2).map(async (l) => ({
        ...l, usage: await get(l.path).catch((e) => ({ error: e })),
      })))).filter((r) => r.usage.error || (r.usage.budget && r.usage.budget.usd > 0) || (r.budget && r.budget.usd > 0)).slice(0, MAX_BUDGETS);
      if (stale()) return;
      setText(budgetsNote, rows.length ? '' : 'No team, key or end user in view has a budget (teams[].budget, keys[].budget, user_limits.budget).');
      syncList(budgets, rows, (r) => r.id, (r) => budgetRow(r), (el, r) => el._update(r));
    }
    return { refresh };
  },
};

function card(label, value) {
  return h('div', { class: 'card' }, h('dt', {}, label), h('dd', {}, value));
}

// syncOptions keeps a select's team options after its first, "all" option.
function syncOptions(sel, names) {
  const have = [...sel.options].slice(1).map((o) => o.value);
  if (have.join('\u0000') === names.join('\u0000')) return;
  const cur = sel.value;
  while (sel.options.length > 1) sel.remove(1);
  for (const n of names) sel.append(h('option', { value: n }, n));
  sel.value = names.includes(cur) ? cur : '';
}

function fillTop(body, rows, key, name) {
  const top = (rows || []).slice(0, TOP);
  syncList(body, top, key, () => h('tr', {}, h('th', { scope: 'row' }), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'), h('td')), (tr, r) => {
    const c = tr.children;
    setText(c[0], name(r));
    setText(c[1], r.team);
    setText(c[2], fmtInt(r.requests));
    setText(c[3], fmtInt(r.input_tokens));
    setText(c[4], fmtInt(r.output_tokens));
    setText(c[5], fmtUSD(r.cost_usd));
    setText(c[6], fmtInt(r.cached_requests));
    setText(c[7], fmtUSD(r.saved_usd));
  });
  if (!top.length) replace(body, h('tr', {}, h('td', { colspan: 8, class: 'na' }, 'Nothing in this period.')));
  else if (body.querySelector('td[colspan]')) body.querySelector('td[colspan]').parentElement.remove();
}

// budgetRow is one level's budget meter: its label names the level (the
// team, "key <name> · <team>" or "user <id> · <team>"), and a level whose
// spend crossed alert_at this period carries the budget alert mark.
function budgetRow(level) {
  const id = 'budget-' + level.id.replace(/[^A-Za-z0-9_-]/g, '_');
  const el = h('div', { class: 'bar-row budget-row', 'data-level': level.kind, 'data-team': level.team });
  el._update = ({ label, budget, usage }) => {
    if (usage.error) {
      replace(el, h('span', { class: 'bar-label' }, label), h('span', { class: 'error' }, usage.error.message));
      return;
    }
    const b = usage.budget || {};
    const limit = b.usd || (budget && budget.usd) || 0;
    const spent = Number(b.spent) || 0;
    const ratio = limit > 0 ? spent / limit : 0;
    replace(el,
      h('label', { class: 'bar-label', for: id }, label),
      h('meter', { id, min: 0, max: limit, value: Math.min(spent, limit), low: limit * 0.7, high: limit * 0.9, optimum: 0 }),
      h('span', { class: 'bar-val' + (ratio >= 1 ? ' bad-text' : ratio >= 0.8 ? ' warn-text' : '') },
        `${fmtUSD(spent)} / ${fmtUSD(limit)} per ${periodText(b.period || (budget && budget.period))}` + (b.resets_at ? ` · resets ${fmtDateTime(b.resets_at)}` : ''),
        b.alerted ? h('span', { class: 'warn-text budget-alert', title: `The spend crossed budget.alert_at (${b.alert_at || 0.8} of the budget) this period` }, ' ⚠ Budget alert') : null));
  };
  return el;
}

// periodText reads a budget period after "per": a calendar period as its
// unit, a duration as it is.
function periodText(p) {
  return { daily: 'day', weekly: 'week', monthly: 'month' }[p] || p || '–';
}
