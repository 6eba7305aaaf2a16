// charts.js: the console's three charts, drawn as SVG by hand: a line
// chart over time, a score histogram with a threshold, and an attempt
// timeline. SVG (not canvas) because the text in it is real text a screen
// reader and a test can read, it scales to any width without redrawing, it
// needs no inline style (the Content-Security-Policy forbids it), and three
// small charts do not justify a dependency. Each chart also has a text
// equivalent next to it (a table or a legend).

import { h } from './dom.js';

export const PALETTE = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2', '#be185d', '#4b5563'];

/** colorFor gives a stable colour to a series name within one chart. */
export function colorFor(i) {
  return PALETTE[i % PALETTE.length];
}

const W = 560;
const H = 180;
const PAD = { l: 54, r: 12, t: 10, b: 24 };

/**
 * lineChart draws series [{name, points: [[tMillis, value]]}] over the
 * window [now - spanMs, now]. yFormat renders axis values. yMax fixes the
 * top of the axis (e.g. 1 for shares); otherwise it follows the data.
 */
export function lineChart({ label, series, spanMs, now = Date.now(), yFormat = String, yMax, minTop = 0 }) {
  const t0 = now - spanMs;
  let top = yMax || 0;
  let samples = 0;
  for (const s of series) for (const [t, v] of s.points) if (t >= t0) { samples++; if (!yMax) top = Math.max(top, v); }
  if (samples === 0) {
    return h('figure', { class: 'chart-box' }, h('figcaption', {}, label), h('p', { class: 'na' }, 'No samples yet: the chart fills while this page is open and the deployments get traffic.'));
  }
  if (!yMax) top = niceTop(Math.max(top, minTop));
  const x = (t) => PAD.l + ((t - t0) / spanMs) * (W - PAD.l - PAD.r);
  const y = (v) => H - PAD.b - (v / top) * (H - PAD.t - PAD.b);
  const grid = [];
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    grid.push(h('line', { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v), class: 'grid' }));
    grid.push(h('text', { x: PAD.l - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, yFormat(v)));
  }
  const mins = Math.round(spanMs / 60000);
  for (let m = 0; m <= mins; m++) {
    const t = now - m * 60000;
    grid.push(h('text', { x: x(t), y: H - 6, 'text-anchor': 'middle', class: 'axis' }, m === 0 ? 'now' : `-${m} min`));
  }
  const lines = series.map((s, i) => {
    const pts = s.points.filter(([t]) => t >= t0);
    if (pts.length === 0) return null;
    const d = pts.map(([t, v], j) => `${j ? 'L' : 'M'}${x(t).toFixed(1)},${y(Math.min(v, top)).toFixed(1)}`).join('');
    return h('g', {},
      h('path', { d, class: 'series', stroke: colorFor(i) }),
      h('circle', { cx: x(pts[pts.length - 1][0]), cy: y(Math.min(pts[pts.length - 1][1], top)), r: 3, fill: colorFor(i) }));
  });
  const svg = h('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart' },
    h('title', {}, label), grid, lines);
  const legend = h('ul', { class: 'legend' }, series.map((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    return h('li', {}, h('span', { class: 'swatch', 'data-c': i % PALETTE.length }), `${s.name}: ${last === null ? '–' : yFormat(last)}`);
  }));
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, label), svg, legend);
}

/** niceTop rounds an axis maximum up so that its quarters are round numbers. */
export function niceTop(v) {
  if (!(v > 0)) return 1;
  const q = v / 4;
  const p = 10 ** Math.floor(Math.log10(q));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= q) return 4 * m * p;
  return v;
}

/**
 * scoreHistogram draws a cumulative histogram {le, buckets, count} of
 * integer scores as bars, coloured by the side of the threshold they fall
 * on, with the threshold drawn as a line. Returns the figure and the bins.
 */
