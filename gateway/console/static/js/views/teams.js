// Teams view: each team's limits against its live, cluster-wide usage (GET
// /admin/teams/{name}/usage), its budget, and its keys: issued through the
// admin API (the clear key is shown once, with a copy button) and revoked.

import { get, post, del, adminPath, optional, ApiError } from '../api.js';
import { h, replace, setText, syncList, busy, fmtInt, fmtUSD, fmtDateTime, fmtAgo, limitText } from '../dom.js';

const MAX_TEAMS = 50;

export default {
  id: 'teams',
  title: 'Teams',
  mount(root) {
    const err = h('p', { class: 'error', role: 'alert' });
    const na = h('div');
    const list = h('div', { class: 'teams' });
    const more = h('p', { class: 'hint' });
    replace(root, err, na, list, more);
    let uid = 0;

    async function refresh() {
      const r = await optional(get('/admin/teams'));
      if (r.missing) {
        replace(na, h('p', { class: 'na' }, 'Teams are not available on this gateway (no /admin/teams): teams and keys come from the configuration file only.'));
        replace(list);
        return;
      }
      replace(na);
      let teams = Array.isArray(r.data) ? r.data : r.data.teams || [];
      if (!Array.isArray(teams)) teams = Object.entries(teams).map(([name, v]) => ({ name, ...v }));
      teams = teams.slice().sort((a, b) => a.name.localeCompare(b.name));
      setText(more, teams.length > MAX_TEAMS ? `Showing the first ${MAX_TEAMS} of ${teams.length} teams.` : '');
      teams = teams.slice(0, MAX_TEAMS);
      const details = await Promise.all(teams.map(async (t) => {
        const [usage, keys] = await Promise.all([
          get(adminPath`/admin/teams/${t.name}/usage`).catch((e) => ({ error: e })),
          get(adminPath`/admin/teams/${t.name}/keys`).catch((e) => ({ error: e })),
        ]);
        return { team: t, usage, keys };
      }));
      setText(err, '');
      syncList(list, details, (d) => d.team.name, (d) => teamCard(d.team.name, ++uid, refresh), (el, d) => el._update(d));
    }
    return { refresh };
  },
};

