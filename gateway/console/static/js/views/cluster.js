// Cluster view: the nodes seen recently (GET /admin/cluster) with what each
// node's health snapshot says about its traffic (GET /admin/health?node=all).

import { get } from '../api.js';
import { h, replace, setText, syncList, fmtAgo, fmtDateTime, fmtInt } from '../dom.js';
import { nodesHealth, sumOutcomes, record, history, SPAN_MS } from '../data.js';
import { lineChart } from '../charts.js';

export default {
  id: 'cluster',
  title: 'Cluster',
  mount(root) {
    const summary = h('dl', { class: 'cards' });
    const note = h('p', { class: 'hint' });
    const err = h('p', { class: 'error', role: 'alert' });
    const tbody = h('tbody');
    const table = h('table', { class: 'grid-table', 'aria-labelledby': 'nodes-h' },
      h('thead', {}, h('tr', {},
        ['Node', 'Version', 'Last heartbeat', 'Started', 'Redis', 'Catalog version', 'Attempts, last 1–2 min', 'In flight', 'Cooling deployments']
          .map((c) => h('th', { scope: 'col' }, c)))),
      tbody);
    const chart = h('div');
    replace(root,
      summary, err,
      h('h2', { id: 'nodes-h' }, 'Nodes'),
      h('div', { class: 'scroll' }, table),
      note,
      h('h2', {}, 'Upstream attempts per node'),
      chart);

    async function refresh() {
      const [cl, health] = await Promise.all([get('/admin/cluster'), nodesHealth().catch((e) => ({ error: e }))]);
      setText(err, cl.error ? 'Listing the nodes failed: ' + cl.error : '');
      const nodes = Array.isArray(cl.nodes) ? cl.nodes : [];
      const byNode = new Map();
      if (health.nodes) for (const n of health.nodes) byNode.set(n.node, n);
      if (!health.allNodes && health.nodes && health.nodes[0]) {
        // this gateway reports its own health only: it is the answering node
        byNode.set(cl.node || health.nodes[0].node, health.nodes[0]);
      }
      replace(summary,
        card('Answering node', cl.node || '–'),
        card('Redis', cl.redis || '–', 'redis-' + (cl.redis || 'unknown')),
        card('Catalog version', String(cl.catalog_version ?? '–')),
        card('Nodes seen', String(nodes.length)));
      const now = Date.now();
      syncList(tbody, nodes, (n) => n.node, () => {
        const tr = h('tr');
        tr.append(h('th', { scope: 'row' }));
        for (let i = 0; i < 8; i++) tr.append(h('td'));
        return tr;
      }, (tr, n) => {
        const c = tr.children;
        const hl = byNode.get(n.node);
        const deps = hl ? hl.deployments : null;
        const attempts = deps ? deps.reduce((a, d) => a + sumOutcomes(d.recent_outcomes), 0) : null;
        const inflight = deps ? deps.reduce((a, d) => a + (d.in_flight || 0), 0) : null;
        const cooling = deps ? deps.filter((d) => d.cooling).map((d) => d.id) : null;
        setText(c[0], n.node || '–');
        setText(c[1], n.version || '–');
        setText(c[2], n.seen ? fmtAgo(n.seen, now) : n.node === cl.node ? 'this node' : '–');
        setText(c[3], fmtDateTime(n.started));
        setText(c[4], n.redis || '–');
        setText(c[5], String(n.catalog_version ?? '–'));
        // recent_outcomes count the node's current and previous minute
        setText(c[6], attempts === null ? 'not available' : fmtInt(attempts));
        setText(c[7], inflight === null ? '–' : fmtInt(inflight));
        setText(c[8], cooling === null ? '–' : cooling.length ? cooling.join(', ') : 'none');
        c[8].classList.toggle('warn-text', !!(cooling && cooling.length));
        if (attempts !== null) record('node-attempts:' + n.node, attempts);
      });
      setText(note, health.error
        ? 'Health snapshots: ' + health.error.message
        : health.allNodes
          ? 'Attempts: upstream attempts in each node’s current and previous minute (a rolling count, so a rate over one to two minutes). Per-node state comes from the snapshot each node publishes with its heartbeat.'
          : 'This gateway reports health for the node that answered only (no cluster-wide health): other nodes show “not available”.');
      replace(chart, lineChart({
        label: 'Upstream attempts in the last 1–2 minutes, by node',
        series: nodes.map((n) => ({ name: n.node, points: history('node-attempts:' + n.node) })),
        spanMs: SPAN_MS,
        minTop: 4, // counts: whole numbers on the axis
        yFormat: (v) => String(Math.round(v)),
      }));
    }
    return { refresh };
  },
};

function card(label, value, cls) {
  return h('div', { class: 'card' }, h('dt', {}, label), h('dd', { class: cls || null }, value));
}