export function scoreHistogram({ label, hist, threshold }) {
  const bins = binsOf(hist);
  const top = niceTop(Math.max(4, ...bins.map((b) => b.n)));
  const bw = (W - PAD.l - PAD.r) / Math.max(1, bins.length);
  const y = (v) => H - PAD.b - (v / top) * (H - PAD.t - PAD.b);
  const parts = [];
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    parts.push(h('line', { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v), class: 'grid' }));
    parts.push(h('text', { x: PAD.l - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, Number.isInteger(v) ? v : v.toFixed(1)));
  }
  let thresholdX = null;
  bins.forEach((b, i) => {
    const x0 = PAD.l + i * bw;
    const side = b.lo >= threshold ? 'hard' : b.hi < threshold ? 'easy' : 'mixed';
    parts.push(h('rect', { x: x0 + 2, y: y(b.n), width: Math.max(1, bw - 4), height: H - PAD.b - y(b.n), class: 'bar ' + side },
      h('title', {}, `score ${b.label}: ${b.n}`)));
    parts.push(h('text', { x: x0 + bw / 2, y: H - 6, 'text-anchor': 'middle', class: 'axis' }, b.label));
    if (thresholdX === null && b.lo >= threshold) thresholdX = x0;
  });
  if (thresholdX !== null) {
    parts.push(h('line', { x1: thresholdX, x2: thresholdX, y1: PAD.t - 4, y2: H - PAD.b, class: 'threshold' }));
    parts.push(h('text', { x: thresholdX + 4, y: PAD.t + 8, class: 'axis strong' }, `threshold ${threshold}`));
  }
  const svg = h('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart' }, h('title', {}, label), parts);
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, label), svg);
}

/** binsOf turns a cumulative integer-score histogram into per-bin counts. */
export function binsOf(hist) {
  const le = (hist && hist.le) || [];
  const cum = (hist && hist.buckets) || [];
  const bins = [];
  let prevLe = -Infinity;
  let prev = 0;
  for (let i = 0; i < le.length; i++) {
    const lo = prevLe === -Infinity ? Math.min(0, le[i]) : Math.floor(prevLe) + 1;
    const hi = Math.floor(le[i]);
    bins.push({ lo, hi, n: cum[i] - prev, label: lo === hi || prevLe === -Infinity ? String(hi) : `${lo}–${hi}` });
    prev = cum[i];
    prevLe = le[i];
  }
  if (le.length) {
    const lo = Math.floor(prevLe) + 1;
    bins.push({ lo, hi: Infinity, n: Math.max(0, (hist.count || 0) - prev), label: `≥${lo}` });
  }
  return bins;
}

/**
 * timeline draws the attempts of one request [{deployment, start, duration_ns,
 * class, status}] as bars on a shared time axis starting at the request's
 * first attempt.
 */
export function timeline({ label, attempts }) {
  const rowH = 26;
  const height = PAD.t + attempts.length * rowH + PAD.b + 4;
  const starts = attempts.map((a) => new Date(a.start).getTime());
  const t0 = Math.min(...starts);
  const ends = attempts.map((a, i) => starts[i] + (a.duration_ns || 0) / 1e6);
  const span = Math.max(1, Math.max(...ends) - t0);
  const left = 150;
  const right = 34; // room for the last axis label
  const x = (ms) => left + (ms / span) * (W - left - right);
  const parts = [];
  for (let i = 0; i <= 4; i++) {
    const ms = (span * i) / 4;
    parts.push(h('line', { x1: x(ms), x2: x(ms), y1: PAD.t, y2: height - PAD.b, class: 'grid' }));
    parts.push(h('text', { x: x(ms), y: height - 8, 'text-anchor': 'middle', class: 'axis' }, `${Math.round(ms)} ms`));
  }
  attempts.forEach((a, i) => {
    const yy = PAD.t + i * rowH;
    const s = starts[i] - t0;
    const d = (a.duration_ns || 0) / 1e6;
    parts.push(h('text', { x: left - 8, y: yy + 17, 'text-anchor': 'end', class: 'axis strong' }, `${i + 1}. ${a.deployment}`));
    parts.push(h('rect', { x: x(s), y: yy + 4, width: Math.max(3, x(s + d) - x(s)), height: rowH - 8, rx: 3, class: 'attempt ' + classKind(a.class) },
      h('title', {}, `${a.deployment}: ${a.class} ${a.status || ''} after ${d.toFixed(1)} ms`)));
    parts.push(h('text', { x: Math.min(x(s + d) + 6, W - 90), y: yy + 17, class: 'axis' }, `${a.class}${a.status ? ' ' + a.status : ''}`));
  });
  const svg = h('svg', { viewBox: `0 0 ${W} ${height}`, role: 'img', 'aria-label': label, class: 'chart' }, h('title', {}, label), parts);
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, label), svg);
}

