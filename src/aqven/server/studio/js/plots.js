/* Pictures: interval plots against reference lines, the spend curve, progress bars. */
import { fmt, h, replace, s } from './dom.js';

/** Round tick values for [lo, hi]: steps of 1, 2, 2.5 or 5 × 10^k, about `want` of them. */
export function niceTicks(lo, hi, want = 5) {
  const span = Math.max(hi - lo, 1e-9);
  const raw = span / want, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(st => st >= raw * 0.999) || 10 * mag;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) + (Math.abs(step / mag - 2.5) < 1e-9 ? 1 : 0);
  const first = Math.ceil(lo / step - 1e-9), last = Math.floor(hi / step + 1e-9);
  const values = [];
  for (let i = first; i <= last; i++) values.push(Number((i * step).toFixed(decimals + 2)));
  return { step, decimals, values };
}
function tickLabel(v, decimals) {
  const t = Math.abs(v) < 1e-12 ? (0).toFixed(decimals) : Math.abs(v).toFixed(decimals);
  return (v < -1e-12 ? '−' : '') + t;
}
const CHAR_W = 6.2;  // the width of an 11px label's character, near enough to keep labels apart
function textWidth(str) { return String(str).length * CHAR_W; }

/** Draw into a box as wide as the page gives it, and again when that width changes (phone, a resized window). */
export function responsive(draw, label) {
  const box = h('div', { class: 'plot-box', 'data-plot': label || '' });
  let drawnAt = 0;
  const ro = new ResizeObserver(() => {
    const w = Math.floor(box.clientWidth);
    if (!w) { if (!box.isConnected && drawnAt) ro.disconnect(); return; }
    if (Math.abs(w - drawnAt) < 4) return;
    drawnAt = w;
    replace(box, draw(Math.max(280, w)));
  });
  ro.observe(box);
  return box;
}

/** The domain of an interval plot: every interval and reference line, padded, rounded out to a tick. */
function domainOf(rows, refs, clamp) {
  const vals = [];
  rows.forEach(r => { if (r.low !== null && r.low !== undefined) vals.push(r.low, r.high, r.est); });
  refs.forEach(r => vals.push(r.x));
  let lo = Math.min(...vals), hi = Math.max(...vals);
  if (!isFinite(lo) || !isFinite(hi)) { lo = clamp ? clamp[0] : 0; hi = clamp ? clamp[1] : 1; }
  const pad = Math.max((hi - lo) * 0.06, 0.005);
  lo -= pad; hi += pad;
  if (clamp) { lo = Math.max(clamp[0], lo); hi = Math.min(clamp[1], hi); }
  const t = niceTicks(lo, hi);
  lo = Math.floor(lo / t.step + 1e-9) * t.step; hi = Math.ceil(hi / t.step - 1e-9) * t.step;
  if (clamp) { lo = Math.max(clamp[0], lo); hi = Math.min(clamp[1], hi); }
  return { lo, hi, ticks: niceTicks(lo, hi) };
}

/** Place labels on rows so that none overlaps another: each goes on the first row with room for it. */
function stackLabels(items, minX, maxX) {
  const rows = [];
  return items.map(it => {
    const w = textWidth(it.text) + 8;
    let x0 = Math.min(Math.max(it.x - w / 2, minX), maxX - w);
    let row = rows.findIndex(r => r.every(([a, b]) => x0 + w <= a || x0 >= b));
    if (row < 0) { rows.push([]); row = rows.length - 1; }
    rows[row].push([x0, x0 + w]);
    return { ...it, x0, w, row };
  });
}

/** 95% intervals of rows against reference lines, the axis zoomed to them, round ticks where their values are. */
export function intervalPlot(rows, refs, opts = {}) {
  return responsive(width => intervalSvg(rows, refs, { ...opts, width }), opts.label);
}

