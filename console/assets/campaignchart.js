// The Campaigns page's chart: one bar per period, its value written above
// it, the periods under the x axis and the metric's name on the y axis.
// Hand-written SVG like chart.js (which it does not share: that one draws
// the dashboard's and a broadcast's charts), colours as SVG attributes so
// no stylesheet rule is needed; the grid and text reuse .chart's classes.

import {s} from './dom.js';

const PAD = {l: 56, r: 10, t: 40, b: 40};
const BAR = '#2563eb';

// Rounds a maximum up to 1, 2 or 5 × 10^k so the axis reads well.
function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v * (1 - 1e-9));
}

// barChart draws points = [{label, value, title}] into svg: fmt writes a
// value (on the bars and the axis), axisLabel names the metric, ratio
// caps the axis at 100 %. An empty points draws the empty text.
export function barChart(svg, points, {fmt, axisLabel, ratio = false, empty, height = 220}) {
  const W = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 640);
  svg.setAttribute('viewBox', `0 0 ${W} ${height}`);
  svg.replaceChildren();
  svg.append(s('text', {class: 'axis', x: 12, y: (PAD.t + height - PAD.b) / 2, 'text-anchor': 'middle',
    transform: `rotate(-90 12 ${(PAD.t + height - PAD.b) / 2})`}, axisLabel));
  if (!points.length) {
    svg.append(s('text', {class: 'axis', x: W / 2, y: height / 2, 'text-anchor': 'middle'}, empty));
    return;
  }
  const max = ratio ? 1 : niceMax(Math.max(...points.map((p) => p.value)));
  const plotH = height - PAD.t - PAD.b;
  const y = (v) => PAD.t + plotH * (1 - v / max);
  for (const v of [0, max / 2, max]) {
    svg.append(s('line', {class: 'grid', x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v)}),
      s('text', {class: 'axis', x: PAD.l - 6, y: y(v) + 4, 'text-anchor': 'end'}, fmt(v)));
  }
  const step = (W - PAD.l - PAD.r) / points.length;
  const bw = Math.max(2, Math.min(48, step * 0.7));
  // Every label when they fit, else every k-th.
  const every = Math.max(1, Math.ceil(70 / step));
  // The values: on every bar that has one; turned upright where the bars
  // are narrow; on the highest only where even that does not fit (the
  // others in each bar's tooltip and in the table).
  const top = Math.max(...points.map((p) => p.value));
  points.forEach((p, i) => {
    const cx = PAD.l + step * (i + 0.5);
    const ty = y(Math.min(p.value, max));
    const label = p.value === 0 || (step < 14 && p.value !== top) ? null
      : step < 40 ? s('text', {class: 'axis cbar-value', x: cx.toFixed(1), y: (ty - 4).toFixed(1), transform: `rotate(-90 ${cx.toFixed(1)} ${(ty - 4).toFixed(1)})`}, fmt(p.value))
        : s('text', {class: 'axis cbar-value', x: cx.toFixed(1), y: (ty - 5).toFixed(1), 'text-anchor': 'middle'}, fmt(p.value));
    svg.append(s('g', {class: 'cbar', 'data-label': p.label, 'data-value': String(p.value)},
      s('title', null, p.title),
      s('rect', {x: (cx - bw / 2).toFixed(1), y: ty.toFixed(1), width: bw.toFixed(1), height: Math.max(0, y(0) - ty).toFixed(1), fill: BAR}),
      label));
    if (i % every === 0) {
      svg.append(s('text', {class: 'axis', x: cx.toFixed(1), y: height - PAD.b + 16, 'text-anchor': 'middle'}, p.label));
    }
  });
  svg.append(s('line', {class: 'grid', x1: PAD.l, x2: PAD.l, y1: PAD.t, y2: y(0)}));
}
