// Requests view: recent requests with filters (GET /admin/requests) and one
// request's audit entry (GET /admin/requests/{id}): the attempt timeline
// drawn, the tier verdict with its signals, degraded, usage and cost.

import { get, optional, adminPath, ApiError } from '../api.js';
import { h, replace, setText, syncList, busy, fmtTime, fmtDateTime, fmtUSD, fmtInt } from '../dom.js';
import { timeline, classKind } from '../charts.js';

export default {
  id: 'requests',
  title: 'Requests',
  mount(root, { arg }) {
    const filters = { team: '', model: '', status: '', limit: '50' };
    const inputs = {};
    const errs = {};
    const fields = [
      ['team', 'Team', 'text'],
      ['model', 'Model', 'text'],
      ['status', 'Status', 'text'],
      ['limit', 'Limit', 'number'],
    ].map(([k, label, type]) => {
      inputs[k] = h('input', { id: 'rq-' + k, name: k, type, autocomplete: 'off', props: { value: filters[k] } });
      if (k === 'limit') Object.assign(inputs[k], { min: 1, max: 500 });
      errs[k] = h('span', { class: 'field-error', id: 'rq-err-' + k });
      inputs[k].setAttribute('aria-describedby', errs[k].id);
      return h('div', { class: 'field' }, h('label', { for: 'rq-' + k }, label), inputs[k], errs[k]);
    });
    const apply = h('button', { type: 'submit' }, 'Apply filters');
    const filterForm = h('form', { class: 'filter-form', 'aria-label': 'Filters' }, fields, h('div', { class: 'buttons' }, apply));
    const idInput = h('input', { id: 'rq-id', name: 'id', autocomplete: 'off', spellcheck: 'false', class: 'mono' });
    const open = h('button', { type: 'submit' }, 'Open');
    const idForm = h('form', { class: 'inline-form', 'aria-label': 'Open a request' },
      h('label', { for: 'rq-id' }, 'Request id'), idInput, open);
    const listNote = h('p', { class: 'hint' });
    const tbody = h('tbody');
    const table = h('table', { class: 'grid-table', 'aria-label': 'Recent requests' },
      h('thead', {}, h('tr', {}, ['Time', 'Request id', 'Team', 'Model', 'Deployment', 'Attempts', 'Status', 'Degraded', 'Duration']
        .map((c) => h('th', { scope: 'col' }, c)))),
      tbody);
    const detail = h('section', { class: 'panel detail', 'aria-labelledby': 'rq-detail-h', hidden: true });

    replace(root, detail, idForm, h('h2', {}, 'Recent requests'), filterForm, listNote, h('div', { class: 'scroll' }, table));

    filterForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const before = { ...filters };
      for (const k of Object.keys(filters)) {
        filters[k] = inputs[k].value.trim();
        setText(errs[k], '');
        inputs[k].removeAttribute('aria-invalid');
      }
      busy(apply, refresh).catch((e) => {
        // the API names the filter it refused: say so there, keep the last good filters
        Object.assign(filters, before);
        const k = e instanceof ApiError ? e.param : '';
        if (errs[k]) {
          setText(errs[k], e.message);
          inputs[k].setAttribute('aria-invalid', 'true');
          inputs[k].focus();
        } else {
          setText(listNote, e.message);
        }
      });
    });
    idForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const id = idInput.value.trim();
      if (id) location.hash = '#requests/' + encodeURIComponent(id);
    });

    let shown = '';
    async function openRequest(id) {
      if (!id) {
        detail.hidden = true;
        shown = '';
        return;
      }
      if (id === shown) return;
      shown = id;
      detail.hidden = false;
      replace(detail, h('h2', { id: 'rq-detail-h' }, 'Request ' + id), h('p', { class: 'hint' }, 'Loading…'));
      try {
        const r = await get(adminPath`/admin/requests/${id}`);
        const entries = Array.isArray(r) ? r : Array.isArray(r.entries) ? r.entries : [r];
        replace(detail, h('h2', { id: 'rq-detail-h', tabindex: '-1' }, 'Request ' + id),
          entries.length > 1 ? h('p', { class: 'hint' }, `${entries.length} requests carry this id (a client reused it); each is shown.`) : null,
          entries.map(renderEntry),
          closeButton());
      } catch (e) {
        replace(detail, h('h2', { id: 'rq-detail-h', tabindex: '-1' }, 'Request ' + id),
          h('p', { class: 'error', role: 'alert' }, e instanceof ApiError && e.status === 404 ? e.message : 'Loading failed: ' + e.message),
          closeButton());
      }
      detail.querySelector('h2').focus();
    }

    function closeButton() {
      const b = h('button', { type: 'button', class: 'ghost' }, 'Close');
      b.addEventListener('click', () => { location.hash = '#requests'; });
      return b;
    }

    async function refresh() {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
      const r = await optional(get('/admin/requests?' + q.toString()));
      if (r.missing) {
        setText(listNote, 'Listing recent requests is not available on this gateway (no /admin/requests); open one by its id, the X-Request-Id response header.');
        replace(tbody);
        table.hidden = true;
        return;
      }
      table.hidden = false;
      const list = Array.isArray(r.data) ? r.data : r.data.requests || r.data.entries || [];
      setText(listNote, list.length ? `${list.length} most recent${filters.team || filters.model || filters.status ? ' matching the filters' : ''}, newest first.` : 'No requests match.');
      syncList(tbody, list, (e) => e.request_id + '\u0000' + e.time + '\u0000' + e.node, () => {
        const tr = h('tr');
        tr.append(h('td'), h('th', { scope: 'row' }), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'), h('td'));
        return tr;
      }, (tr, e) => {
        const c = tr.children;
        setText(c[0], fmtTime(e.time));
        if (c[1]._id !== e.request_id) {
          replace(c[1], h('a', { href: '#requests/' + encodeURIComponent(e.request_id), class: 'mono' }, e.request_id));
          c[1]._id = e.request_id;
        }
        setText(c[2], e.team || '–');
        setText(c[3], e.routed_model && e.routed_model !== e.requested_model ? `${e.requested_model} → ${e.routed_model}` : e.requested_model || '–');
        setText(c[4], e.deployment || '–');
        setText(c[5], String((e.attempts || []).length));
        setText(c[6], String(e.status || '–'));
        c[6].className = e.status >= 400 ? 'bad-text' : '';
        setText(c[7], e.degraded ? 'yes' : 'no');
        c[7].className = e.degraded ? 'warn-text' : '';
        setText(c[8], e.duration_ms !== undefined ? Math.round(e.duration_ms) + ' ms' : '–');
      });
    }

    openRequest(arg);
    return { refresh, open: openRequest };
  },
};

