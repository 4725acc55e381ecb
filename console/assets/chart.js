// Two tiny hand-written SVG charts. They draw into an <svg> the page owns
// (its id stays put across redraws), on a viewBox as wide as the SVG is on
// screen so the text keeps its real size. Colours come from app.css.

import {s} from './dom.js';
import {clock, num, percent} from './format.js';

const PAD = {l: 48, r: 10, t: 10, b: 22};

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

// Sends per second: points = [{at, per_second}], oldest first.
export function lineChart(svg, points, {height = 150} = {}) {
  const W = widthOf(svg);
  const max = niceMax(Math.max(1, ...points.map((p) => p.per_second || 0)));
  const y = frame(svg, W, height, max, (v) => num(v));
  if (points.length < 2) {
    svg.append(s('text', {class: 'axis', x: W / 2, y: height / 2, 'text-anchor': 'middle'}, 'No samples yet'));
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

// Bars of a ratio 0..1 (null: nothing to measure yet), each a link:
// bars = [{value, href, label}].
export function barChart(svg, bars, {height = 170} = {}) {
  const W = widthOf(svg);
  const y = frame(svg, W, height, 1, (v) => percent(v));
  const slot = (W - PAD.l - PAD.r) / Math.max(bars.length, 1);
  bars.forEach((b, i) => {
    const x = PAD.l + i * slot + slot * 0.15;
    const top = b.value == null ? y(0) - 2 : y(b.value);
    const rect = s('rect', {
      class: b.value == null ? 'bar bar-none' : 'bar',
      x: x.toFixed(1), y: top.toFixed(1), width: (slot * 0.7).toFixed(1), height: Math.max(y(0) - top, 2).toFixed(1),
    });
    // A transparent full-height target, so a 0 % bar is still easy to click.
    const hit = s('rect', {class: 'hit', x: x.toFixed(1), y: PAD.t, width: (slot * 0.7).toFixed(1), height: y(0) - PAD.t});
    svg.append(s('a', {href: b.href, 'aria-label': b.label, 'data-id': b.id}, s('title', null, b.label), hit, rect));
  });
}
