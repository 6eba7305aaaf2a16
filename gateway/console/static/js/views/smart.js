// Smart routing view: per tier alias, the easy/hard split and the score
// histogram against the threshold (GET /admin/smart-routing, the same
// numbers as the smartroute metrics of the node that answers).

import { get, optional } from '../api.js';
import { h, replace, setText, syncList, fmtInt } from '../dom.js';
import { scoreHistogram, binsOf } from '../charts.js';

export default {
  id: 'smart',
  title: 'Smart routing',
  mount(root) {
    const head = h('p', { class: 'hint' });
    const list = h('div');
    replace(root, head, list);

    async function refresh() {
      const r = await optional(get('/admin/smart-routing'));
      if (r.missing) {
        setText(head, 'Smart routing figures are not available on this gateway (no /admin/smart-routing); /metrics has them as switchyard_smartroute_*.');
        replace(list);
        return;
      }
      const d = r.data;
      setText(head, `Threshold ${d.threshold}: a request scoring at least this goes to the hard target (explicit reasoning goes there at once). ` +
        `Counts are node ${d.node || '(this node)'}’s since it started; pins and overrides make the split differ from the histogram.`);
      if (!d.routes.length) {
        replace(list, h('p', { class: 'na' }, 'No tier routes are configured (smart_routing.routes): the feature is off.'));
        return;
      }
      syncList(list, d.routes, (rt) => rt.alias, (rt) => aliasCard(rt.alias), (el, rt) => el._update(rt, d.threshold));
    }
    return { refresh };
  },
};

function aliasCard(alias) {
  const hid = 'alias-' + alias.replace(/[^A-Za-z0-9_-]/g, '_');
  const facts = h('dl', { class: 'cards' });
  const split = h('div', { class: 'split' });
  const chart = h('div');
  const tbody = h('tbody');
  const sec = h('section', { class: 'panel', 'aria-labelledby': hid },
    h('h2', { id: hid }, alias), facts, split, chart,
    h('details', {}, h('summary', {}, 'Histogram as a table'),
      h('table', { class: 'grid-table', 'aria-label': `Score histogram of ${alias}` },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Score'), h('th', { scope: 'col' }, 'Requests'), h('th', { scope: 'col' }, 'Tier by threshold'))),
        tbody)));
  sec._update = (rt, threshold) => {
    const easy = rt.requests.easy || 0;
    const hard = rt.requests.hard || 0;
    const total = easy + hard;
    replace(facts,
      fact('Easy target', rt.easy), fact('Hard target', rt.hard), fact('Default tier', rt.default_tier),
      fact('Requests', fmtInt(total)), fact('Escalations', fmtInt(rt.escalations)));
    const pe = total ? Math.round((easy / total) * 100) : 0;
    const ph = total ? 100 - pe : 0;
    if (!total) {
      replace(split, h('p', { class: 'hint' }, 'No request for this alias yet on this node.'));
    } else {
      const bar = h('div', { class: 'splitbar', role: 'img', 'aria-label': `easy ${pe}%, hard ${ph}%` },
        h('span', { class: 'easy' }), h('span', { class: 'hard' }));
      // widths through the CSSOM: the policy forbids style attributes, not this
      bar.children[0].style.width = pe + '%';
      bar.children[1].style.width = ph + '%';
      replace(split, h('p', {}, `Easy ${fmtInt(easy)} (${pe}%) · hard ${fmtInt(hard)} (${ph}%)`), bar);
    }
    replace(chart, scoreHistogram({ label: `Scores of ${rt.alias} against threshold ${threshold}`, hist: rt.scores, threshold }));
    const bins = binsOf(rt.scores);
    syncList(tbody, bins, (b) => b.label, () => h('tr', {}, h('th', { scope: 'row' }), h('td'), h('td')), (tr, b) => {
      setText(tr.children[0], b.label);
      setText(tr.children[1], fmtInt(b.n));
      setText(tr.children[2], b.lo >= threshold ? 'hard' : b.hi < threshold ? 'easy' : 'both');
    });
  };
  return sec;
}

function fact(k, v) {
  return h('div', { class: 'card' }, h('dt', {}, k), h('dd', {}, v));
}