export function intervalSvg(rows, refs, opts = {}) {
  const W = opts.width || 640, rowH = 34, right = 24;
  const longest = Math.max(40, ...rows.map(r => Math.max(...String(r.label).split('\n').map(textWidth))));
  const left = Math.min(longest + 14, Math.round(W * 0.42));
  const { lo, hi, ticks } = domainOf(rows, refs, opts.clamp);
  const x = v => left + (v - lo) / (hi - lo) * (W - left - right);
  const placed = stackLabels(refs.map(r => ({ ...r, v: r.x, x: x(r.x), text: r.label })), left, W - 2);
  const labelRows = placed.reduce((m, p) => Math.max(m, p.row + 1), 0);
  const top = 12 + labelRows * 14;
  const titled = Boolean(opts.axis);
  const H = top + rows.length * rowH + 30 + (titled ? 18 : 0);
  const svgEl = s('svg', { class: 'plot', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.label || '95% intervals',
    'data-lo': lo, 'data-hi': hi });
  svgEl.appendChild(s('title', {}, opts.label || '95% intervals'));
  const axisY = H - 26 - (titled ? 18 : 0);
  svgEl.appendChild(s('line', { class: 'axis', x1: left, x2: W - right, y1: axisY, y2: axisY }));
  for (const v of ticks.values) {
    const xx = x(v);
    svgEl.appendChild(s('line', { class: 'grid', x1: xx, x2: xx, y1: top - 4, y2: axisY }));
    svgEl.appendChild(s('line', { class: 'tick axis', x1: xx, x2: xx, y1: axisY, y2: axisY + 4, 'data-value': v }));
    svgEl.appendChild(s('text', { class: 'tick-label', x: xx, y: axisY + 18, 'text-anchor': 'middle', 'data-value': v }, tickLabel(v, ticks.decimals)));
  }
  if (titled) svgEl.appendChild(s('text', { class: 'axis-title', x: left + (W - left - right) / 2, y: H - 6, 'text-anchor': 'middle' }, opts.axis));
  placed.forEach(r => {
    // Lines start below every label row, so that no line crosses another line's label.
    svgEl.appendChild(s('line', { class: 'ref' + (r.dash ? ' dash' : ''), x1: r.x, x2: r.x, y1: top - 6, y2: axisY, 'data-value': r.v }));
    svgEl.appendChild(s('text', { class: 'ref-label', x: r.x0 + r.w / 2, y: 10 + r.row * 14, 'text-anchor': 'middle' }, r.text));
  });
  rows.forEach((r, i) => {
    const y = top + i * rowH + rowH / 2;
    const lines = String(r.label).split('\n');
    const label = s('text', { class: 'row-label', x: left - 8, y: y + 4 - (lines.length - 1) * 6, 'text-anchor': 'end' });
    lines.forEach((ln, j) => label.appendChild(s('tspan', { x: left - 8, dy: j ? 12 : 0 }, ln)));
    svgEl.appendChild(label);
    if (r.low === null || r.low === undefined) {
      svgEl.appendChild(s('text', { x: left + 4, y: y + 4, class: 'muted' }, 'no counted attempts yet'));
      return;
    }
    const g = s('g', { class: 'interval', 'data-low': r.low, 'data-high': r.high, 'data-est': r.est });
    g.appendChild(s('title', {}, `${String(r.label).replace('\n', ' ')}: ${fmt.rate(r.est)} (${Math.round((r.level || 0.95) * 1000) / 10}% CI ${fmt.rate(r.low)} to ${fmt.rate(r.high)})`));
    g.appendChild(s('line', { class: 'ci ' + (r.cls || ''), x1: x(r.low), x2: Math.max(x(r.high), x(r.low) + 1), y1: y, y2: y }));
    g.appendChild(s('circle', { class: 'est', cx: x(r.est), cy: y, r: 4.5 }));
    svgEl.appendChild(g);
  });
  return svgEl;
}

/** A difference's row label: on two lines when it is long, so that no name is cut. */
export function diffLabel(variant, baseline) {
  const one = `${variant} − ${baseline}`;
  return one.length > 22 ? `${variant} −\n${baseline}` : one;
}

export function refsFor(q, diff) {
  if (!q) return [];
  const m = Number(q.margin || 0);
  if (diff) {
    if (q.kind === 'noninferior') return [{ x: 0, label: 'no difference 0', dash: true }, { x: -m, label: `margin −${m}` }];
    return [{ x: 0, label: 'no difference 0', dash: true }, { x: m, label: `margin +${m}` }];
  }
  if (q.kind === 'threshold' && q.bound !== null && q.bound !== undefined) {
    const b = Number(q.bound);
    const up = q.direction !== 'at_most';
    return [{ x: b, label: `bound ${b}`, dash: true }, { x: up ? b + m : b - m, label: up ? `bound + margin ${Math.round((b + m) * 1e6) / 1e6}` : `bound − margin ${Math.round((b - m) * 1e6) / 1e6}` }];
  }
  return [];
}
export function clsOf(decision) { return decision === 'confirmed' ? 'ok' : decision === 'refuted' ? 'bad' : 'open'; }

