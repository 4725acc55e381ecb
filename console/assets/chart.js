// Two tiny hand-written SVG charts. They draw into an <svg> the page owns
// (its id stays put across redraws), on a viewBox as wide as the SVG is on
// screen so the text keeps its real size. Colours come from app.css: a
// bar's class says what its value means (good, middling, poor, none), not
// which chart it is in.

import {s} from './dom.js';
import {clock, num, percent} from './format.js';
import {t} from './i18n.js';

const PAD = {l: 48, r: 10, t: 18, b: 34};

// Rounds a maximum up to 1, 2 or 5 × 10^k so the axis reads well.
function niceMax(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
}

// The drawing width: the SVG's own (600 before it is laid out).
const widthOf = (svg) => Math.max(280, Math.round(svg.getBoundingClientRect().width) || 600);

function frame(svg, W, height, max, fmt) {
  svg.setAttribute('viewBox', `0 0 ${W} ${height}`);
  svg.replaceChildren();
  const y = (v) => PAD.t + (height - PAD.t - PAD.b) * (1 - v / max);
  for (const v of [0, max / 2, max]) {
    svg.append(s('line', {class: 'grid', x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v)}),
      s('text', {class: 'axis', x: PAD.l - 6, y: y(v) + 4, 'text-anchor': 'end'}, fmt(v)));
  }
  return y;
}

// Sends per second: points = [{at, per_second}], oldest first. empty is
// what it says with fewer than two points (a page can give a better
// answer than "no samples", e.g. a finished run's average).
export function lineChart(svg, points, {height = 150, empty = t('chart.noSamples')} = {}) {
  const W = widthOf(svg);
  const max = niceMax(Math.max(1, ...points.map((p) => p.per_second || 0)));
  const y = frame(svg, W, height, max, (v) => num(v));
  if (points.length < 2) {
    svg.append(s('text', {class: 'axis chart-empty', x: W / 2, y: height / 2, 'text-anchor': 'middle'}, empty));
    return;
  }
  const step = (W - PAD.l - PAD.r) / (points.length - 1);
  const xy = points.map((p, i) => `${(PAD.l + i * step).toFixed(1)},${y(p.per_second || 0).toFixed(1)}`);
  const base = y(0).toFixed(1);
  svg.append(
    s('path', {class: 'area', d: `M${PAD.l},${base} L${xy.join(' L')} L${W - PAD.r},${base} Z`}),
    s('path', {class: 'line', d: `M${xy.join(' L')}`}));
  const label = (p, x, anchor) => s('text', {class: 'axis', x, y: height - 6, 'text-anchor': anchor}, clock(new Date(p.at)));
  svg.append(label(points[0], PAD.l, 'start'), label(points[points.length - 1], W - PAD.r, 'end'));
}

// Bars of a ratio 0..1 (null: nothing to measure yet), each a link with
// its value written above it and its name (axis) below:
// bars = [{id, value, href, label, axis, tone}]; tone (good, fair, poor,
// zero) colours it by what the value means.
export function barChart(svg, bars, {height = 190} = {}) {
  const W = widthOf(svg);
  const y = frame(svg, W, height, 1, (v) => percent(v));
  const slot = (W - PAD.l - PAD.r) / Math.max(bars.length, 1);
  const w = slot * 0.7;
  bars.forEach((b, i) => {
    const x = PAD.l + i * slot + slot * 0.15;
    const top = b.value == null ? y(0) - 2 : y(b.value);
    const h = Math.max(y(0) - top, b.value == null || b.value > 0 ? 2 : 0);
    const rect = s('rect', {
      class: b.value == null ? 'bar bar-none' : `bar bar-${b.tone || 'good'}`,
      x: x.toFixed(1), y: (y(0) - h).toFixed(1), width: w.toFixed(1), height: h.toFixed(1),
      'data-value': b.value == null ? '' : String(b.value),
    });
    // A transparent full-height target, so a 0 % bar is still easy to click.
    const hit = s('rect', {class: 'hit', x: x.toFixed(1), y: PAD.t, width: w.toFixed(1), height: y(0) - PAD.t});
    const cx = (x + w / 2).toFixed(1);
    const value = s('text', {class: 'bar-value', x: cx, y: (Math.min(y(0) - h, y(0)) - 3).toFixed(1), 'text-anchor': 'middle'},
      b.value == null ? '—' : percent(b.value));
    const axis = s('text', {class: 'axis', x: cx, y: height - PAD.b + 14, 'text-anchor': 'middle'}, b.axis ?? '');
    svg.append(s('a', {href: b.href, 'aria-label': b.label, 'data-id': b.id}, s('title', null, b.label), hit, rect, value, axis));
  });
}
