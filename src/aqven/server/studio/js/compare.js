/* Compare case by case (working cases only): the grid of cases × variants with a failures-only toggle, the
 * diff of two series of one experiment, and latency and cost per attempt (p50/p95) per variant. */
import { badge, errorBox, fmt, h, link, pager, replace } from './dom.js';
import { api } from './api.js';
import { ENDED } from './decision.js';

function rate(passes, counted) { return counted ? passes / counted : null; }

export function caseGridSection(sn) {
  if (sn.kind === 'look' || sn.on === 'holdout') return [];
  const box = h('div', { id: 'grid-body' });
  const only = h('input', { type: 'checkbox', id: 'grid-failures', onchange: () => load(1) });
  const load = async page => {
    try {
      const g = await api(`/api/studio/series/${encodeURIComponent(sn.series_id)}/grid?page=${page}&per_page=100` + (only.checked ? '&failures_only=true' : ''));
      replace(box, drawGrid(g, load));
    } catch (err) { replace(box, errorBox(err)); }
  };
  const det = h('details', { id: 'grid', ontoggle: ev => { if (ev.target.open && !box.dataset.loaded) { box.dataset.loaded = '1'; load(1); } } },
    h('summary', {}, 'Compare case by case: every working case × variant'),
    h('p', {}, h('label', { for: 'grid-failures', class: 'inline' }, only, ' failures only')),
    box,
    diffPicker(sn));
  return [det];
}

function drawGrid(g, load) {
  if (!g.rows.length) return h('p', { class: 'muted' }, g.total ? 'None on this page.' : 'No working case failed.');
  return [
    h('p', { class: 'muted' }, `${g.failing} of the working cases have a failure` + (g.held_out_cases ? ` · ${g.held_out_cases} held-out cases only counted` : '')),
    h('div', { class: 'scroll' }, h('table', { id: 'grid-table', class: 'grid' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'case'), g.variants.map(v => h('th', { scope: 'col' }, v)))),
      h('tbody', {}, g.rows.map(r => h('tr', { class: r.failing ? 'failing' : null, 'data-case': r.case },
        h('th', { scope: 'row', class: 'mono' }, r.case),
        g.variants.map(v => {
          const c = r.cells[v];
          if (!c) return h('td', { class: 'muted' }, '—');
          return h('td', { 'data-variant': v, class: c.fails ? 'cell-bad' : c.counted ? 'cell-ok' : null },
            h('b', {}, `${c.passes}/${c.counted}`), c.done < c.attempts ? h('span', { class: 'muted' }, ` (${c.attempts - c.done} to run)`) : null,
            c.failed_checks.length ? h('div', { class: 'err' }, c.failed_checks.join(', ')) : null,
            h('div', {}, c.run_ids.map((id, i) => [link('#/runs/' + id, `#${i + 1}`, { class: 'attempt-link', 'aria-label': `${r.case}, ${v}: attempt ${i + 1}` }), ' '])));
        })))))),
    g.pages > 1 ? pager(g.page, g.pages, g.total, 'cases', load) : null,
  ];
}

function diffPicker(sn) {
  if (!sn.experiment_id) return null;
  const sel = h('select', { id: 'diff-with', 'aria-label': 'series to compare with' }, h('option', { value: '' }, 'choose a series…'));
  const out = h('div', { id: 'diff-body' });
  api('/api/experiments/' + encodeURIComponent(sn.experiment_id)).then(e => {
    (e.series || []).filter(o => o.series_id !== sn.series_id && o.on === 'dev').forEach(o =>
      sel.appendChild(h('option', { value: o.series_id }, `${o.series_id} · ${o.status} · ${fmt.time(o.created_at)}`)));
  }).catch(err => replace(out, errorBox(err)));
  sel.addEventListener('change', async () => {
    if (!sel.value) { replace(out); return; }
    try { replace(out, drawDiff(await api(`/api/studio/series/${encodeURIComponent(sel.value)}/diff/${encodeURIComponent(sn.series_id)}`))); }
    catch (err) { replace(out, errorBox(err)); }
  });
  return h('section', { class: 'diff' }, h('h3', {}, 'Diff with another series of this experiment'),
    h('p', { class: 'muted' }, 'Working cases only: each case\'s pass rate there (before) and here (after).'),
    h('label', { for: 'diff-with' }, 'Before'), sel, out);
}

const CHANGE = { better: ['better', 'ok'], worse: ['worse', 'bad'], same: ['same', ''], only_in_a: ['only before', 'open'], only_in_b: ['only here', 'open'] };

function drawDiff(d) {
  const c = d.counts;
  return [
    h('p', { id: 'diff-counts' }, `${c.worse} worse · ${c.better} better · ${c.same} same` + (c.only_in_a + c.only_in_b ? ` · ${c.only_in_a + c.only_in_b} in one series only` : '')),
    h('div', { class: 'scroll' }, h('table', { id: 'diff-table' },
      h('thead', {}, h('tr', {}, ['case', 'variant', 'before', 'after', 'change'].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, d.rows.filter(r => r.change !== 'same').slice(0, 200).map(r => h('tr', { 'data-change': r.change },
        h('td', { class: 'mono' }, r.case), h('td', {}, r.variant),
        h('td', { class: 'num' }, r.a_rate === null ? '—' : `${fmt.rate(r.a_rate)} (${r.a_counted})`),
        h('td', { class: 'num' }, r.b_rate === null ? '—' : `${fmt.rate(r.b_rate)} (${r.b_counted})`),
        h('td', {}, badge(...CHANGE[r.change]))))))),
  ];
}

function ms(v) { return v === null || v === undefined ? '—' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`; }

export function distributionsSection(sn) {
  if (sn.kind === 'look' && !sn.progress.done) return [];
  if (sn.on === 'holdout' && !ENDED.includes(sn.status)) return [];
  const box = h('div', { id: 'dist' });
  api(`/api/studio/series/${encodeURIComponent(sn.series_id)}/distributions`).then(d => {
    if (!d.variants.some(v => v.latency_ms.n || v.cost_usd.n)) { replace(box); return; }
    replace(box, h('h3', {}, 'Latency and cost per attempt'),
      h('div', { class: 'scroll' }, h('table', { id: 'dist-table' },
        h('thead', {}, h('tr', {}, ['variant', 'attempts', 'latency p50', 'latency p95', 'cost p50', 'cost p95'].map(t => h('th', { scope: 'col', class: t === 'variant' ? null : 'num' }, t)))),
        h('tbody', {}, d.variants.map(v => h('tr', {}, h('th', { scope: 'row' }, v.variant), h('td', { class: 'num' }, Math.max(v.latency_ms.n, v.cost_usd.n)),
          h('td', { class: 'num' }, ms(v.latency_ms.p50)), h('td', { class: 'num' }, ms(v.latency_ms.p95)),
          h('td', { class: 'num' }, fmt.money(v.cost_usd.p50)), h('td', { class: 'num' }, fmt.money(v.cost_usd.p95))))))));
  }).catch(err => replace(box, errorBox(err)));
  return [box];
}
