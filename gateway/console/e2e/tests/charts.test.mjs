// Unit tests of the console's pure chart helpers (no browser needed).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binsOf, niceTop, classKind, stackByDay, dayRange } from '../../static/js/charts.js';

test('binsOf turns the cumulative score histogram into per-score bins', () => {
  // the gateway's buckets: le 0,1,2,3,4,5,6,8,10,12 (+Inf in count)
  const hist = { le: [0, 1, 2, 3, 4, 5, 6, 8, 10, 12], buckets: [5, 5, 6, 9, 10, 10, 10, 12, 12, 12], count: 14 };
  const bins = binsOf(hist);
  assert.deepEqual(bins.map((b) => b.label), ['0', '1', '2', '3', '4', '5', '6', '7–8', '9–10', '11–12', '≥13']);
  assert.deepEqual(bins.map((b) => b.n), [5, 0, 1, 3, 1, 0, 0, 2, 0, 0, 2]);
  assert.equal(bins.reduce((a, b) => a + b.n, 0), hist.count);
  // threshold 4: bins from score 4 up are hard, below easy, none straddles
  const side = (b, t) => (b.lo >= t ? 'hard' : b.hi < t ? 'easy' : 'both');
  assert.deepEqual(bins.map((b) => side(b, 4)), ['easy', 'easy', 'easy', 'easy', 'hard', 'hard', 'hard', 'hard', 'hard', 'hard', 'hard']);
  // threshold 8 falls inside the 7–8 bin
  assert.equal(side(bins[7], 8), 'both');
});

test('binsOf of an empty or missing histogram is empty', () => {
  assert.deepEqual(binsOf(undefined), []);
  assert.deepEqual(binsOf({ le: [], buckets: [], count: 0 }), []);
});

test('niceTop rounds an axis up to round quarters', () => {
  for (const [v, want] of [[0, 1], [-3, 1], [0.9, 1], [17, 20], [19.6, 20], [21, 40], [0.0072, 0.008], [101, 200], [4, 4]]) {
    assert.ok(Math.abs(niceTop(v) - want) < 1e-12, `niceTop(${v}) = ${niceTop(v)}, want ${want}`);
    assert.ok(niceTop(v) >= v);
  }
});

test('classKind colours outcomes: ok, warn for rate limits and cancels, bad for the rest', () => {
  assert.equal(classKind('ok'), 'ok');
  assert.equal(classKind('rate_limited'), 'warn');
  assert.equal(classKind('canceled'), 'warn');
  for (const c of ['server_error', 'timeout', 'network', 'auth', 'context_window']) assert.equal(classKind(c), 'bad');
});

test('dayRange lists UTC days, both ends included, across a month end', () => {
  assert.deepEqual(dayRange('2026-02-27', '2026-03-02'), ['2026-02-27', '2026-02-28', '2026-03-01', '2026-03-02']);
  assert.deepEqual(dayRange('2026-03-02', '2026-03-01'), []);
});

test('stackByDay: one series per model over every day, zeros where nothing was spent, largest first', () => {
  const days = ['2026-03-01', '2026-03-02', '2026-03-03'];
  const rows = [
    { day: '2026-03-01', model: 'small', cost_usd: 1 },
    { day: '2026-03-03', model: 'big', cost_usd: 5 },
    { day: '2026-03-03', model: 'small', cost_usd: 0.5 },
    { day: '2026-02-01', model: 'old', cost_usd: 9 }, // outside the days: ignored
  ];
  const s = stackByDay(rows, days);
  assert.deepEqual(s.map((x) => x.name), ['big', 'small']);
  assert.deepEqual(s[0].values, [0, 0, 5]);
  assert.deepEqual(s[1].values, [1, 0, 0.5]);
  assert.equal(s[1].total, 1.5);
});
