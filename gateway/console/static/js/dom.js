// dom.js: the few DOM helpers every view uses. No framework: elements are
// built with h() and lists are kept in place with syncList(), so a refresh
// never destroys the control that has the keyboard focus.

/**
 * h builds an element. attrs: plain attributes, plus `on` (event map),
 * `props` (DOM properties), `class`. Children: nodes, strings, arrays, null.
 */
export function h(tag, attrs, ...children) {
  const svg = SVG_TAGS.has(tag);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'on') {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    } else if (k === 'props') {
      Object.assign(el, v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

const SVG_TAGS = new Set(['svg', 'g', 'path', 'line', 'rect', 'text', 'title', 'polyline', 'circle', 'desc']);

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** replace swaps el's children for the given ones. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** setText changes a node's text only when it differs (no needless layout). */
export function setText(el, text) {
  const t = String(text ?? '');
  if (el.textContent !== t) el.textContent = t;
}

/**
 * syncList keeps parent's children in step with items, keyed by key(item):
 * an existing element is updated in place by update(el, item), a new key
 * gets create(item) then update, a vanished key is removed. Order follows
 * items. Returns the key -> element map.
 */
export function syncList(parent, items, key, create, update) {
  const old = parent._keyed || new Map();
  const next = new Map();
  let ref = parent.firstChild;
  for (const it of items) {
    const k = key(it);
    let el = old.get(k);
    if (!el) el = create(it);
    update(el, it);
    next.set(k, el);
    if (el !== ref) parent.insertBefore(el, ref);
    else ref = ref.nextSibling;
  }
  for (const [k, el] of old) if (!next.has(k)) el.remove();
  parent._keyed = next;
  return next;
}

/** busy disables a control while fn runs, so a double click sends one call. */
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } finally {
    button.disabled = false;
  }
}

// ---- formatting -------------------------------------------------------

export function fmtMs(seconds) {
  if (!seconds) return '–';
  const ms = seconds * 1000;
  return ms < 10 ? ms.toFixed(1) + ' ms' : Math.round(ms) + ' ms';
}

export function fmtDuration(ms) {
  if (ms < 1000) return Math.max(0, Math.round(ms)) + ' ms';
  const s = ms / 1000;
  if (s < 90) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  const m = s / 60;
  if (m < 90) return Math.round(m) + ' min';
  const hr = m / 60;
  if (hr < 48) return Math.round(hr) + ' h';
  return Math.round(hr / 24) + ' d';
}

/** fmtAgo renders a timestamp as "3 s ago" / "in 4 s", with the clock time. */
export function fmtAgo(ts, now = Date.now()) {
  if (!ts) return '–';
  const t = new Date(ts).getTime();
  if (!Number.isFinite(t) || t <= 0) return '–';
  const d = t - now;
  return d >= 0 ? 'in ' + fmtDuration(d) : fmtDuration(-d) + ' ago';
}

export function fmtTime(ts) {
  if (!ts) return '–';
  const d = new Date(ts);
  if (!Number.isFinite(d.getTime()) || d.getTime() <= 0) return '–';
  return d.toLocaleTimeString(undefined, { hour12: false });
}

export function fmtDateTime(ts) {
  if (!ts) return '–';
  const d = new Date(ts);
  if (!Number.isFinite(d.getTime()) || d.getTime() <= 0) return '–';
  return d.toLocaleString(undefined, { hour12: false });
}

export function fmtUSD(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (v !== 0 && Math.abs(v) < 0.01) return '$' + v.toPrecision(2);
  return '$' + v.toFixed(2);
}

export function fmtInt(v) {
  if (v === null || v === undefined) return '–';
  return Number(v).toLocaleString('en-US');
}

/** limitText renders a limit: 0 or absent means "no limit". */
export function limitText(v) {
  return v ? fmtInt(v) : 'no limit';
}