/** Cumulative spend from the first attempt on, scaled to the spend: the cap and its 90% pause line are drawn when
 * they are in range (else named at the top), and approvals, stops and a pause are marked where they happened.
 * `marks`: [{t, label}] in seconds after the series' start, as the points. */
export function spendPlot(points, cap, marks) {
  return responsive(width => spendSvg(points, cap, marks || [], width), 'spend');
}
function spendSvg(points, cap, marks, width) {
  const W = width || 640, H = 170, L = 64, R = 14, T = 16, B = 40;
  const capN = Number(cap || 0);
  const ys = points.map(p => Number(p.usd));
  const spent = Math.max(0, ...ys);
  const t0 = points.length ? Math.min(...points.map(p => p.t)) : 0;  // time runs from the first attempt's end
  const tmax = Math.max(1e-3, ...points.map(p => p.t - t0), ...marks.map(m => m.t - t0));
  const capInRange = capN > 0 && capN <= Math.max(spent, 1e-9) * 2.5;
  const ymax = Math.max(capInRange ? capN : 0, spent, 1e-9) * 1.08;
  const x = t => L + Math.max(0, t - t0) / tmax * (W - L - R), y = v => H - B - v / ymax * (H - T - B);
  const el = s('svg', { class: 'plot', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'spend over time from the first attempt, against the cap' });
  el.appendChild(s('title', {}, 'spend over time from the first attempt, against the cap'));
  el.appendChild(s('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
  el.appendChild(s('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  const ticks = niceTicks(0, ymax, 3);
  for (const v of ticks.values) {
    el.appendChild(s('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    el.appendChild(s('text', { class: 'tick-label', x: L - 6, y: y(v) + 4, 'text-anchor': 'end', 'data-value': v }, fmt.money(v)));
  }
  if (capInRange) {
    el.appendChild(s('line', { class: 'capline', x1: L, x2: W - R, y1: y(capN), y2: y(capN) }));
    el.appendChild(s('text', { x: W - R - 4, y: y(capN) - 4, 'text-anchor': 'end' }, `cap ${fmt.money(cap)}`));
    el.appendChild(s('line', { class: 'ref dash', x1: L, x2: W - R, y1: y(capN * 0.9), y2: y(capN * 0.9) }));
    el.appendChild(s('text', { x: W - R - 4, y: y(capN * 0.9) + 13, 'text-anchor': 'end' }, '90%: pauses'));
  } else if (capN > 0) {
    el.appendChild(s('text', { class: 'cap-off', x: W - R - 4, y: T + 2, 'text-anchor': 'end' }, `cap ${fmt.money(cap)}, far above`));
  }
  marks.forEach(m => {
    const xx = x(m.t);
    el.appendChild(s('line', { class: 'mark-line', x1: xx, x2: xx, y1: T, y2: H - B, 'data-mark': m.label }));
    el.appendChild(s('text', { class: 'mark-label', x: Math.min(xx + 3, W - R - 2), y: T + 12, 'text-anchor': xx > W - 120 ? 'end' : 'start' }, m.label));
  });
  el.appendChild(s('text', { class: 'tick-label', x: L, y: H - B + 16, 'text-anchor': 'start' }, 'first attempt'));
  el.appendChild(s('text', { class: 'tick-label', x: W - R, y: H - B + 16, 'text-anchor': 'end' }, `+${fmt.secs(tmax)}`));
  el.appendChild(s('text', { class: 'axis-title', x: L + (W - L - R) / 2, y: H - 4, 'text-anchor': 'middle' }, 'time since the first attempt ended'));
  if (points.length) {
    const d = [`M${x(t0)},${y(0)}`].concat(points.map(p => `L${x(p.t)},${y(Number(p.usd))}`)).join(' ');
    el.appendChild(s('path', { class: 'curve', d }));
  } else {
    el.appendChild(s('text', { x: L + 10, y: H / 2 }, 'no attempt has finished yet'));
  }
  return el;
}

export function bar(frac, cls, markAt, label) {
  const pct = Math.max(0, Math.min(1, frac || 0)) * 100;
  return h('div', { class: 'bar ' + (cls || ''), role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': Math.round(pct), 'aria-label': label },
    h('span', { style: `width:${pct}%` }),
    markAt ? h('i', { class: 'mark', style: `left:${markAt * 100}%` }) : null);
}