/** classKind groups outcome classes into the colours of the timeline. */
export function classKind(cls) {
  if (cls === 'ok') return 'ok';
  if (cls === 'rate_limited' || cls === 'canceled') return 'warn';
  return 'bad';
}

/**
 * stackByDay turns usage rows grouped by day and model ({day, model,
 * cost_usd}) into one series per model over every day of days (0 where a
 * model spent nothing), the models with the largest spend first.
 */
export function stackByDay(rows, days, value = (r) => r.cost_usd) {
  const idx = new Map(days.map((d, i) => [d, i]));
  const by = new Map();
  for (const r of rows || []) {
    const i = idx.get(r.day);
    if (i === undefined) continue;
    if (!by.has(r.model)) by.set(r.model, { name: r.model, values: new Array(days.length).fill(0), total: 0 });
    const s = by.get(r.model);
    const v = Number(value(r)) || 0;
    s.values[i] += v;
    s.total += v;
  }
  return [...by.values()].sort((a, b) => b.total - a.total || a.name.localeCompare(b.name));
}

/** dayRange lists the UTC days from..to (YYYY-MM-DD, both included). */
export function dayRange(from, to) {
  const out = [];
  const end = Date.parse(to + 'T00:00:00Z');
  for (let t = Date.parse(from + 'T00:00:00Z'); Number.isFinite(t) && t <= end && out.length < 400; t += 86400000) {
    out.push(new Date(t).toISOString().slice(0, 10));
  }
  return out;
}

/**
 * stackedBars draws one bar per day, stacked by series [{name, values}]
 * aligned with days, with a legend of each series' total (its text
 * equivalent). yFormat renders axis values.
 */
export function stackedBars({ label, days, series, yFormat = String, empty = 'Nothing yet.' }) {
  const sums = days.map((_, i) => series.reduce((a, s) => a + s.values[i], 0));
  if (!series.length || !sums.some((v) => v > 0)) {
    return h('figure', { class: 'chart-box' }, h('figcaption', {}, label), h('p', { class: 'na' }, empty));
  }
  const top = niceTop(Math.max(...sums));
  const bw = (W - PAD.l - PAD.r) / Math.max(1, days.length);
  const y = (v) => H - PAD.b - (v / top) * (H - PAD.t - PAD.b);
  const parts = [];
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    parts.push(h('line', { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v), class: 'grid' }));
    parts.push(h('text', { x: PAD.l - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, yFormat(v)));
  }
  const every = Math.max(1, Math.ceil(days.length / 6));
  days.forEach((d, i) => {
    const x0 = PAD.l + i * bw;
    let acc = 0;
    series.forEach((s, j) => {
      const v = s.values[i];
      if (!(v > 0)) return;
      parts.push(h('rect', { x: x0 + 1, y: y(acc + v), width: Math.max(1, bw - 2), height: Math.max(0.5, y(acc) - y(acc + v)), fill: colorFor(j), class: 'stack' },
        h('title', {}, `${d} · ${s.name}: ${yFormat(v)}`)));
      acc += v;
    });
    if (i % every === 0 || i === days.length - 1) {
      parts.push(h('text', { x: x0 + bw / 2, y: H - 6, 'text-anchor': 'middle', class: 'axis' }, d.slice(5)));
    }
  });
  const svg = h('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart' }, h('title', {}, label), parts);
  const legend = h('ul', { class: 'legend' }, series.map((s, i) =>
    h('li', {}, h('span', { class: 'swatch', 'data-c': i % PALETTE.length }), `${s.name}: ${yFormat(s.total)}`)));
  return h('figure', { class: 'chart-box' }, h('figcaption', {}, label), svg, legend);
}
