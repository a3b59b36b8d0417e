/* DOM helpers: every text reaches the page as a text node (never as HTML), so nothing the project holds can
 * inject markup. Formatting of money, rates and times, and the small shared widgets. */

export const main = document.getElementById('main');
export const live = document.getElementById('live');

export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
export function s(tag, attrs, ...kids) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
export function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}
export function append(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
}
export function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
export function replace(el, ...kids) { clear(el); append(el, kids); return el; }
/** Rebuild a section only when its data changed, so focus and typing survive live updates. */
export function patch(el, key, build) {
  const k = JSON.stringify(key);
  if (el.dataset.key === k) return;
  el.dataset.key = k;
  replace(el, build());
}
export function announce(text) { live.textContent = text; }

export function errorBox(err) {
  const problems = (err.details && err.details.problems) || [];
  return h('div', { class: 'note bad', role: 'alert' },
    h('b', { text: err.code || 'Error' }), ': ', err.message,
    err.file ? h('div', { class: 'mono', text: err.file + (err.line ? ':' + err.line : '') }) : null,
    err.hint ? h('div', { class: 'muted', text: 'hint: ' + err.hint }) : null,
    problems.length ? h('ul', {}, problems.slice(0, 20).map(p => h('li', {},
      (p.file ? `${p.file}${p.line ? ':' + p.line : ''}: ` : '') + (p.case ? `case ${p.case} × variant ${p.variant}: ` : '') +
      `${p.code || ''}: ${p.message || ''}`))) : null);
}

export const fmt = {
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
  perMinute(n) { n = Number(n); return n >= 10 ? String(Math.round(n)) : n >= 1 ? n.toFixed(1) : n.toPrecision(2); },
  side(on) { return on === 'holdout' ? 'Confirm (held-out cases)' : on === 'dev' ? 'Explore (working cases)' : on; },
};
// Status and reason codes as a person reads them; the code stays on the badge (data-code) and gives its colour.
const WORDS = {
  awaiting_approval: 'awaiting approval', waiting_human: 'waiting for a person', spend_near_cap: 'near its cap',
  cap_above_project: "cap above the project's", tokens_near_cap: 'near its token cap', model_failure: 'model failure',
  stopped_at_cap: 'stopped at the cap', infra: 'infrastructure error', holdout: 'held out',
};
export function words(code) { return WORDS[code] || code; }
export function badge(text, cls) { return h('span', { class: 'badge ' + (cls || text || ''), 'data-code': text }, words(text)); }
export function simBadge(sim) { return sim ? badge('simulated', 'sim') : null; }
export function link(href, text, attrs) { return h('a', { href, ...(attrs || {}) }, text); }
export function short(id) { return id ? String(id) : '—'; }
export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}
export function pre(value) { return h('pre', {}, typeof value === 'string' ? value : fmt.json(value)); }
export function pager(page, pages, total, noun, go) {
  return h('div', { class: 'pager' },
    h('button', { type: 'button', disabled: page <= 1, onclick: () => go(page - 1), 'aria-label': 'previous page' }, '← Previous'),
    h('span', {}, `page ${page} of ${pages} · ${total} ${noun}`),
    h('button', { type: 'button', disabled: page >= pages, onclick: () => go(page + 1), 'aria-label': 'next page' }, 'Next →'));
}
/** Give every cell of the tables under `root` its column's heading (`data-label`): below 600 px wide a table is
 * drawn as cards, one a row, each value with its heading beside it (app.css). */
export function labelTables(root) {
  (root.querySelectorAll ? root.querySelectorAll('table') : []).forEach(t => {
    const heads = [...t.querySelectorAll('thead th')].map(th => th.textContent.trim());
    if (!heads.length) return;
    t.querySelectorAll('tbody tr').forEach(tr => [...tr.children].forEach((cell, i) => {
      if (!cell.hasAttribute('data-label')) cell.setAttribute('data-label', heads[i] || '');
    }));
  });
}

export function simNote(text) {
  return h('div', { class: 'note sim', role: 'note' }, h('b', {}, 'Simulated. '), text);
}