function teamCard(name, n, refresh) {
  const hid = `team-${n}`;
  const allow = h('p', { class: 'allow' });
  const limits = h('div', { class: 'limits' });
  const budget = h('p', { class: 'budget' });
  const keysBody = h('tbody');
  const keysNote = h('p', { class: 'hint' });
  const msg = h('p', { class: 'msg', role: 'status' });
  const reveal = h('div', { class: 'reveal', hidden: true });

  const kname = h('input', { id: `key-name-${n}`, name: 'name', autocomplete: 'off' });
  const kexp = h('input', { id: `key-exp-${n}`, name: 'expires_at', type: 'datetime-local' });
  const kerr = h('span', { class: 'field-error', id: `key-err-${n}` });
  kname.setAttribute('aria-describedby', kerr.id);
  const issue = h('button', { type: 'submit' }, 'Issue key');
  const form = h('form', { class: 'inline-form' },
    h('label', { for: kname.id }, 'Key name'), kname,
    h('label', { for: kexp.id }, 'Expires at (optional)'), kexp,
    issue, kerr);

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    busy(issue, async () => {
      setText(kerr, '');
      const body = { name: kname.value.trim() };
      if (kexp.value) body.expires_at = new Date(kexp.value).toISOString();
      try {
        const k = await post(adminPath`/admin/teams/${name}/keys`, body);
        kname.value = '';
        kexp.value = '';
        showKey(k);
        await refresh();
      } catch (e) {
        setText(kerr, e.message);
      }
    });
  });

  function showKey(k) {
    const field = h('input', { id: `new-key-${n}`, readonly: true, class: 'mono', props: { value: k.key } });
    const copy = h('button', { type: 'button' }, 'Copy');
    const done = h('button', { type: 'button', class: 'ghost' }, 'Done');
    const copied = h('span', { class: 'msg', role: 'status' });
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(k.key);
      } catch {
        field.select();
        document.execCommand('copy');
      }
      setText(copied, 'Copied.');
    });
    done.addEventListener('click', () => {
      replace(reveal);
      reveal.hidden = true;
      kname.focus();
    });
    replace(reveal,
      h('p', { class: 'strong' }, `New key “${k.name || k.id}” for ${name}. It is shown only now: copy it and hand it over; the gateway keeps only its SHA-256.`),
      h('div', { class: 'inline-form' }, h('label', { for: field.id }, 'New key'), field, copy, done, copied));
    reveal.hidden = false;
    field.focus();
    field.select();
  }

  const sec = h('section', { class: 'panel', 'aria-labelledby': hid, 'data-team': name },
    h('h2', { id: hid }, name),
    allow, limits, budget,
    h('h3', {}, 'Keys'),
    msg,
    h('div', { class: 'scroll' }, h('table', { class: 'grid-table', 'aria-label': `Keys of ${name}` },
      h('thead', {}, h('tr', {}, ['Name', 'Prefix', 'Source', 'Created', 'Expires', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
      keysBody)),
    keysNote,
    form,
    reveal);

  sec._update = ({ team, usage, keys }) => {
    const models = team.models || [];
    setText(allow, 'Models allowed: ' + (models.length ? models.join(', ') : 'none'));
    if (usage.error) {
      const b = team.budget || {};
      replace(limits,
        h('p', {}, `Limits: ${limitText(team.rpm)} requests/min · ${limitText(team.tpm)} tokens/min · ${limitText(team.max_parallel)} in flight`),
        h('p', { class: usage.error.notAvailable ? 'na' : 'error' },
          usage.error.notAvailable ? 'Live usage is not available on this gateway.' : 'Usage: ' + usage.error.message));
      setText(budget, b.usd ? `Budget: ${fmtUSD(b.usd)} per ${b.period || '–'}.` : 'Budget: none.');
    } else {
      replace(limits,
        bar(`${hid}-rpm`, 'Requests per minute', usage.rpm?.used, usage.rpm?.limit ?? team.rpm),
        bar(`${hid}-tpm`, 'Tokens per minute', usage.tpm?.used, usage.tpm?.limit ?? team.tpm),
        bar(`${hid}-par`, 'In flight', usage.parallel?.in_flight, usage.parallel?.limit ?? team.max_parallel));
      if (usage.shared === false) limits.append(h('p', { class: 'hint' }, `Counted by node ${usage.node || ''} alone: no shared counters in Redis right now.`));
      const b = usage.budget || {};
      if (b.usd) {
        limits.append(bar(`${hid}-bud`, 'Budget', b.spent, b.usd, fmtUSD));
        const resets = b.resets_at
          ? `it resets ${fmtDateTime(b.resets_at)} (${fmtAgo(b.resets_at)})`
          : 'its window opens with the next spend';
        replace(budget,
          b.alerted ? h('span', { class: 'warn-text budget-alert', title: 'The spend crossed budget.alert_at this period' }, '⚠ Budget alert') : null,
          h('span', { class: 'hint' }, ` Budget period ${b.period || '–'}; ${resets}.`));
      } else {
        setText(budget, `Budget: none${b.spent ? ' (spent ' + fmtUSD(b.spent) + ')' : ''}.`);
      }
    }
    if (keys.error) {
      setText(keysNote, keys.error.notAvailable ? 'Keys are not available on this gateway.' : 'Keys: ' + keys.error.message);
      replace(keysBody);
      return;
    }
    const list = Array.isArray(keys) ? keys : keys.keys || [];
    setText(keysNote, list.length ? '' : 'No keys.');
    syncList(keysBody, list, (k) => k.id, () => {
      const revoke = h('button', { type: 'button', class: 'small danger' }, 'Revoke');
      const tr = h('tr', {}, h('th', { scope: 'row' }), h('td', { class: 'mono' }), h('td'), h('td'), h('td'), h('td', { class: 'actions' }, revoke));
      revoke.addEventListener('click', () => busy(revoke, async () => {
        const k = tr._key;
        try {
          await del(adminPath`/admin/teams/${name}/keys/${k.id}`);
          setText(msg, `Revoked ${k.name || k.id} (${k.prefix || ''}…): it stops working on every node within a second.`);
          await refresh();
        } catch (e) {
          setText(msg, `Revoking ${k.name || k.id} failed: ${e instanceof ApiError ? e.message : e}`);
        }
      }));
      tr._revoke = revoke;
      return tr;
    }, (tr, k) => {
      tr._key = k;
      const c = tr.children;
      setText(c[0], k.name || k.id);
      setText(c[1], k.prefix ? k.prefix + '…' : '–');
      setText(c[2], k.source || '–');
      setText(c[3], fmtDateTime(k.created_at));
      setText(c[4], k.expires_at ? fmtDateTime(k.expires_at) : 'never');
      const fromConfig = k.source === 'config';
      tr._revoke.hidden = fromConfig;
      if (fromConfig && !c[5].querySelector('.hint')) c[5].append(h('span', { class: 'hint' }, 'in the config file'));
    });
  };
  return sec;
}

// bar renders "label used / limit" with a meter; no limit: text only.
function bar(id, label, used, limit, fmt = fmtInt) {
  const u = Number(used) || 0;
  if (!limit) {
    return h('div', { class: 'bar-row' }, h('span', { class: 'bar-label', id }, label), h('span', { class: 'bar-val' }, `${fmt(u)} used · ${limitText(0)}`));
  }
  const ratio = u / limit;
  return h('div', { class: 'bar-row' },
    h('label', { class: 'bar-label', for: id + '-m' }, label),
    h('meter', { id: id + '-m', min: 0, max: limit, value: Math.min(u, limit), low: limit * 0.7, high: limit * 0.9, optimum: 0 }),
    h('span', { class: 'bar-val' + (ratio >= 1 ? ' bad-text' : ratio >= 0.9 ? ' warn-text' : '') }, `${fmt(u)} / ${fmt(limit)}`));
}
