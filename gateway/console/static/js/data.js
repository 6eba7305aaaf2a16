// data.js: reads shared by several views, and the page's memory of the
// last minutes (the charts' history). Shapes are taken as the admin API
// gives them; where the API has two shapes (one node's health, or every
// node's) they are read into one list here.

import { get, optional } from './api.js';

/**
 * nodesHealth reads GET /admin/health?node=all and returns
 * {nodes: [{node, seen, deployments: [...]}], allNodes}. allNodes is false
 * when the gateway answered for itself only (a build without cluster-wide
 * health, or a node that cannot reach the others' snapshots).
 */
export async function nodesHealth() {
  const r = await get('/admin/health?node=all');
  if (r && Array.isArray(r.nodes)) {
    return { nodes: r.nodes.map(normNode), allNodes: true, raw: r };
  }
  if (r && r.nodes && typeof r.nodes === 'object') {
    return { nodes: Object.entries(r.nodes).map(([node, v]) => normNode({ node, ...v })), allNodes: true, raw: r };
  }
  return { nodes: [normNode(r || {})], allNodes: false, raw: r };
}

function normNode(n) {
  return {
    node: n.node || n.id || n.node_id || '(this node)',
    seen: n.seen || n.at || n.time || null,
    error: n.error || '',
    deployments: Array.isArray(n.deployments) ? n.deployments : [],
  };
}

/** deployments reads GET /admin/deployments: [{id, model, provider, enabled, ...}]. */
export async function deployments() {
  const r = await get('/admin/deployments');
  return (r && r.deployments) || [];
}

/** isEnabled reads the config's enabled flag (absent means true). */
export const isEnabled = (d) => d.enabled === undefined || d.enabled === null || d.enabled === true;

/**
 * models reads GET /admin/models into [{name, strategy, objective}], or
 * null when this gateway has no such endpoint.
 */
export async function models() {
  const r = await optional(get('/admin/models'));
  if (r.missing) return null;
  const d = r.data;
  let list = Array.isArray(d) ? d : d && (d.models || d.data);
  if (list && !Array.isArray(list)) list = Object.entries(list).map(([name, v]) => ({ name, ...v }));
  return (list || []).map((m) => ({ ...m, name: m.name || m.model || m.id }));
}

/** sumOutcomes adds a deployment's recent outcome counts (every class). */
export function sumOutcomes(rec) {
  let n = 0;
  for (const v of Object.values(rec || {})) n += Number(v) || 0;
  return n;
}

// ---- history ------------------------------------------------------------

/** SPAN_MS is how far back the charts look. */
export const SPAN_MS = 5 * 60 * 1000;
const MAX_POINTS = 400;
const series = new Map(); // name -> [[t, v]]

/** record adds a sample to a named series and drops what is older than the span. */
export function record(name, v, t = Date.now()) {
  let s = series.get(name);
  if (!s) series.set(name, (s = []));
  const last = s[s.length - 1];
  if (last && t - last[0] < 500) last[1] = v;
  else s.push([t, v]);
  while (s.length && (s[0][0] < t - SPAN_MS || s.length > MAX_POINTS)) s.shift();
}

/** history returns a series' samples (empty when none). */
export function history(name) {
  return series.get(name) || [];
}

/** clearHistory forgets every series (on sign-out). */
export function clearHistory() {
  series.clear();
}
