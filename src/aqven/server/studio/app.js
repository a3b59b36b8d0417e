/* AQVEN Studio: plain JavaScript, no build step, nothing fetched from elsewhere.
 * Pages are drawn from the project server's REST API; live pages hold one server-sent event stream each.
 * Every piece of text reaches the page as a text node (never as HTML), so nothing the project holds can
 * inject markup. */
'use strict';

// ---------- small helpers ----------

const main = document.getElementById('main');
const live = document.getElementById('live');
let leaving = [];            // clean-ups of the current page (event streams, timers)
let pageToken = 0;           // a page drawn for an older route stops drawing
const state = { project: null, simulate: false };

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
function s(tag, attrs, ...kids) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}
function append(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
}
function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
function replace(el, ...kids) { clear(el); append(el, kids); return el; }
/** Rebuild a section only when its data changed, so focus and typing survive live updates. */
function patch(el, key, build) {
  const k = JSON.stringify(key);
  if (el.dataset.key === k) return;
  el.dataset.key = k;
  replace(el, build());
}
function announce(text) { live.textContent = text; }

class ApiError extends Error {
  constructor(err, status) {
    super(err.message || `HTTP ${status}`);
    this.code = err.code || `HTTP_${status}`; this.hint = err.hint || ''; this.details = err.details || {};
    this.file = err.file; this.line = err.line;
  }
}
// The session's CSRF token, put in the page by the server: every state-changing request sends it.
const CSRF = (document.querySelector('meta[name="aqven-csrf"]') || {}).content || '';
async function api(path, opts = {}) {
  const init = { headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF }, ...opts };
  if (opts.body !== undefined && typeof opts.body !== 'string') init.body = JSON.stringify(opts.body);
  const resp = await fetch(path, init);
  const text = await resp.text();
  const data = text ? JSON.parse(text) : null;
  if (!resp.ok) throw new ApiError((data && data.error) || {}, resp.status);
  return data;
}
function errorBox(err) {
  const problems = (err.details && err.details.problems) || [];
  return h('div', { class: 'note bad', role: 'alert' },
    h('b', { text: err.code || 'Error' }), ': ', err.message,
    err.file ? h('div', { class: 'mono', text: err.file + (err.line ? ':' + err.line : '') }) : null,
    err.hint ? h('div', { class: 'muted', text: 'hint: ' + err.hint }) : null,
    problems.length ? h('ul', {}, problems.slice(0, 20).map(p => h('li', {},
      (p.file ? `${p.file}${p.line ? ':' + p.line : ''}: ` : '') + (p.case ? `case ${p.case} × variant ${p.variant}: ` : '') +
      `${p.code || ''}: ${p.message || ''}`))) : null);
}

const fmt = {
  money(v) {
    if (v === null || v === undefined || v === '') return '—';
    const n = Number(v);
    if (!isFinite(n)) return String(v);
    if (n === 0) return '$0.00';
    if (n >= 1) return '$' + n.toFixed(2);
    if (n >= 0.01) return '$' + n.toFixed(3);
    return '$' + n.toPrecision(2);
  },
  rate(v) { return v === null || v === undefined ? '—' : Number(v).toFixed(3); },
  signed(v) { return (v >= 0 ? '+' : '−') + Math.abs(v).toFixed(3); },
  time(iso) {
    if (!iso) return '—';
    const d = new Date(iso), now = new Date();
    const t = d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
    return d.toDateString() === now.toDateString() ? t : d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }) + ' ' + t;
  },
  dur(a, b) {
    if (!a || !b) return '—';
    const ms = new Date(b) - new Date(a);
    return ms < 1000 ? `${ms} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60000)}m${String(Math.round(ms / 1000) % 60).padStart(2, '0')}s`;
  },
  secs(n) {
    n = Math.max(0, Math.round(n));
    return n < 60 ? `${n} s` : n < 3600 ? `${Math.floor(n / 60)} min ${n % 60} s` : `${Math.floor(n / 3600)} h ${Math.floor(n % 3600 / 60)} min`;
  },
  json(v) { return JSON.stringify(v, null, 2); },
  side(on) { return on === 'holdout' ? 'Confirm (held-out cases)' : on === 'dev' ? 'Explore (working cases)' : on; },
};
function badge(text, cls) { return h('span', { class: 'badge ' + (cls || text || '') }, text); }
function simBadge(sim) { return sim ? badge('simulated', 'sim') : null; }
function link(href, text, attrs) { return h('a', { href, ...(attrs || {}) }, text); }
function short(id) { return id ? String(id) : '—'; }
function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}
function pre(value) { return h('pre', {}, typeof value === 'string' ? value : fmt.json(value)); }
function pager(page, pages, total, noun, go) {
  return h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: page <= 1, onclick: () => go(page - 1), 'aria-label': 'previous page' }, '← Previous'),
    h('span', {}, `page ${page} of ${pages} · ${total} ${noun}`),
    h('button', { type: 'button', disabled: page >= pages, onclick: () => go(page + 1), 'aria-label': 'next page' }, 'Next →'));
}
function simNote(text) {
  return h('div', { class: 'note sim', role: 'note' }, h('b', {}, 'Simulated. '), text);
}

// ---------- a tiny, safe markdown renderer ----------