function renderEntry(e) {
  const attempts = e.attempts || [];
  const facts = [
    ['Time', fmtDateTime(e.time)],
    ['Node', e.node],
    ['Team', e.team],
    ['Operation', `${e.operation || 'chat'}${e.stream ? ' (stream)' : ''}`],
    ['Requested model', e.requested_model],
    ['Routed model', e.routed_model || '–'],
    ['Deployment', e.deployment || '–'],
    ['Status', String(e.status)],
    ['Degraded', e.degraded ? `yes: served by a fallback${e.fallback_reason ? ' after a ' + e.fallback_reason + ' failure of the primary' : ''}` : 'no'],
    ['Usage', `${fmtInt(e.prompt_tokens)} prompt + ${fmtInt(e.completion_tokens)} completion tokens`],
    ['Cost', fmtUSD(e.cost_usd)],
    ['Duration', e.duration_ms !== undefined ? `${e.duration_ms.toFixed(1)} ms (gateway overhead ${(e.overhead_ms || 0).toFixed(2)} ms)` : '–'],
    ['Session', e.session_source || 'none detected'],
  ];
  if (e.error) facts.push(['Error', e.error]);
  const t = e.tier;
  return h('article', { class: 'entry' },
    h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', { class: k === 'Degraded' && e.degraded ? 'warn-text' : null }, v ?? '–')])),
    h('h3', {}, 'Tier verdict'),
    t
      ? h('div', {},
        h('p', {}, `Alias ${t.alias}: ${t.tier} → ${t.target}, score ${t.score}, source ${t.source}.`),
        t.signals && t.signals.length
          ? h('table', { class: 'grid-table', 'aria-label': 'Signals' },
            h('thead', {}, h('tr', {}, ['Signal', 'Points', 'Detail'].map((c) => h('th', { scope: 'col' }, c)))),
            h('tbody', {}, t.signals.map((s) => h('tr', {}, h('th', { scope: 'row' }, s.name), h('td', {}, '+' + s.points), h('td', {}, s.detail || '')))))
          : h('p', { class: 'hint' }, 'No signal fired.'))
      : h('p', { class: 'hint' }, 'Not a tier alias: no smart routing.'),
    h('h3', {}, `Attempts (${attempts.length})`),
    attempts.length ? timeline({ label: `Attempt timeline of ${e.request_id}`, attempts }) : h('p', { class: 'hint' }, 'No upstream attempt was made.'),
    attempts.length
      ? h('div', { class: 'scroll' }, h('table', { class: 'grid-table', 'aria-label': 'Attempts' },
        h('thead', {}, h('tr', {}, ['#', 'Deployment', 'Model', 'Adapter', 'Start', 'Duration', 'Status', 'Class', 'Notes'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, attempts.map((a, i) => h('tr', {},
          h('th', { scope: 'row' }, String(i + 1)), h('td', {}, a.deployment), h('td', {}, a.model || '–'),
          h('td', {}, `${a.adapter || '–'}${a.transport ? ' / ' + a.transport : ''}`),
          h('td', {}, fmtTime(a.start)), h('td', {}, ((a.duration_ns || 0) / 1e6).toFixed(1) + ' ms'),
          h('td', {}, a.status ? String(a.status) : '–'),
          h('td', { class: classKind(a.class) + '-text' }, a.class),
          h('td', {}, [a.fallback && 'fallback', a.last_resort && 'last resort', a.probe && 'probe', a.error].filter(Boolean).join(' · ')))))))
      : null);
}
