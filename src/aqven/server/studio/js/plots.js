/* Pictures: interval plots against reference lines, the spend curve, progress bars. */
import { fmt, h, s } from './dom.js';

/** 95% intervals of rows against reference lines; domain picked to show them all. */
export function intervalPlot(rows, refs, opts = {}) {
  const W = opts.width || 640, rowH = 30, top = 26, left = 150, right = 20;
  const H = top + rows.length * rowH + 26;
  const vals = [];
  rows.forEach(r => { if (r.low !== null && r.low !== undefined) vals.push(r.low, r.high, r.est); });
  refs.forEach(r => vals.push(r.x));
  let lo = Math.min(...vals, opts.min !== undefined ? opts.min : Infinity);
  let hi = Math.max(...vals, opts.max !== undefined ? opts.max : -Infinity);
  if (!isFinite(lo) || !isFinite(hi)) { lo = 0; hi = 1; }
  const pad = Math.max((hi - lo) * 0.08, 0.01);
  lo -= pad; hi += pad;
  if (opts.clamp) { lo = Math.max(opts.clamp[0], lo); hi = Math.min(opts.clamp[1], hi); }
  const x = v => left + (v - lo) / (hi - lo) * (W - left - right);
  const svgEl = s('svg', { class: 'plot', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.label || '95% intervals' });
  svgEl.appendChild(s('title', {}, opts.label || '95% intervals'));
  const ticks = 5;
  for (let i = 0; i <= ticks; i++) {
    const v = lo + (hi - lo) * i / ticks, xx = x(v);
    svgEl.appendChild(s('line', { class: 'grid', x1: xx, x2: xx, y1: top - 6, y2: H - 22 }));
    svgEl.appendChild(s('text', { x: xx, y: H - 8, 'text-anchor': 'middle' }, v.toFixed(2)));
  }
  refs.forEach((r, i) => {
    const xx = x(r.x);
    svgEl.appendChild(s('line', { class: 'ref' + (r.dash ? ' dash' : ''), x1: xx, x2: xx, y1: top - 8, y2: H - 22 }));
    const nearRight = xx > W - right - 110;
    svgEl.appendChild(s('text', { x: nearRight ? xx - 4 : xx + 3, y: 10 + (i % 2) * 11, 'text-anchor': nearRight ? 'end' : 'start' }, r.label));
  });
  rows.forEach((r, i) => {
    const y = top + i * rowH + rowH / 2;
    svgEl.appendChild(s('text', { x: left - 8, y: y + 4, 'text-anchor': 'end' }, r.label));
    if (r.low === null || r.low === undefined) {
      svgEl.appendChild(s('text', { x: left + 4, y: y + 4, class: 'muted' }, 'no counted attempts yet'));
      return;
    }
    const g = s('g', {});
    g.appendChild(s('title', {}, `${r.label}: ${fmt.rate(r.est)} (${Math.round((r.level || 0.95) * 1000) / 10}% CI ${fmt.rate(r.low)} to ${fmt.rate(r.high)})`));
    g.appendChild(s('line', { class: 'ci ' + (r.cls || ''), x1: x(r.low), x2: Math.max(x(r.high), x(r.low) + 1), y1: y, y2: y }));
    g.appendChild(s('circle', { class: 'est', cx: x(r.est), cy: y, r: 4.5 }));
    svgEl.appendChild(g);
  });
  return svgEl;
}

export function refsFor(q, diff) {
  if (!q) return [];
  const m = Number(q.margin || 0);
  if (diff) {
    if (q.kind === 'noninferior') return [{ x: 0, label: 'no difference', dash: true }, { x: -m, label: `−margin ${m}` }];
    return [{ x: 0, label: 'no difference', dash: true }, { x: m, label: `margin ${m}` }];
  }
  if (q.kind === 'threshold' && q.bound !== null && q.bound !== undefined) {
    const b = Number(q.bound);
    const up = q.direction !== 'at_most';
    return [{ x: b, label: `bound ${b}`, dash: true }, { x: up ? b + m : b - m, label: up ? `bound + margin ${Math.round((b + m) * 1e6) / 1e6}` : `bound − margin ${Math.round((b - m) * 1e6) / 1e6}` }];
  }
  return [];
}
export function clsOf(decision) { return decision === 'confirmed' ? 'ok' : decision === 'refuted' ? 'bad' : 'open'; }

/** Cumulative spend over time with the cap (and the 90% pause line). */
export function spendPlot(points, cap) {
  const W = 640, H = 150, L = 56, R = 14, T = 12, B = 26;
  const capN = Number(cap || 0);
  const ys = points.map(p => Number(p.usd));
  const tmax = Math.max(1e-3, ...points.map(p => p.t));
  const ymax = Math.max(capN, ...ys, 1e-9) * 1.05;
  const x = t => L + t / tmax * (W - L - R), y = v => H - B - v / ymax * (H - T - B);
  const el = s('svg', { class: 'plot', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'spend over time against the cap' });
  el.appendChild(s('title', {}, 'spend over time against the cap'));
  el.appendChild(s('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
  el.appendChild(s('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  if (capN > 0) {
    el.appendChild(s('line', { class: 'capline', x1: L, x2: W - R, y1: y(capN), y2: y(capN) }));
    el.appendChild(s('text', { x: W - R - 4, y: y(capN) - 4, 'text-anchor': 'end' }, `cap ${fmt.money(cap)}`));
    el.appendChild(s('line', { class: 'ref dash', x1: L, x2: W - R, y1: y(capN * 0.9), y2: y(capN * 0.9) }));
    el.appendChild(s('text', { x: W - R - 4, y: y(capN * 0.9) + 12, 'text-anchor': 'end' }, '90%: pauses'));
  }
  el.appendChild(s('text', { x: L - 6, y: H - B, 'text-anchor': 'end' }, '$0'));
  el.appendChild(s('text', { x: L - 6, y: T + 8, 'text-anchor': 'end' }, fmt.money(ymax)));
  el.appendChild(s('text', { x: W - R, y: H - 8, 'text-anchor': 'end' }, `${fmt.secs(tmax)} after the start`));
  if (points.length) {
    const d = [`M${x(0)},${y(0)}`].concat(points.map(p => `L${x(p.t)},${y(Number(p.usd))}`)).join(' ');
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