function mdInline(text) {
  const out = [];
  const re = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|((?<![A-Za-z0-9])_[^_\s][^_]*_(?![A-Za-z0-9]))|(\[[^\]]+\]\([^)\s]+\))/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (m[1]) out.push(h('code', {}, t.slice(1, -1)));
    else if (m[2]) out.push(h('strong', {}, mdInline(t.slice(2, -2))));
    else if (m[3] || m[4]) out.push(h('em', {}, mdInline(t.slice(1, -1))));
    else {
      const lm = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(t);
      out.push(mdLink(lm[1], lm[2]));
    }
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
function mdLink(label, href) {
  if (/^https?:\/\//i.test(href)) return h('a', { href, rel: 'noopener noreferrer', target: '_blank' }, mdInline(label));
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return h('span', {}, mdInline(label));   // javascript:, data: ... never links
  if (/findings\/[^/]+\.ya?ml$/.test(href)) return h('a', { href: '#/findings?file=' + encodeURIComponent(href) }, mdInline(label));
  return h('span', { class: 'mono', title: href }, mdInline(label));
}
function markdown(src) {
  const root = h('div', { class: 'md' });
  const lines = String(src || '').replace(/\r\n?/g, '\n').split('\n');
  let para = [], list = null, code = null;
  const flush = () => {
    if (para.length) { root.appendChild(h('p', {}, mdInline(para.join(' ')))); para = []; }
    if (list) { root.appendChild(list); list = null; }
  };
  for (const line of lines) {
    if (code !== null) {
      if (/^```/.test(line)) { root.appendChild(h('pre', {}, code.join('\n'))); code = null; } else code.push(line);
      continue;
    }
    if (/^```/.test(line)) { flush(); code = []; continue; }
    const hm = /^(#{1,6})\s+(.*)$/.exec(line);
    if (hm) { flush(); root.appendChild(h('h' + Math.min(6, hm[1].length + 1), {}, mdInline(hm[2]))); continue; }
    const um = /^\s*[-*]\s+(.*)$/.exec(line), om = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (um || om) {
      if (para.length) { root.appendChild(h('p', {}, mdInline(para.join(' ')))); para = []; }
      const tag = um ? 'ul' : 'ol';
      if (!list || list.tagName.toLowerCase() !== tag) { if (list) root.appendChild(list); list = h(tag); }
      list.appendChild(h('li', {}, mdInline((um || om)[1])));
      continue;
    }
    if (!line.trim()) { flush(); continue; }
    if (list) { root.appendChild(list); list = null; }
    para.push(line.trim());
  }
  if (code !== null) root.appendChild(h('pre', {}, code.join('\n')));
  flush();
  return root;
}

// ---------- pictures ----------

/** 95% intervals of rows against reference lines; domain picked to show them all. */
function intervalPlot(rows, refs, opts = {}) {
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

function refsFor(q, diff) {
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
function clsOf(decision) { return decision === 'confirmed' ? 'ok' : decision === 'refuted' ? 'bad' : 'open'; }

/** Cumulative spend over time with the cap (and the 90% pause line). */
function spendPlot(points, cap) {
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

function bar(frac, cls, markAt, label) {
  const pct = Math.max(0, Math.min(1, frac || 0)) * 100;
  return h('div', { class: 'bar ' + (cls || ''), role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': Math.round(pct), 'aria-label': label },
    h('span', { style: `width:${pct}%` }),
    markAt ? h('i', { class: 'mark', style: `left:${markAt * 100}%` }) : null);
}

/** A flow as its graph: nodes left to right by dependency, groups drawn around their children. */
function flowGraph(flow, ranges) {
  const NW = 160, NH = 50, GAPX = 42, GAPY = 14, PAD = 12, HEAD = 22;
  function layout(nodes) {
    const ids = new Set(nodes.map(n => n.id));
    const level = {};
    const lv = n => {
      if (level[n.id] !== undefined) return level[n.id];
      level[n.id] = 0;
      const deps = (n.deps || []).filter(d => ids.has(d));
      level[n.id] = deps.length ? 1 + Math.max(...deps.map(d => lv(nodes.find(m => m.id === d)))) : 0;
      return level[n.id];
    };
    nodes.forEach(lv);
    const cols = [];
    nodes.forEach(n => {
      const box = n.children && n.children.length ? layout(n.children) : null;
      const w = box ? box.w + 2 * PAD : NW, hh = box ? box.h + 2 * PAD + HEAD : NH;
      (cols[level[n.id]] = cols[level[n.id]] || []).push({ n, box, w, h: hh });
    });
    let x = 0, H = 0;
    const items = {};
    cols.forEach(col => {
      const cw = Math.max(...col.map(c => c.w));
      let y = 0;
      col.forEach(c => { items[c.n.id] = { ...c, x: x + (cw - c.w) / 2, y }; y += c.h + GAPY; });
      H = Math.max(H, y - GAPY);
      x += cw + GAPX;
    });
    return { w: Math.max(0, x - GAPX), h: H, items, nodes };
  }
  function draw(parent, lay, ox, oy) {
    for (const it of Object.values(lay.items)) {
      for (const d of it.n.deps || []) {
        const from = lay.items[d];
        if (!from) continue;
        const x1 = ox + from.x + from.w, y1 = oy + from.y + Math.min(from.h, NH) / 2;
        const x2 = ox + it.x, y2 = oy + it.y + Math.min(it.h, NH) / 2;
        const mx = (x1 + x2) / 2;
        parent.appendChild(s('path', { class: 'edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}` }));
      }
    }
    for (const it of Object.values(lay.items)) {
      const n = it.n, X = ox + it.x, Y = oy + it.y;
      const what = n.kind === 'llm' ? `llm · ${n.agent || ''}` : n.kind === 'code' ? `code · ${n.code || ''}` : n.kind === 'call' ? `call → ${n.flow || ''}` : n.kind;
      const tip = `${n.id} (${n.kind})` + (n.model ? `\nmodel ${n.model}` : '') + (n.prompt_file ? `\nprompt ${n.prompt_file}` : '') + (n.deps && n.deps.length ? `\nafter ${n.deps.join(', ')}` : '');
      if (it.box) {
        const g = s('g', { class: 'group' });
        g.appendChild(s('title', {}, tip));
        g.appendChild(s('rect', { x: X, y: Y, width: it.w, height: it.h, rx: 8 }));
        g.appendChild(s('text', { x: X + 10, y: Y + 16, class: 'title' }, `${n.id}`));
        g.appendChild(s('text', { x: X + 14 + n.id.length * 7, y: Y + 16, class: 'kind' }, 'group'));
        parent.appendChild(g);
        draw(parent, it.box, X + PAD, Y + PAD + HEAD);
      } else {
        const g = s('g', { class: 'node ' + n.kind, tabindex: 0, role: 'img', 'aria-label': tip.replace(/\n/g, '; ') });
        g.appendChild(s('title', {}, tip));
        g.appendChild(s('rect', { x: X, y: Y, width: it.w, height: NH, rx: 6 }));
        g.appendChild(s('text', { x: X + 9, y: Y + 20, class: 'title' }, n.id));
        g.appendChild(s('text', { x: X + 9, y: Y + 37, class: 'kind' }, what.length > 26 ? what.slice(0, 25) + '…' : what));
        if (n.kind === 'call' && n.flow) {
          const a = s('a', { href: '#/flows/' + encodeURIComponent(n.flow) });
          a.appendChild(g);
          parent.appendChild(a);
        } else parent.appendChild(g);
      }
    }
  }
  const lay = layout(flow.nodes || []);
  const M = 14, bandH = 22;
  const tops = (flow.nodes || []).map(n => n.id);
  const usable = (ranges || []).filter(r => tops.includes(r.from || tops[0]) && tops.includes(r.to || tops[tops.length - 1]));
  const W = lay.w + 2 * M, H = lay.h + 2 * M + usable.length * (bandH + 6) + (usable.length ? 6 : 0);
  const el = s('svg', { class: 'flow', width: Math.max(W, 300), height: H, viewBox: `0 0 ${Math.max(W, 300)} ${H}`, role: 'group', 'aria-label': `graph of flow ${flow.id}` });
  const defs = s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8594a8' })));
  el.appendChild(defs);
  usable.forEach((r, i) => {
    const a = lay.items[r.from || tops[0]], b = lay.items[r.to || tops[tops.length - 1]];
    const x1 = M + Math.min(a.x, b.x), x2 = M + Math.max(a.x + a.w, b.x + b.w);
    const y = M + lay.h + 8 + i * (bandH + 6);
    const g = s('g', { class: 'range' });
    g.appendChild(s('title', {}, `range of experiment ${r.experiment}: ${r.from || 'start'} → ${r.to || 'end'}`));
    g.appendChild(s('rect', { x: x1, y, width: Math.max(80, x2 - x1), height: bandH, rx: 4 }));
    g.appendChild(s('text', { x: x1 + 6, y: y + 15 }, `${r.experiment}: ${r.from || 'start'} → ${r.to || 'end'}`));
    el.appendChild(g);
  });
  draw(el, lay, M, M);
  return el;
}

// ---------- router ----------

const routes = [
  [/^\/?$/, pageOverview, 'overview'],
  [/^\/overview$/, pageOverview, 'overview'],
  [/^\/flows$/, pageFlows, 'flows'],
  [/^\/flows\/([^/]+)$/, pageFlow, 'flows'],
  [/^\/runs$/, pageRuns, 'runs'],
  [/^\/runs\/([^/]+)$/, pageRun, 'runs'],
  [/^\/research$/, pageResearch, 'research'],
  [/^\/experiments\/([^/]+)$/, pageExperiment, 'research'],
  [/^\/series\/([^/]+)$/, pageSeries, 'research'],
  [/^\/findings$/, pageFindings, 'findings'],
  [/^\/chat$/, pageChat, 'chat'],
];

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  return { path, query: new URLSearchParams(qs || '') };
}
function go(path, query) {
  const qs = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '' && v !== null && v !== undefined)).toString() : '';
  location.hash = '#' + path + (qs ? '?' + qs : '');
}

async function route() {
  leaving.forEach(fn => { try { fn(); } catch (e) { /* already closed */ } });
  leaving = [];
  const token = ++pageToken;
  const { path, query } = parseHash();
  let found = routes.find(([re]) => re.test(path));
  if (!found) found = [/.*/, () => [h('h1', {}, 'Not found'), h('p', {}, 'No page at ', h('code', {}, path), '. ', link('#/', 'Overview'))], ''];
  const [re, fn, nav] = found;
  const args = (re.exec(path) || []).slice(1).map(decodeURIComponent);
  document.querySelectorAll('#nav a').forEach(a => a.classList.toggle('active', a.dataset.page === nav));
  document.querySelectorAll('#nav a').forEach(a => a.dataset.page === nav ? a.setAttribute('aria-current', 'page') : a.removeAttribute('aria-current'));
  replace(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    const ctx = { token, alive: () => token === pageToken };
    const content = await fn(...args, query, ctx);
    if (token !== pageToken) return;
    replace(main, content);
  } catch (err) {
    if (token !== pageToken) return;
    replace(main, h('h1', {}, 'Something went wrong'), errorBox(err));
  }
  const heading = main.querySelector('h1');
  document.title = (heading ? heading.textContent + ' — ' : '') + 'AQVEN Studio';
  if (!route.first) main.focus({ preventScroll: false });
  route.first = false;
}
route.first = true;
function onLeave(fn) { leaving.push(fn); }
function stream(url, handlers) {
  const es = new EventSource(url);
  for (const [ev, fn] of Object.entries(handlers)) es.addEventListener(ev, e => fn(JSON.parse(e.data)));
  es.addEventListener('end', () => es.close());
  onLeave(() => es.close());
  return es;
}

// ---------- Overview ----------

async function pageOverview() {
  const o = await api('/api/studio/overview');
  const p = o.project;
  const checkBox = h('div', { id: 'check' }, h('p', { class: 'muted' }, 'Running aqven check…'));
  api('/api/check').then(c => replace(checkBox, checkTable(c))).catch(err => replace(checkBox, errorBox(err)));
  const failed = o.runs.by_status.failed || 0, waiting = o.runs.by_status.waiting_human || 0;
  const paused = o.awaiting_approval.length;
  return [
    h('h1', {}, p.name || p.package),
    h('p', { class: 'sub' }, p.description || '', ' ', h('span', { class: 'mono' }, p.root)),
    o.simulate ? simNote('Simulated mode is on for this server: every run and series answers with the project\'s simulators instead of the models. Costs are what the real models would have charged for the same tokens; nothing was billed.') : null,
    h('div', { class: 'cards' },
      h('a', { class: 'stat', href: '#/flows' }, h('b', {}, p.flows.length), h('span', {}, `flows · ${p.agents.length} agents`)),
      h('a', { class: 'stat', href: '#/runs' }, h('b', {}, o.runs.total), h('span', {}, `runs · ${failed} failed` + (o.runs.simulated ? ` · ${o.runs.simulated} simulated` : ''))),
      h('a', { class: 'stat', href: '#/runs?status=waiting_human' }, h('b', {}, waiting), h('span', {}, 'runs wait for a person')),
      h('a', { class: 'stat', href: '#/research' }, h('b', {}, o.experiments), h('span', {}, `experiments · ${o.series.total} series`)),
      h('a', { class: 'stat', href: '#/research' }, h('b', {}, paused), h('span', {}, 'series await approval')),
      h('a', { class: 'stat', href: '#/findings' }, h('b', {}, o.findings), h('span', {}, 'findings'))),
    capPendingNote(p, () => location.reload()),
    paused ? h('div', { class: 'note warn' }, h('b', {}, 'Waiting for you: '),
      o.awaiting_approval.map((sr, i) => [i ? ', ' : '', link('#/series/' + sr.series_id, `${sr.experiment_id || 'look'} (${sr.series_id})`)])) : null,
    h('h2', {}, h('code', {}, 'aqven check')),
    checkBox,
    h('h2', {}, 'Latest series'),
    o.recent_series.length ? seriesTable(o.recent_series) : h('p', { class: 'muted' }, 'No series yet. Start one from an experiment in ', link('#/research', 'Research'), '.'),
    h('h2', {}, 'Project'),
    kv([
      ['package', h('code', {}, p.package)],
      ['spend cap', `${fmt.money(p.spend_cap_usd)} (${p.spend_cap_source === 'override' ? 'local override in .aqven/local.yaml' : p.spend_cap_source === 'project' ? 'research.spend_cap_usd in aqven.yaml' : 'default'})`],
      ['flows', p.flows.map((f, i) => [i ? ', ' : '', link('#/flows/' + encodeURIComponent(f), f)])],
      ['datasets', p.datasets.join(', ')],
      ['chat', [o.chat.text, ' — ', link('#/chat', 'open the chat')]],
    ]),
  ];
}

function checkTable(c) {
  if (c.ok && !c.warnings) return h('div', { class: 'note ok' }, 'No errors, no warnings: the project\'s files, flows and experiments check out.');
  return h('table', { id: 'check-table' },
    h('caption', {}, `${c.errors} error(s), ${c.warnings} warning(s)`),
    h('thead', {}, h('tr', {}, ['', 'where', 'code', 'message'].map(t => h('th', {}, t)))),
    h('tbody', {}, c.diagnostics.map(d => h('tr', {},
      h('td', {}, badge(d.severity, d.severity === 'error' ? 'bad' : 'warn')),
      h('td', { class: 'mono' }, (d.file || 'project') + (d.line ? ':' + d.line : '')),
      h('td', { class: 'mono' }, d.code),
      h('td', {}, d.message, d.hint ? h('div', { class: 'muted' }, 'hint: ' + d.hint) : null)))));
}

function seriesTable(list) {
  return h('table', {},
    h('thead', {}, h('tr', {}, ['series', 'experiment', 'on', 'status', 'verdict', 'created'].map(t => h('th', {}, t)))),
    h('tbody', {}, list.map(sr => h('tr', {},
      h('td', {}, link('#/series/' + sr.series_id, sr.series_id), ' ', simBadge(sr.simulated)),
      h('td', {}, sr.experiment_id ? link('#/experiments/' + encodeURIComponent(sr.experiment_id), sr.experiment_id) : sr.kind),
      h('td', {}, sr.on === 'holdout' ? 'Confirm' : 'Explore'),
      h('td', {}, badge(sr.status)),
      h('td', {}, sr.verdict ? badge(sr.verdict) : '—'),
      h('td', {}, fmt.time(sr.created_at))))));
}

// ---------- Flows ----------

async function rangesByFlow() {
  const exps = await api('/api/experiments');
  const out = {};
  exps.forEach(e => {
    if (e.subject && (e.subject.from || e.subject.to)) (out[e.subject.flow] = out[e.subject.flow] || []).push({ experiment: e.id, from: e.subject.from, to: e.subject.to });
  });
  return { out, exps };
}

async function pageFlows() {
  const [flows, agents, rb] = await Promise.all([api('/api/flows'), api('/api/agents'), rangesByFlow()]);
  const full = await Promise.all(flows.map(f => api('/api/flows/' + encodeURIComponent(f.id))));
  return [
    h('h1', {}, 'Flows'),
    h('p', { class: 'sub' }, 'Each flow as its graph: nodes run left to right as their inputs become ready; a dashed box is a group; a yellow band is the range of top-level nodes an experiment runs.'),
    full.map(f => h('section', { class: 'card' },
      h('h2', { style: 'margin-top:0' }, link('#/flows/' + encodeURIComponent(f.id), f.id)),
      h('p', { class: 'muted' }, f.description || ''),
      flowGraph(f, rb.out[f.id]),
      f.diagnostics && f.diagnostics.length ? h('div', { class: 'note bad' }, f.diagnostics.map(d => h('div', {}, `${d.file || ''}${d.line ? ':' + d.line : ''} ${d.code}: ${d.message}`))) : null)),
    h('h2', {}, 'Agents'),
    agentsTable(agents),
  ];
}
function agentsTable(agents) {
  return h('table', {},
    h('thead', {}, h('tr', {}, ['agent', 'model', 'output mode', 'settings', 'simulator'].map(t => h('th', {}, t)))),
    h('tbody', {}, agents.map(a => h('tr', {},
      h('td', {}, h('b', {}, a.id), a.description ? h('div', { class: 'muted' }, a.description) : null),
      h('td', { class: 'mono' }, a.model),
      h('td', {}, a.output_mode),
      h('td', { class: 'mono' }, Object.entries(a.settings || {}).map(([k, v]) => `${k}=${v}`).join(' ')),
      h('td', { class: 'mono' }, a.simulator || '—')))));
}

async function pageFlow(id) {
  const [f, agents, rb] = await Promise.all([api('/api/flows/' + encodeURIComponent(id)), api('/api/agents'), rangesByFlow()]);
  const used = new Set();
  const walk = ns => ns.forEach(n => { if (n.agent) used.add(n.agent); if (n.children) walk(n.children); });
  walk(f.nodes);
  const exps = rb.exps.filter(e => e.subject.flow === id);
  return [
    h('h1', {}, 'Flow ', h('code', {}, id)),
    h('p', { class: 'sub' }, f.description || '', ' ', h('span', { class: 'mono' }, f.file)),
    flowGraph(f, rb.out[id]),
    f.diagnostics.length ? h('div', { class: 'note bad' }, f.diagnostics.map(d => h('div', {}, `${d.file || ''}${d.line ? ':' + d.line : ''} ${d.code}: ${d.message}`))) : null,
    h('p', {}, link('#/runs?' + new URLSearchParams({ flow: id }), 'Runs of this flow'), ' · ', link('#/runs?' + new URLSearchParams({ new: id }), 'Start a run')),
    h('h2', {}, 'Nodes'),
    h('table', {},
      h('thead', {}, h('tr', {}, ['node', 'kind', 'after', 'agent / code / flow', 'inputs'].map(t => h('th', {}, t)))),
      h('tbody', {}, (function rows(ns, depth) {
        return ns.flatMap(n => [h('tr', {},
          h('td', { style: `padding-left:${9 + depth * 18}px` }, h('b', {}, n.id)),
          h('td', {}, n.kind),
          h('td', {}, (n.deps || []).join(', ') || '—'),
          h('td', { class: 'mono' }, n.agent ? `${n.agent} (${n.model})` : n.code || (n.flow ? link('#/flows/' + encodeURIComponent(n.flow), n.flow) : '') || (n.result || '')),
          h('td', { class: 'mono' }, Object.keys(n.inputs || {}).join(', '))),
        ...rows(n.children || [], depth + 1)]);
      })(f.nodes, 0))),
    h('h2', {}, 'Types'),
    h('div', { class: 'row' }, h('div', { class: 'grow' }, h('h3', {}, 'input'), pre(f.input_schema)), h('div', { class: 'grow' }, h('h3', {}, 'output'), pre(f.output_schema))),
    exps.length ? [h('h2', {}, 'Experiments on this flow'), h('ul', {}, exps.map(e => h('li', {}, link('#/experiments/' + encodeURIComponent(e.id), e.id), ` — ${e.caption}` + (e.subject.from ? ` · range ${e.subject.from} → ${e.subject.to}` : ''))))] : null,
    h('h2', {}, 'Agents of this flow'),
    agentsTable(agents.filter(a => used.has(a.id))),
  ];
}

// ---------- Runs ----------

async function pageRuns(query) {
  const q = Object.fromEntries(query.entries());
  const page = Number(q.page || 1);
  const params = new URLSearchParams({ page, per_page: 50 });
  for (const [k, p] of [['flow', 'flow_id'], ['status', 'status'], ['series', 'series_id'], ['case', 'case'], ['source', 'source']]) if (q[k]) params.set(p, q[k]);
  const [data, datasets] = await Promise.all([api('/api/studio/runs?' + params), api('/api/datasets')]);
  const f = { flow: h('select', { id: 'f-flow' }, h('option', { value: '' }, 'all flows'), data.flows.map(x => h('option', { value: x, selected: q.flow === x }, x))),
    status: h('select', { id: 'f-status' }, h('option', { value: '' }, 'any status'), data.statuses.map(x => h('option', { value: x, selected: q.status === x }, x))),
    source: h('select', { id: 'f-source' }, h('option', { value: '' }, 'any source'), h('option', { value: 'series', selected: q.source === 'series' }, 'attempts of series'), h('option', { value: 'hand', selected: q.source === 'hand' }, 'started by hand')),
    case: h('input', { id: 'f-case', type: 'search', value: q.case || '', placeholder: 'case name' }) };
  const apply = e => { e.preventDefault(); go('/runs', { flow: f.flow.value, status: f.status.value, source: f.source.value, case: f.case.value, series: q.series || '' }); };
  const anySim = data.items.some(r => r.simulated);
  return [
    h('h1', {}, 'Runs'),
    h('p', { class: 'sub' }, 'Every run, newest first: those started by hand and every attempt of a series. Open one for its trace.'),
    newRunForm(data.flows, datasets, q.new),
    h('form', { class: 'filters', onsubmit: apply, 'aria-label': 'filter runs' },
      h('div', {}, h('label', { for: 'f-flow' }, 'Flow'), f.flow),
      h('div', {}, h('label', { for: 'f-status' }, 'Status'), f.status),
      h('div', {}, h('label', { for: 'f-source' }, 'Source'), f.source),
      h('div', {}, h('label', { for: 'f-case' }, 'Case'), f.case),
      q.series ? h('div', {}, h('label', {}, 'Series'), h('code', {}, q.series)) : null,
      h('button', { type: 'submit', class: 'primary' }, 'Apply'),
      h('button', { type: 'button', onclick: () => go('/runs') }, 'Clear')),
    anySim ? simNote('Runs marked simulated were answered by the project\'s simulators, not by the models.') : null,
    data.items.length ? h('table', { id: 'runs-table' },
      h('thead', {}, h('tr', {}, ['run', 'flow', 'case', 'status', 'started', 'took', 'tokens', 'cost', 'source'].map(t => h('th', { class: ['tokens', 'cost'].includes(t) ? 'num' : null }, t)))),
      h('tbody', {}, data.items.map(r => h('tr', { class: r.status === 'failed' ? 'failing' : null },
        h('td', { class: 'nowrap' }, link('#/runs/' + r.id, r.id)),
        h('td', {}, r.flow_id),
        h('td', {}, r.held_out ? h('span', { class: 'muted' }, 'held-out case') : (r.case_name || h('span', { class: 'muted' }, 'input'))),
        h('td', {}, h('span', { class: 'nowrap' }, badge(r.status), ' ', simBadge(r.simulated)), r.error_code ? h('div', { class: 'mono err' }, r.error_code) : null),
        h('td', { class: 'nowrap' }, fmt.time(r.started_at || r.created_at)),
        h('td', { class: 'nowrap' }, fmt.dur(r.started_at, r.ended_at)),
        h('td', { class: 'num', title: `${r.model_calls} model calls` }, r.input_tokens + r.output_tokens),
        h('td', { class: 'num' }, (r.unpriced_calls ? '≥ ' : '') + fmt.money(r.cost_usd)),
        h('td', {}, r.series_id ? link('#/series/' + r.series_id, 'series') : 'by hand'))))) :
      h('p', { class: 'muted' }, 'No runs match.'),
    pager(data.page, data.pages, data.total, 'runs', p => go('/runs', { ...q, page: p })),
    data.held_out_hidden ? h('p', { class: 'muted', id: 'held-out-runs' }, `${data.held_out_hidden} run${data.held_out_hidden === 1 ? '' : 's'} of held-out cases not listed: held-out runs are only counted`) : null,
  ];
}

function newRunForm(flows, datasets, preset) {
  const flow = h('select', { id: 'nr-flow' }, flows.map(x => h('option', { value: x, selected: preset === x }, x)));
  const kind = h('select', { id: 'nr-kind' }, h('option', { value: 'case' }, 'a case'), h('option', { value: 'input' }, 'an input (JSON)'));
  const caseIn = h('input', { id: 'nr-case', list: 'nr-cases', placeholder: 'case name', style: 'width:260px' });
  const list = h('datalist', { id: 'nr-cases' });
  const dsSel = h('select', { id: 'nr-dataset' }, h('option', { value: '' }, 'any dataset'), datasets.map(d => h('option', { value: d.id }, d.id)));
  const input = h('textarea', { id: 'nr-input', rows: 4, placeholder: '{"ticket": "...", "tier": "gold"}' });
  const context = h('textarea', { id: 'nr-context', rows: 3, placeholder: '{"order_total": "49.90"} (optional)' });
  const from = h('input', { id: 'nr-from', placeholder: 'first node' }), to = h('input', { id: 'nr-to', placeholder: 'last node' });
  const out = h('div');
  const caseBox = h('div', { class: 'row' }, h('div', {}, h('label', { for: 'nr-dataset' }, 'Dataset'), dsSel), h('div', {}, h('label', { for: 'nr-case' }, 'Case (working cases listed)'), caseIn, list));
  const inputBox = h('div', { hidden: true }, h('label', { for: 'nr-input' }, 'Input'), input, h('label', { for: 'nr-context' }, 'Context'), context);
  const loadCases = async () => {
    const ids = dsSel.value ? [dsSel.value] : datasets.map(d => d.id);
    const all = await Promise.all(ids.map(id => api('/api/datasets/' + encodeURIComponent(id))));
    replace(list, all.flatMap(d => d.cases.map(c => h('option', { value: c.name }))));
  };
  dsSel.addEventListener('change', loadCases);
  kind.addEventListener('change', () => { caseBox.hidden = kind.value !== 'case'; inputBox.hidden = kind.value !== 'input'; });
  const submit = async e => {
    e.preventDefault();
    replace(out);
    const body = { flow_id: flow.value };
    try {
      if (kind.value === 'case') { body.case = caseIn.value.trim(); if (dsSel.value) body.dataset_id = dsSel.value; } else {
        body.input = JSON.parse(input.value || 'null');
        if (context.value.trim()) body.context = JSON.parse(context.value);
      }
    } catch (err) { replace(out, h('div', { class: 'note bad', role: 'alert' }, 'Not valid JSON: ' + err.message)); return; }
    if (from.value.trim()) body.from_node = from.value.trim();
    if (to.value.trim()) body.to_node = to.value.trim();
    try {
      const rec = await api('/api/runs', { method: 'POST', body });
      go('/runs/' + rec.id);
    } catch (err) { replace(out, errorBox(err)); }
  };
  const det = h('details', { class: 'card', open: !!preset },
    h('summary', {}, 'Start a run'),
    h('form', { onsubmit: submit, 'aria-label': 'start a run' },
      h('div', { class: 'row' }, h('div', {}, h('label', { for: 'nr-flow' }, 'Flow'), flow), h('div', {}, h('label', { for: 'nr-kind' }, 'On'), kind),
        h('div', {}, h('label', { for: 'nr-from' }, 'From (optional)'), from), h('div', {}, h('label', { for: 'nr-to' }, 'To (optional)'), to)),
      caseBox, inputBox,
      h('p', {}, h('button', { type: 'submit', class: 'primary' }, 'Start run'), ' ', h('span', { class: 'muted' }, state.simulate ? 'Simulated mode is on: simulators answer.' : 'Live: the models are called and paid for.')),
      out));
  det.addEventListener('toggle', () => { if (det.open && !list.childNodes.length) loadCases().catch(() => {}); });
  if (preset) loadCases().catch(() => {});
  return det;
}

async function pageRun(id, _query, ctx) {
  const first = await api('/api/studio/runs/' + encodeURIComponent(id) + '/trace');
  const expanded = new Set();
  const head = h('div'), waitBox = h('div'), timeline = h('div'), output = h('div');
  let cur = first;
  const redraw = nodeId => {
    timeline.dataset.key = '';
    render(cur);
    const btn = timeline.querySelector(`[data-node="${CSS.escape(nodeId)}"]`);
    if (btn) btn.focus();
  };
  const render = t => {
    cur = t;
    const r = t.run, src = t.source;
    patch(head, [r.status, r.cost_usd, r.model_calls, r.ended_at, r.error], () => [
      h('h1', {}, 'Run ', h('code', {}, r.id)),
      h('p', { class: 'sub' }, 'flow ', link('#/flows/' + encodeURIComponent(r.flow_id), r.flow_id),
        r.request.from_node || r.request.to_node ? ` (range ${r.request.from_node || 'start'} → ${r.request.to_node || 'end'})` : '',
        ' · ', src.kind === 'series' && src.side === 'holdout' ? 'a held-out case' : (r.case_name ? ['case ', h('b', {}, r.case_name)] : 'an input given by hand'),
        ' · ', badge(r.status), ' ', simBadge(r.simulated)),
      r.simulated ? simNote('This run was answered by the project\'s simulators, not by the models; its cost is what the real models would charge for the same tokens.') : null,
      kv([
        ['source', src.kind === 'series' ? ['attempt of series ', link('#/series/' + src.series_id, src.series_id), src.experiment_id ? [' (', link('#/experiments/' + encodeURIComponent(src.experiment_id), src.experiment_id), `, variant ${src.variant_id}, ${fmt.side(src.side)})`] : ''] : 'started by hand'],
        ['started', fmt.time(r.started_at || r.created_at)],
        ['took', fmt.dur(r.started_at, r.ended_at)],
        ['model calls', String(r.model_calls)],
        ['tokens', `${r.input_tokens} in · ${r.output_tokens} out`],
        ['cost', (r.cost_is_lower_bound ? 'at least ' : '') + fmt.money(r.cost_usd) + (r.cost_is_lower_bound ? ` (${r.unpriced_calls} call(s) had no known price)` : '')],
        ['outcome', r.outcome ? (r.outcome === 'infra' ? 'infrastructure error (not counted in metrics)' : r.outcome === 'model_failure' ? 'model failure (counted)' : 'ok') : '—'],
      ]),
      r.error ? h('div', { class: 'note bad', role: 'alert' }, h('b', {}, r.error.code), ': ', r.error.message, r.error.node_id ? [' — at node ', h('code', {}, r.error.node_id)] : '') : null,
      src.kind === 'series' && src.side === 'holdout' ? null : h('details', {}, h('summary', {}, 'What it ran on (input, context, node outputs)'),
        pre({ input: r.request.input, context: r.request.context, node_outputs: r.request.node_outputs })),
    ]);
    patch(waitBox, t.waiting, () => t.waiting ? humanForm(r.id, t.waiting) : []);
    patch(timeline, [t.nodes, [...expanded]], () => drawTimeline(t, expanded, redraw));
    patch(output, [r.output], () => r.output !== null && r.output !== undefined ? [h('h2', {}, 'Output'), pre(r.output)] : []);
  };
  render(first);
  if (!['done', 'failed'].includes(first.run.status)) {
    stream('/api/runs/' + encodeURIComponent(id) + '/stream', {
      trace: t => { if (ctx.alive()) { render(t); if (['done', 'failed'].includes(t.run.status)) announce(`run ${t.run.status}`); } },
    });
  }
  return [head, waitBox, h('h2', {}, 'Trace'), h('p', { class: 'muted' }, 'Each node on the run\'s clock. Open a node (Enter) for its inputs, output, model calls, tokens and cost.'), timeline, output];
}

function drawTimeline(t, expanded, redraw) {
  const nodes = t.nodes;
  if (!nodes.length) return h('p', { class: 'muted' }, 'No node has started yet.');
  const t0 = new Date(t.run.started_at || t.run.created_at).getTime();
  const tEnd = Math.max(t0 + 1, ...nodes.map(n => new Date(n.end || n.start || t.run.ended_at || Date.now()).getTime()), t.run.ended_at ? new Date(t.run.ended_at).getTime() : 0);
  const span = tEnd - t0;
  const rows = [];
  for (const n of nodes) {
    const a = n.start ? new Date(n.start).getTime() - t0 : 0;
    const b = (n.end ? new Date(n.end).getTime() : tEnd) - t0;
    const open = expanded.has(n.id);
    const cost = n.calls.reduce((acc, c) => acc + Number(((c.response || c.error || {}).cost_usd) || 0), 0);
    const meta = [n.calls.length ? `${n.calls.length} call${n.calls.length > 1 ? 's' : ''}` : null,
      n.tokens.input + n.tokens.output ? `${n.tokens.input + n.tokens.output} tok` : null,
      n.calls.length ? fmt.money(cost) : null, n.end ? `${b - a} ms` : n.status].filter(Boolean).join(' · ');
    rows.push(h('button', { type: 'button', class: 'tl-row', 'aria-expanded': open ? 'true' : 'false', 'data-node': n.id,
      onclick: () => { open ? expanded.delete(n.id) : expanded.add(n.id); redraw(n.id); } },
      h('span', { class: 'tl-name', style: `padding-left:${n.depth * 16}px` }, n.status === 'failed' ? '✗ ' : n.status === 'waiting_human' ? '⏸ ' : '', h('b', {}, n.id), ' ', h('span', { class: 'muted' }, n.kind || '')),
      h('span', { class: 'tl-track', 'aria-hidden': 'true' }, h('span', { class: `${n.kind || ''} ${n.status}`, style: `left:${a / span * 100}%;width:${Math.max(0.4, (b - a) / span * 100)}%` })),
      h('span', { class: 'tl-meta' }, meta)));
    if (open) rows.push(nodeDetail(n));
  }
  return h('div', { class: 'timeline' }, rows);
}

function nodeDetail(n) {
  return h('div', { class: 'tl-detail' },
    n.error ? h('div', { class: 'note bad' }, h('b', {}, n.error.code), ': ', n.error.message) : null,
    n.inputs !== null && n.inputs !== undefined ? [h('h3', {}, 'Inputs'), pre(n.inputs)] : null,
    n.calls.map((c, i) => {
      const rq = c.request || {}, rs = c.response, er = c.error;
      return h('div', { class: 'card' },
        h('b', {}, `Model call ${i + 1}`), ' ', rq.agent ? `agent ${rq.agent} · ` : '', h('span', { class: 'mono' }, rq.model || (rs && rs.model_name) || ''), ' ', simBadge(rq.simulated || (rs && rs.simulated)),
        rs ? kv([['tokens', `${rs.input_tokens} in · ${rs.output_tokens} out`], ['cost', `${rs.cost_usd === null ? 'unknown (no price)' : fmt.money(rs.cost_usd)} · source ${rs.cost_source || 'none'}`],
          ['latency', rs.latency_ms ? `${Math.round(rs.latency_ms)} ms` : '—'], ['output retries', String(rs.output_retries || 0)]]) : null,
        er ? h('div', { class: 'note bad' }, h('b', {}, er.code), ': ', er.message, er.retryable ? ' (retryable)' : '', er.cost_usd ? ` · cost ${fmt.money(er.cost_usd)} (${er.cost_source})` : '') : null,
        c.output_retries.length ? h('details', {}, h('summary', {}, `${c.output_retries.length} output retr${c.output_retries.length > 1 ? 'ies' : 'y'}`), pre(c.output_retries)) : null,
        rq.prompt ? h('details', {}, h('summary', {}, 'Prompt'), pre(rq.prompt)) : null);
    }),
    n.retries.length ? [h('h3', {}, 'Retries'), pre(n.retries)] : null,
    n.human ? [h('h3', {}, 'Asked a person'), h('p', {}, n.human.question || ''), n.human.answer !== undefined ? pre(n.human.answer) : null] : null,
    n.output !== null && n.output !== undefined ? [h('h3', {}, 'Output'), pre(n.output)] : null);
}

function humanForm(runId, w) {
  const schema = w.output_schema || { type: 'string' };
  const isText = schema.type === 'string';
  const ta = h('textarea', { id: 'human-answer', rows: isText ? 3 : 5, placeholder: isText ? 'your answer' : JSON.stringify(exampleOf(schema)) });
  const out = h('div');
  const submit = async e => {
    e.preventDefault();
    let answer = ta.value;
    if (!isText) { try { answer = JSON.parse(ta.value); } catch (err) { replace(out, h('div', { class: 'note bad', role: 'alert' }, 'Not valid JSON: ' + err.message)); return; } }
    try {
      await api(`/api/studio/runs/${encodeURIComponent(runId)}/human/${w.node_id.split('/').map(encodeURIComponent).join('/')}`, { method: 'POST', body: { answer } });
      replace(out, h('div', { class: 'note ok' }, 'Answered: the run goes on.'));
      announce('answer sent');
      setTimeout(route, 300);
    } catch (err) { replace(out, errorBox(err)); }
  };
  return h('section', { class: 'card note warn', 'aria-label': 'a person is asked' },
    h('h2', { style: 'margin-top:0' }, `Node ${w.node_id} waits for a person`),
    h('p', {}, h('b', {}, w.question || '')),
    w.inputs ? h('details', { open: true }, h('summary', {}, 'What it shows'), pre(w.inputs)) : null,
    h('form', { onsubmit: submit },
      h('label', { for: 'human-answer' }, isText ? 'Answer' : 'Answer (JSON of type ' + JSON.stringify(schema) + ')'), ta,
      h('p', {}, h('button', { type: 'submit', class: 'primary' }, 'Send answer'))), out);
}
function exampleOf(schema) {
  if (!schema || typeof schema !== 'object') return '';
  if (schema.type === 'object') return Object.fromEntries(Object.entries(schema.properties || {}).map(([k, v]) => [k, exampleOf(v)]));
  if (schema.type === 'array') return [exampleOf(schema.items)];
  if (schema.type === 'boolean') return true;
  if (schema.type === 'integer' || schema.type === 'number') return 0;
  return '';
}

// ---------- Research ----------

function questionText(q) {
  if (!q) return '';
  if (q.kind === 'threshold') return `${q.metric} ${q.direction === 'at_most' ? 'at most' : 'at least'} ${q.bound}, margin ${q.margin}`;
  if (q.kind === 'compare') return `each variant beats ${q.baseline} on ${q.metric} by more than ${q.margin}`;
  if (q.kind === 'noninferior') return `${q.variant || 'each variant'} is not worse than ${q.baseline} on ${q.metric} by more than ${q.margin}`;
  return q.kind;
}

async function pageResearch() {
  const [exps, series] = await Promise.all([api('/api/experiments'), api('/api/series?limit=50')]);
  const last = {};
  series.forEach(sr => { if (sr.experiment_id && !last[sr.experiment_id]) last[sr.experiment_id] = sr; });
  const paused = series.filter(sr => sr.status === 'awaiting_approval');
  return [
    h('h1', {}, 'Research'),
    h('p', { class: 'sub' }, 'Each experiment asks one question about one factor. Explore on working cases as often as you like; confirm once on held-out cases.'),
    paused.length ? h('div', { class: 'note warn' }, h('b', {}, `${paused.length} series wait for your approval: `), paused.map((sr, i) => [i ? ', ' : '', link('#/series/' + sr.series_id, `${sr.experiment_id} (${sr.series_id})`)])) : null,
    h('h2', {}, 'Experiments'),
    h('table', { id: 'experiments' },
      h('thead', {}, h('tr', {}, ['experiment', 'failure mode', 'question', 'factor', 'latest series'].map(t => h('th', {}, t)))),
      h('tbody', {}, exps.map(e => h('tr', {},
        h('td', {}, link('#/experiments/' + encodeURIComponent(e.id), e.id)),
        h('td', {}, e.failure_mode),
        h('td', {}, e.question.kind, ': ', questionText(e.question)),
        h('td', {}, e.caption, h('div', { class: 'muted' }, `${e.variants.length} variant${e.variants.length > 1 ? 's' : ''}`)),
        h('td', {}, last[e.id] ? [link('#/series/' + last[e.id].series_id, last[e.id].on === 'holdout' ? 'Confirm' : 'Explore'), ' ', badge(last[e.id].status), ' ', last[e.id].verdict ? badge(last[e.id].verdict) : null] : h('span', { class: 'muted' }, 'none')))))),
    h('h2', {}, 'Series'),
    series.length ? seriesTable(series) : h('p', { class: 'muted' }, 'No series yet.'),
  ];
}

function variantsTable(e) {
  return h('table', { id: 'variants', class: 'variants' },
    h('caption', {}, e.caption),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'variant'), h('th', { scope: 'col' }, 'value'))),
    h('tbody', {}, e.variants.map(v => h('tr', {}, h('th', { scope: 'row' }, v.id), h('td', { class: v.value === 'as written' ? 'muted' : 'mono' }, v.value)))));
}

async function pageExperiment(id) {
  const [e, project] = await Promise.all([api('/api/experiments/' + encodeURIComponent(id)), api('/api/project')]);
  const subj = e.subject;
  return [
    h('h1', {}, 'Experiment ', h('code', {}, e.id)),
    h('p', { class: 'sub' }, 'failure mode ', badge(e.failure_mode, 'warn'), ' · ', h('span', { class: 'mono' }, e.file)),
    h('div', { class: 'card' }, h('h2', { style: 'margin-top:0' }, 'Question'), h('p', {}, e.description),
      kv([['asks', `${e.question.kind}: ${questionText(e.question)}`],
        ['subject', [link('#/flows/' + encodeURIComponent(subj.flow), subj.flow), subj.from || subj.to ? ` range ${subj.from || 'start'} → ${subj.to || 'end'}` : ' (the whole flow)']],
        ['dataset', `${e.dataset.id}` + (e.dataset.tags && e.dataset.tags.length ? ` (tags ${e.dataset.tags.join(', ')})` : '')],
        ['checks', e.checks.map(c => c.id + (c.judge ? ' (judge)' : c.builtin ? ` (${c.builtin})` : c.function ? ` (${c.function})` : '')).join(', ')],
        ['repeats', String(e.repeats)]])),
    variantsTable(e),
    launchPanel(e, project),
    h('h2', {}, 'Series of this experiment'),
    e.series.length ? seriesTable(e.series) : h('p', { class: 'muted' }, 'None yet.'),
  ];
}

function launchPanel(e, project) {
  const sideDev = h('input', { type: 'radio', name: 'on', value: 'dev', id: 'on-dev', checked: true });
  const sideHold = h('input', { type: 'radio', name: 'on', value: 'holdout', id: 'on-holdout' });
  const cases = h('input', { id: 'lp-cases', type: 'number', min: 1, step: 1, placeholder: 'all' });
  const repeats = h('input', { id: 'lp-repeats', type: 'number', min: 1, max: 20, step: 1, placeholder: String(e.repeats) });
  const cap = h('input', { id: 'lp-cap', type: 'text', inputmode: 'decimal', placeholder: project.spend_cap_usd });
  const planBox = h('div', { id: 'launch-plan', 'aria-live': 'polite' });
  const out = h('div');
  const start = h('button', { type: 'submit', class: 'primary', id: 'lp-start' }, 'Start series');
  let opId = crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);
  let seq = 0, timer = null;
  const body = () => {
    const b = { on: sideHold.checked ? 'holdout' : 'dev' };
    if (cases.value) b.cases = Number(cases.value);
    if (repeats.value) b.repeats = Number(repeats.value);
    if (cap.value.trim()) b.cap_usd = cap.value.trim();
    return b;
  };
  const refresh = async () => {
    const my = ++seq;
    opId = crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);  // a changed plan is a new start
    try {
      const p = await api(`/api/experiments/${encodeURIComponent(e.id)}/launch-plan`, { method: 'POST', body: body() });
      if (my !== seq) return;
      start.disabled = false;
      replace(planBox, drawPlan(p, refresh));
    } catch (err) { if (my === seq) { start.disabled = true; replace(planBox, errorBox(err)); } }
  };
  const later = () => { clearTimeout(timer); timer = setTimeout(refresh, 250); };
  [sideDev, sideHold].forEach(r => r.addEventListener('change', refresh));
  [cases, repeats, cap].forEach(i => i.addEventListener('input', later));
  const submit = async ev => {
    ev.preventDefault();
    start.disabled = true;
    replace(out, h('p', { class: 'muted' }, 'Starting…'));
    try {
      const res = await api('/api/series', { method: 'POST', body: { experiment_id: e.id, ...body(), client_op_id: opId } });
      announce('series started');
      go('/series/' + res.series.series_id);
    } catch (err) { start.disabled = false; replace(out, errorBox(err)); }
  };
  refresh();
  return h('section', { class: 'card', id: 'launch', 'aria-labelledby': 'launch-h' },
    h('h2', { id: 'launch-h', style: 'margin-top:0' }, 'Launch'),
    h('form', { onsubmit: submit },
      h('fieldset', { class: 'seg' }, h('legend', {}, 'On'),
        h('label', { for: 'on-dev' }, sideDev, h('span', {}, h('b', {}, 'Explore'), ' — working cases (dev): numbers and a signal, as often as you need')),
        h('label', { for: 'on-holdout' }, sideHold, h('span', {}, h('b', {}, 'Confirm'), ' — held-out cases (holdout): a verdict and a finding, once'))),
      h('div', { class: 'row' },
        h('div', { class: 'field' }, h('label', { for: 'lp-cases' }, 'Cases'), cases),
        h('div', { class: 'field' }, h('label', { for: 'lp-repeats' }, 'Repeats'), repeats),
        h('div', { class: 'field' }, h('label', { for: 'lp-cap' }, 'Cap (USD)'), cap)),
      h('h3', {}, 'The plan — nothing runs until you press Start'),
      planBox,
      h('p', {}, start, ' ', h('span', { class: 'muted' }, state.simulate ? 'Simulated mode: the project\'s simulators answer.' : 'Every attempt calls the models and costs money.')),
      out));
}

// aqven.yaml asked for a higher project cap than a person confirmed: say so, and let the person confirm it.
function capPendingNote(p, after) {
  if (!p.project_cap_pending) return null;
  const out = h('span');
  const confirmIt = async () => {
    try {
      await api('/api/project/cap/confirm', { method: 'POST', body: { cap_usd: p.project_cap_asked_usd } });
      announce('project cap confirmed');
      if (after) after();
    } catch (err) { replace(out, errorBox(err)); }
  };
  return h('div', { class: 'note warn', id: 'cap-pending', role: 'status' },
    h('b', {}, 'The project cap is not confirmed: '), p.project_cap_note, '. ',
    h('button', { type: 'button', id: 'confirm-cap', onclick: confirmIt }, `Confirm ${fmt.money(p.project_cap_asked_usd)} as the project cap`), ' ', out);
}

function drawPlan(p, refresh) {
  const rec = p.recommended || {};
  const level = p.level ? ` at ${(p.level * 100).toFixed(1).replace(/\.0$/, '')}%` : '';
  const planning = p.planning === undefined ? null
    : p.planning === 'defaults' ? `defaults: rate ${p.planning_rate}, intra-case correlation ${p.planning_rho}`
    : `${p.planning}: rate ${Number(p.planning_rate).toFixed(3)}, intra-case correlation ${Number(p.planning_rho).toFixed(2)}`;
  const power = p.power ? p.power.text : null;
  const floor = p.zero_failure_floor ? p.zero_failure_floor.text : null;
  return [
    kv([
      ['attempts', [h('b', {}, `${p.attempts}`), ` = ${p.cases} cases × ${p.repeats} repeats × ${p.variants} variant${p.variants > 1 ? 's' : ''}`]],
      ['cases available', `${p.available} on the ${p.on === 'holdout' ? 'held-out' : 'working'} side`],
      ['expected half-width', p.half_width === null || p.half_width === undefined ? '—' : `±${Number(p.half_width).toFixed(3)}${level} (margin ${p.margin})`],
      ['recommended', rec.cases ? `${rec.cases} cases × ${rec.repeats} repeats` : '—'],
      ...(planning ? [['planned with', planning]] : []),
      ...(power ? [['80% power', power]] : []),
      ...(floor ? [['zero-failure floor', floor]] : []),
      ['cap', `${fmt.money(p.cap_usd)} (project cap ${fmt.money(p.project_cap_usd)}, ${p.project_cap_source})`],
      ['price', 'none before it runs: the spend is counted as attempts finish; near 90% of the cap the series pauses for you'],
    ]),
    p.below_recommended && rec.text ? h('div', { class: 'note warn', role: 'status' }, h('b', {}, 'Fewer cases than recommended: '), rec.text) : null,
    capPendingNote(p, refresh),
    p.needs_approval ? h('div', { class: 'note warn' }, 'This cap is above the project cap: the series will wait for approval before anything runs.') : null,
    p.earlier_reads && p.earlier_reads.text ? h('div', { class: 'note warn', role: 'status', id: 'earlier-reads' }, h('b', {}, 'Read before: '), p.earlier_reads.text) : null,
    p.on === 'holdout' ? h('div', { class: 'note' }, 'Confirm reads the held-out cases once per question: start it when the change is done and the question is fixed. A verdict other than invalid writes a finding and regenerates FINDINGS.md.') : null,
  ];
}

// ---------- a series, live ----------

async function pageSeries(id, _query, ctx) {
  const first = await api('/api/studio/series/' + encodeURIComponent(id));
  const sec = { head: h('div'), pause: h('div'), approvals: h('div'), progress: h('div'), verdict: h('div'), matrix: h('div'), cases: h('div'), attempts: h('div') };
  let lastStatus = first.status;
  const render = sn => {
    const e = sn.experiment;
    patch(sec.head, [sn.status, sn.simulated, sn.finding], () => [
      h('h1', {}, 'Series ', h('code', {}, sn.series_id)),
      h('p', { class: 'sub' }, e ? ['experiment ', link('#/experiments/' + encodeURIComponent(e.id), e.id), ' · '] : 'a look · ',
        fmt.side(sn.on), ' · ', badge(sn.status, sn.status), ' ', simBadge(sn.simulated), ' · started ', fmt.time(sn.created_at)),
      sn.simulated ? simNote('This series ran on the project\'s simulators, not on the models: its numbers test the flow\'s wiring and the statistics, not the models. Spend is what the real models would have charged.') : null,
      sn.finding ? h('div', { class: 'note ok' }, 'Finding written: ', link('#/findings?file=' + encodeURIComponent(sn.finding), sn.finding), ' — FINDINGS.md was regenerated.') : null,
      ['running', 'waiting_human'].includes(sn.status) ? h('p', {}, h('button', { type: 'button', class: 'danger', id: 'cancel', onclick: () => cancelSeries(sn.series_id) }, 'Cancel series')) : null,
    ]);
    patch(sec.pause, [sn.status, sn.pause, sn.spend.cap_usd], () => sn.status === 'awaiting_approval' ? pausePanel(sn) : []);
    patch(sec.approvals, [sn.approvals, sn.project_cap], () => approvalsSection(sn));
    patch(sec.progress, [sn.progress, sn.spend, sn.eta, sn.spend_curve.length, sn.status], () => progressSection(sn));
    patch(sec.verdict, [sn.verdict, sn.status, sn.error], () => verdictSection(sn));
    patch(sec.matrix, [sn.matrix, sn.verdict && sn.verdict.comparisons], () => matrixSection(sn));
    patch(sec.cases, [sn.cases, sn.hidden_cases], () => casesSection(sn));
    if (sn.status !== lastStatus) { announce(`series ${sn.status}` + (sn.verdict && sn.status === 'done' ? ': ' + sn.verdict.verdict : '')); lastStatus = sn.status; }
  };
  render(first);
  replace(sec.attempts, h('details', { id: 'attempts-all', ontoggle: ev => { if (ev.target.open && !ev.target.dataset.loaded) { ev.target.dataset.loaded = '1'; loadAttempts(id, 1, ev.target.querySelector('.body')); } } },
    h('summary', {}, `All ${first.progress.attempts} attempts, a page at a time`), h('div', { class: 'body' })));
  if (!['done', 'cancelled', 'failed'].includes(first.status)) {
    stream('/api/series/' + encodeURIComponent(id) + '/stream', { snapshot: sn => { if (ctx.alive()) render(sn); } });
  }
  return [sec.head, sec.pause, sec.approvals, sec.progress, sec.verdict, sec.matrix, sec.cases, sec.attempts];
}

async function cancelSeries(id) {
  if (!confirm('Cancel this series? Queued attempts never start; running ones finish and are paid; no finding is written.')) return;
  try { await api(`/api/series/${id}/cancel`, { method: 'POST', body: { reason: 'cancelled in Studio' } }); announce('series cancelled'); }
  catch (err) { alert(`${err.code}: ${err.message}`); }
}

function pausePanel(sn) {
  const p = sn.pause || {};
  const cap = Number(sn.spend.cap_usd);
  const twice = cap * 2;
  const suggested = p.reason === 'cap_above_project' ? sn.spend.cap_usd : (twice >= 1 ? twice.toFixed(2) : String(Number(twice.toPrecision(6))));
  const capIn = h('input', { id: 'approve-cap', type: 'text', inputmode: 'decimal', value: suggested, 'aria-describedby': 'approve-help' });
  const out = h('div');
  const act = async (what) => {
    replace(out, h('p', { class: 'muted' }, what === 'approve' ? 'Approving…' : 'Stopping…'));
    try {
      await api(`/api/series/${sn.series_id}/${what}`, { method: 'POST', body: what === 'approve' ? { cap_usd: capIn.value.trim() || null } : {} });
      announce(what === 'approve' ? 'approved: the series runs on' : 'series stopped');
      replace(out, h('div', { class: 'note ok' }, what === 'approve' ? 'Approved: the series runs on under the new cap.' : 'Stopped: its verdict is invalid (stopped by the spend cap).'));
    } catch (err) { replace(out, errorBox(err)); }
  };
  const reason = p.reason === 'spend_near_cap'
    ? `It paused near its cap: it spent ${fmt.money(p.spent_usd)} of its ${fmt.money(sn.spend.cap_usd)} cap, and with a reserve for each running attempt it would pass 90% of the cap. It starts no new attempt until you continue it.`
    : p.reason === 'cap_above_project'
      ? `Its cap ${fmt.money(sn.spend.cap_usd)} is above the project cap ${fmt.money(sn.spend.project_cap_usd)}: nothing runs until a person approves.`
      : `Paused: ${p.reason || 'waiting'}.`;
  return h('section', { class: 'card note warn', id: 'approval', 'aria-labelledby': 'approval-h' },
    h('h2', { id: 'approval-h', style: 'margin-top:0' }, 'Waiting for your approval'),
    h('p', {}, reason),
    kv([['reason', h('code', {}, p.reason || '')], ['spent', fmt.money(p.spent_usd || sn.spend.usd) + (sn.spend.lower_bound ? ' (a lower bound)' : '')], ['cap', fmt.money(sn.spend.cap_usd)],
      ['done', `${sn.progress.done} of ${sn.progress.attempts} attempts`]]),
    h('form', { onsubmit: ev => { ev.preventDefault(); act('approve'); } },
      h('div', { class: 'row' },
        h('div', { class: 'field' }, h('label', { for: 'approve-cap' }, 'New cap (USD)'), capIn,
          h('div', { id: 'approve-help', class: 'muted' }, p.reason === 'cap_above_project' ? 'the cap the series asked for' : 'double the old cap unless you type another')),
        h('div', { class: 'field', style: 'align-self:center' }, h('button', { type: 'submit', class: 'primary', id: 'approve' }, 'Approve'), ' ',
          h('button', { type: 'button', class: 'danger', id: 'stop', onclick: () => act('stop') }, 'Stop')))),
    out);
}

// Every approval and stop with the channel it came through: one that no person gave in Studio or at a
// terminal (REST with the server token, or `--yes` without a terminal) is marked.
function approvalsSection(sn) {
  const rows = sn.approvals || [];
  const pending = sn.project_cap && sn.project_cap.project_cap_pending ? capPendingNote(sn.project_cap, null) : null;
  if (!rows.length) return pending ? [pending] : [];
  const how = a => a.channel === 'terminal' ? `terminal (${a.confirmed === 'tty' ? 'asked at a TTY' : a.confirmed || 'unconfirmed'})` : a.channel;
  const unattended = rows.filter(a => a.channel === 'rest' || (a.channel === 'terminal' && a.confirmed !== 'tty'));
  return [pending, h('section', { class: 'card', id: 'approvals', 'aria-labelledby': 'approvals-h' },
    h('h2', { id: 'approvals-h', style: 'margin-top:0' }, 'Approvals'),
    h('table', {}, h('thead', {}, h('tr', {}, ['when', 'what', 'channel', 'old cap', 'new cap', 'spent'].map(c => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map(a => h('tr', { 'data-channel': a.channel }, h('td', {}, fmt.time(a.at)), h('td', {}, a.action), h('td', {}, how(a)),
        h('td', {}, fmt.money(a.old_cap_usd)), h('td', {}, a.new_cap_usd ? fmt.money(a.new_cap_usd) : '—'), h('td', {}, fmt.money(a.spent_usd)))))),
    unattended.length ? h('p', { class: 'note warn', id: 'approvals-unattended' }, `${unattended.length} of these came without a person asked in Studio or at a terminal (REST with the server token, or --yes).`) : null)];
}

function progressSection(sn) {
  const pr = sn.progress, sp = sn.spend;
  const eta = sn.eta;
  const etaText = !eta ? (sn.ended_at ? `ended ${fmt.time(sn.ended_at)}` : '') : eta.state === 'running'
    ? `about ${fmt.secs(eta.remaining_seconds)} left (${eta.attempts_per_minute} attempts/min, done near ${fmt.time(eta.finish_at)})`
    : eta.state === 'estimating' ? 'estimating the time left…' : 'paused: no time estimate while it waits';
  const cap = Number(sp.cap_usd) || 0, spent = Number(sp.usd) || 0;
  return h('div', { class: 'row' },
    h('section', { class: 'card grow', 'aria-label': 'progress' },
      h('h2', { style: 'margin-top:0' }, 'Progress'),
      bar(pr.attempts ? pr.done / pr.attempts : 0, '', null, 'attempts done'),
      h('p', {}, h('b', { id: 'progress-text' }, `${pr.done} of ${pr.attempts} attempts`), ` · ${pr.running} running · ${pr.queued} queued · ${pr.model_failures} model failures · ${pr.infra_errors} infrastructure errors` + (pr.reruns ? ` · ${pr.reruns} re-runs` : '')),
      h('p', { class: 'muted', id: 'eta' }, etaText)),
    h('section', { class: 'card grow', 'aria-label': 'spend' },
      h('h2', { style: 'margin-top:0' }, 'Spend'),
      bar(cap ? spent / cap : 0, 'spend' + (cap && spent / cap >= 0.75 ? ' near' : ''), 0.9, 'spend against the cap'),
      h('p', {}, h('b', { id: 'spend-text' }, `${sp.lower_bound ? 'at least ' : ''}${fmt.money(sp.usd)} of ${fmt.money(sp.cap_usd)}`), ` cap · project cap ${fmt.money(sp.project_cap_usd)}`),
      sp.lower_bound ? h('p', { class: 'note warn' }, `${sp.unpriced_attempts} attempt(s) ran on a model without a known price: the spend is a lower bound.`) : null,
      spendPlot(sn.spend_curve, sp.cap_usd)));
}

function verdictSection(sn) {
  const v = sn.verdict;
  const out = [];
  if (sn.error) out.push(h('div', { class: 'note bad', role: 'alert' }, h('b', {}, 'Failed: '), `${sn.error.code}: ${sn.error.message}`, sn.error.run_id ? [' — ', link('#/runs/' + sn.error.run_id, 'open its run')] : ''));
  if (!v) { if (sn.kind === 'look') out.push(h('p', { class: 'muted' }, 'A look has no verdict: every case is listed with its checks, cost and trace.')); return out; }
  const provisional = v.provisional || !['done', 'cancelled', 'failed'].includes(sn.status);
  out.push(h('div', { class: 'card verdict ' + (provisional ? '' : 'final'), id: 'verdict', 'data-provisional': provisional ? 'true' : 'false' },
    h('span', { class: 'label' }, provisional ? 'Provisional verdict (still running):' : 'Verdict:'), badge(v.verdict), ' ',
    h('q', { id: 'verdict-text' }, v.text),
    v.verdict === 'signal' ? h('p', { class: 'muted' }, 'A signal is worth acting on while exploring, but it is not evidence: confirm it once on held-out cases.') : null));
  return out;
}

function matrixSection(sn) {
  const e = sn.experiment, q = (sn.plan && sn.plan.question) || (e && e.question);
  if (!q || q.kind === 'look') return [];
  const values = {};
  ((e && e.variants) || []).forEach(v => { values[v.id] = v.value; });
  const decided = {};
  ((sn.verdict && sn.verdict.decided) || []).forEach(d => { decided[d.variant] = d.decision; });
  const rows = sn.matrix.map(m => ({ label: m.variant, est: m.estimate, low: m.low, high: m.high, level: 0.95, cls: q.kind === 'threshold' ? clsOf(decided[m.variant]) : '' }));
  const comps = (sn.verdict && sn.verdict.comparisons) || [];
  return [
    h('h2', {}, 'Per variant'),
    e ? h('p', { class: 'muted' }, e.caption) : null,
    h('table', { id: 'matrix' },
      h('thead', {}, h('tr', {}, ['variant', 'value', 'attempts', 'done', 'counted', 'passes', 'rate', '95% interval', 'model failures', 'infra errors', 'spend'].map(t => h('th', { class: ['attempts', 'done', 'counted', 'passes', 'rate', 'model failures', 'infra errors', 'spend'].includes(t) ? 'num' : null }, t)))),
      h('tbody', {}, sn.matrix.map(m => h('tr', {},
        h('th', { scope: 'row' }, m.variant),
        h('td', { class: 'mono' }, values[m.variant] || '—'),
        h('td', { class: 'num' }, m.attempts), h('td', { class: 'num' }, m.done), h('td', { class: 'num' }, m.counted),
        h('td', { class: 'num' }, m.passes), h('td', { class: 'num' }, fmt.rate(m.estimate)),
        h('td', {}, m.low === undefined || m.low === null ? '—' : `${fmt.rate(m.low)} to ${fmt.rate(m.high)}`),
        h('td', { class: 'num' }, m.model_failures), h('td', { class: 'num' }, m.infra_errors), h('td', { class: 'num' }, fmt.money(m.spend_usd)))))),
    h('h3', {}, `${q.metric || 'rate'} of each variant, 95% interval` + (q.kind === 'threshold' ? ' against the bound' : '')),
    intervalPlot(rows, q.kind === 'threshold' ? refsFor(q, false) : [], { clamp: [0, 1], min: q.kind === 'threshold' ? undefined : 0, max: 1, label: `${q.metric} per variant with 95% intervals` }),
    comps.length ? [h('h3', {}, `difference from ${comps[0].baseline}, against the margin`),
      intervalPlot(comps.map(c => ({ label: `${c.variant} − ${c.baseline}`, est: c.estimate, low: c.low, high: c.high, level: c.level, cls: clsOf(c.decision) })), refsFor(q, true), { clamp: [-1, 1], label: 'differences with intervals against the margin' }),
      h('p', { class: 'muted' }, comps.map(c => `${c.variant}: ${Math.round(c.level * 1000) / 10}% interval ${fmt.signed(c.low)} to ${fmt.signed(c.high)} (${c.decision})`).join(' · '))] : null,
  ];
}

function casesSection(sn) {
  const out = [h('h2', {}, 'Cases')];
  const rows = sn.cases || [];
  if (sn.on === 'holdout' && sn.kind !== 'look') {
    out.push(h('p', { class: 'muted' }, `Held-out cases are never shown one by one, so a change cannot be tuned to them (${sn.plan.cases} cases ran).`));
    return out;
  }
  if (!rows.length) { out.push(h('p', { class: 'muted' }, 'No working case to show yet.')); return out; }
  const variants = sn.plan.variants;
  out.push(h('p', { class: 'muted' }, 'Working cases, failing ones first (at most 50). Open an attempt for its trace.'));
  out.push(h('table', { id: 'cases' },
    h('thead', {}, h('tr', {}, h('th', {}, 'case'), variants.map(v => h('th', {}, v)))),
    h('tbody', {}, rows.map(r => h('tr', { class: r.failing ? 'failing' : null },
      h('td', {}, r.failing ? badge('failing', 'fail') : null, ' ', h('span', { class: 'mono' }, r.case)),
      variants.map(v => {
        const c = r.variants[v] || { attempts: [] };
        return h('td', {}, `${c.passes}/${c.counted} pass`, c.failed_checks && c.failed_checks.length ? h('div', { class: 'err' }, 'failed: ' + c.failed_checks.join(', ')) : null,
          attemptLinks(c.attempts));
      }))))));
  if (sn.hidden_cases) out.push(h('p', { class: 'muted' }, `${sn.hidden_cases} more case(s) not listed (held-out cases, or beyond the first 50).`));
  return out;
}

/** Links to the traces of a case's failing attempts (at most 6), else to its first one; the rest are counted. */
function attemptLinks(attempts) {
  const bad = attempts.filter(a => a.outcome && a.outcome !== 'pass');
  const shown = (bad.length ? bad : attempts.filter(a => a.run_id).slice(0, 1)).slice(0, 6);
  const waiting = attempts.filter(a => a.status !== 'done').length;
  return h('div', {},
    shown.map(a => a.run_id ? [link('#/runs/' + a.run_id, `#${a.repeat + 1}${a.outcome && a.outcome !== 'pass' ? ' ' + (a.error || a.outcome) : ''}`,
      { class: 'attempt-link', title: `${a.outcome || a.status}${a.message ? ': ' + a.message : ''}`, 'data-outcome': a.outcome || a.status }), ' '] : null),
    bad.length > shown.length ? h('span', { class: 'muted' }, `+${bad.length - shown.length} more failing `) : null,
    waiting ? h('span', { class: 'muted' }, `${waiting} not finished`) : null);
}

async function loadAttempts(id, page, box) {
  try {
    const d = await api(`/api/studio/series/${encodeURIComponent(id)}/attempts?page=${page}&per_page=50`);
    replace(box,
      h('table', {}, h('thead', {}, h('tr', {}, ['#', 'case', 'variant', 'repeat', 'status', 'outcome', 'error', 'cost', 'run'].map(t => h('th', {}, t)))),
        h('tbody', {}, d.items.map(a => h('tr', {},
          h('td', {}, a.idx), h('td', { class: 'mono' }, a.case_name || h('span', { class: 'muted' }, 'held-out')), h('td', {}, a.variant_id), h('td', {}, a.rep + 1),
          h('td', {}, badge(a.status)), h('td', {}, a.outcome ? badge(a.outcome) : ''), h('td', { class: 'mono' }, a.error_code || ''),
          h('td', {}, fmt.money(a.cost_usd)), h('td', {}, a.run_id ? link('#/runs/' + a.run_id, 'trace') : ''))))),
      pager(d.page, d.pages, d.total, 'attempts', p => loadAttempts(id, p, box)),
      d.held_out ? h('p', { class: 'muted', id: 'held-out-attempts' }, `${d.held_out} held-out attempt${d.held_out === 1 ? '' : 's'}: counted in the table above, never listed one by one`) : null);
  } catch (err) { replace(box, errorBox(err)); }
}

// ---------- Findings ----------

async function pageFindings(query) {
  const d = await api('/api/studio/findings');
  const want = query.get('file');
  const cards = d.findings.map(f => findingCard(f, want));
  setTimeout(() => { const el = want && document.querySelector(`[data-file="${CSS.escape(want)}"]`); if (el) { el.scrollIntoView(); el.focus(); } }, 0);
  return [
    h('h1', {}, 'Findings'),
    h('p', { class: 'sub' }, 'What the project knows, from held-out series. FINDINGS.md is generated from the finding files; neither is edited by hand.'),
    d.findings.some(f => f.scope && f.scope.simulated) ? simNote('Findings marked simulated came from series on the project\'s simulators, not on the models.') : null,
    h('section', { class: 'card', id: 'findings-md', 'aria-label': 'FINDINGS.md' }, h('div', { class: 'muted mono' }, 'FINDINGS.md'), d.findings_md ? markdown(d.findings_md) : h('p', { class: 'muted' }, 'No FINDINGS.md yet: a series on held-out cases writes the first finding.')),
    h('h2', {}, `Finding files (${d.findings.length})`),
    cards.length ? cards : h('p', { class: 'muted' }, 'None yet.'),
  ];
}

function findingCard(f, want) {
  if (!f.readable) return h('div', { class: 'card note bad', 'data-file': f.file, tabindex: -1 }, h('code', {}, f.file), ': not readable YAML');
  const v = f.verdict || {}, sc = f.scope || {}, fr = f.freshness || {};
  const q = f.question || {};
  const cells = (f.cells || []).map(c => ({ label: c.variant, est: c.estimate, low: c.low, high: c.high, level: c.level }));
  const comps = (f.comparisons || []).map(c => ({ label: `${c.variant} − ${c.baseline}`, est: c.estimate, low: c.low, high: c.high, level: c.level, cls: clsOf(c.decision) }));
  return h('section', { class: 'card finding', 'data-file': f.file, tabindex: -1, style: want === f.file ? 'border-color:#2357c6' : null },
    h('h3', { style: 'margin-top:0' }, link('#/experiments/' + encodeURIComponent(f.experiment_id), f.experiment_id), ' ', badge(v.verdict), ' ', simBadge(sc.simulated),
      ' ', f.intact && f.verifies !== false ? null : badge('does not verify: E_FINDING_TAMPERED', 'bad')),
    h('p', {}, h('q', {}, v.text)),
    kv([['failure mode', f.failure_mode], ['series', link('#/series/' + f.series_id, f.series_id)],
      ['scope', `${sc.cases} ${sc.on === 'holdout' ? 'held-out' : ''} cases × ${sc.repeats} repeats of ${sc.dataset}, ${sc.attempts} attempts, ${String(sc.started_at || '').slice(0, 10)}`],
      ['models', (f.variants || []).map(x => `${x.id}: ${(x.models || []).join(', ') || '—'}`).join(' · ')],
      ['spend', (f.spend && f.spend.lower_bound ? 'at least ' : '') + fmt.money(f.spend && f.spend.usd)],
      f.judge ? ['judge', `${f.judge.agent} (${f.judge.model || 'model unknown'}) decides ${f.judge.check}; validated by ${f.judge.validated_by_finding || (f.judge.validated_by ? f.judge.validated_by + ' (no confirmed finding yet)' : 'nothing: no validated_by')}`] : null,
      f.reads && f.reads.length > 1 ? ['held-out reads', `${f.reads.length} series of this experiment read held-out cases: ` + f.reads.map(r => `${r.series_id} ${r.status} on ${r.cases}`).join('; ')] : null,
      ['file', h('code', {}, f.file)]].filter(Boolean)),
    fr.matches ? h('div', { class: 'note ok fresh' }, `Its inputs still match: the ${fr.files} files it ran on have the same hashes now.`)
      : h('div', { class: 'note warn stale' }, h('b', {}, 'Inputs changed since this series: '), 'the finding does not speak for the project as it is now. ',
        [['changed', fr.changed], ['added', fr.added], ['removed', fr.removed]].filter(([, l]) => l && l.length).map(([k, l]) => h('div', { class: 'mono' }, `${k}: ${l.slice(0, 8).join(', ')}${l.length > 8 ? ` … +${l.length - 8}` : ''}`)), fr.error ? h('div', {}, fr.error) : null),
    cells.length ? intervalPlot(cells, q.kind === 'threshold' ? refsFor(q, false) : [], { clamp: [0, 1], max: 1, label: `cells of finding ${f.series_id}` }) : null,
    comps.length ? intervalPlot(comps, refsFor(q, true), { clamp: [-1, 1], label: `comparisons of finding ${f.series_id}` }) : null);
}

// ---------- Chat ----------

const chatLog = JSON.parse(sessionStorage.getItem('aqven-chat') || '[]');
function saveChat() { sessionStorage.setItem('aqven-chat', JSON.stringify(chatLog.slice(-60))); }

async function pageChat() {
  const info = await api('/api/chat');
  const r = info.responder;
  const log = h('div', { class: 'chat-log', id: 'chat-log', role: 'log', 'aria-live': 'polite' });
  const ta = h('textarea', { id: 'chat-input', rows: 3, placeholder: 'Ask about findings, experiments, series, runs…', 'aria-label': 'your message' });
  const send = h('button', { type: 'submit', class: 'primary', id: 'chat-send' }, 'Send');
  const drawLog = () => {
    replace(log, chatLog.length ? chatLog.map(m => h('div', { class: 'msg ' + m.role },
      m.role === 'assistant' ? markdown(m.content) : m.content, m.tools && m.tools.length ? h('div', { class: 'tools' }, 'tools used: ' + m.tools.map(t => `${t.name}(${Object.entries(t.args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ')})`).join(' · ')) : null,
      m.responder ? h('div', { class: 'tools' }, m.responder) : null)) : h('p', { class: 'muted' }, 'No messages yet.'));
    log.scrollTop = log.scrollHeight;
  };
  const submit = async ev => {
    ev.preventDefault();
    const text = ta.value.trim();
    if (!text) return;
    chatLog.push({ role: 'user', content: text });
    ta.value = ''; send.disabled = true; drawLog();
    log.appendChild(h('div', { class: 'msg assistant muted', id: 'chat-thinking' }, 'thinking…'));
    try {
      const res = await api('/api/chat', { method: 'POST', body: { messages: chatLog.filter(m => m.role === 'user' || m.role === 'assistant').map(m => ({ role: m.role, content: m.content })) } });
      chatLog.push({ role: 'assistant', content: res.reply, tools: res.tool_calls, responder: res.responder.kind === 'offline' ? 'answered by the offline responder (simulated, no model)' : `answered by ${res.responder.model}` });
      announce('the chat answered');
    } catch (err) {
      chatLog.push({ role: 'assistant', content: `${err.code}: ${err.message}` + (err.hint ? `\nhint: ${err.hint}` : '') });
    }
    saveChat(); send.disabled = false; drawLog(); ta.focus();
  };
  ta.addEventListener('keydown', ev => { if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); submit(ev); } });
  drawLog();
  return [
    h('h1', {}, 'Chat'),
    h('p', { class: 'sub' }, 'An agent that read FINDINGS.md, AGENTS.md and CLAUDE.md before your first message, and can use the project\'s tools (the MCP server\'s, minus approval).'),
    r.kind === 'offline' ? simNote(r.text + '.') : h('div', { class: 'note warn' }, r.text + '.'),
    kv([['read first', info.context_files.map((f, i) => [i ? ' · ' : '', h('code', {}, f.name), f.present ? ` (${f.chars} chars)` : ' (absent)'])],
      ['tools', info.tools.join(', ')], ['never', 'approves or continues a series: that is yours to do on the series page']]),
    log,
    h('form', { class: 'chat-form', onsubmit: submit }, ta, h('div', {}, send, h('p', {}, h('button', { type: 'button', onclick: () => { chatLog.length = 0; saveChat(); drawLog(); } }, 'Clear')))),
    h('p', { class: 'muted' }, 'Enter sends; Shift+Enter starts a new line.'),
  ];
}

// ---------- start ----------

document.getElementById('skip').addEventListener('click', () => main.focus());
document.addEventListener('keydown', ev => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const t = ev.target;
  if (t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName))) return;
  const pages = ['/', '/flows', '/runs', '/research', '/findings', '/chat'];
  const n = Number(ev.key);
  if (n >= 1 && n <= pages.length) { ev.preventDefault(); go(pages[n - 1]); }
});
window.addEventListener('hashchange', route);

(async function boot() {
  try {
    const o = await api('/api/studio/status');
    state.project = o; state.simulate = o.simulate;
    document.getElementById('project-name').textContent = `${o.name || o.package} · ${o.package}`;
    const banner = document.getElementById('sim-banner');
    if (o.simulate) { banner.hidden = false; banner.textContent = 'Simulated mode: simulators answer, no model is called'; }
  } catch (err) { /* the page itself shows the error */ }
  route();
})();
