/* Compare case by case (working cases only): the grid of cases × variants with a failures-only toggle and each
 * cell's output, the diff of two series of one experiment with both outputs and what is within chance, and
 * latency and cost per attempt (p50/p95) per variant. */
import { badge, errorBox, fmt, h, link, pager, replace } from './dom.js';
import { api } from './api.js';
import { ENDED } from './decision.js';
import { highlight } from './attempt.js';

/** A short window of one attempt's output, the passages its failed checks quote highlighted (as the attempt view
 * highlights them), and a link to its run. */
function sampleView(s, whose) {
  if (!s) return h('span', { class: 'muted' }, '—');
  const text = s.text
    ? highlight(h('span', { class: 'snippet-text' }, (s.cut_before ? '…' : '') + s.text + (s.cut_after ? '…' : '')), s.quotes)
    : h('span', { class: 'muted' }, `no output (${s.error_code || s.outcome || 'not finished'})`);
  return h('div', { class: 'snippet', 'data-outcome': s.outcome || '' },
    s.field ? h('span', { class: 'field' }, s.field + ': ') : null, text, ' ',
    link('#/runs/' + s.run_id, `attempt ${s.repeat + 1}`, { class: 'sample-link', 'aria-label': `${whose}: the run of attempt ${s.repeat + 1}` }));
}

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
    box);
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
            c.sample ? sampleView(c.sample, `${r.case}, ${v}`) : null,
            h('div', {}, c.run_ids.map((id, i) => [link('#/runs/' + id, `#${i + 1}`, { class: 'attempt-link', 'aria-label': `${r.case}, ${v}: attempt ${i + 1}` }), ' '])));
        })))))),
    g.pages > 1 ? pager(g.page, g.pages, g.total, 'cases', load) : null,
  ];
}

/** The diff with another dev series of the experiment, right under the per-variant table (the decision header
 * links here): the newest earlier one is compared once the series ended. */
export function compareSection(sn) {
  if (sn.kind === 'look' || sn.on === 'holdout' || !sn.experiment_id) return [];
  const sel = h('select', { id: 'diff-with', 'aria-label': 'series to compare with' }, h('option', { value: '' }, 'choose a series…'));
  const out = h('div', { id: 'diff-body' });
  const load = async page => {
    if (!sel.value) { replace(out); return; }
    try { replace(out, drawDiff(await api(`/api/studio/series/${encodeURIComponent(sel.value)}/diff/${encodeURIComponent(sn.series_id)}?page=${page}&per_page=50`), load)); }
    catch (err) { replace(out, errorBox(err)); }
  };
  api('/api/experiments/' + encodeURIComponent(sn.experiment_id)).then(e => {
    const others = (e.series || []).filter(o => o.series_id !== sn.series_id && o.on === 'dev');
    others.forEach(o => sel.appendChild(h('option', { value: o.series_id }, `${o.series_id} · ${o.status} · ${fmt.time(o.created_at)}`)));
    const earlier = others.filter(o => o.created_at < sn.created_at).sort((x, y) => (x.created_at < y.created_at ? 1 : -1))[0];
    if (earlier && ENDED.includes(sn.status) && !sel.value) { sel.value = earlier.series_id; load(1); }
    else if (!others.length) replace(out, h('p', { class: 'muted' }, 'No other working-case series of this experiment to compare with yet.'));
  }).catch(err => replace(out, errorBox(err)));
  sel.addEventListener('change', () => load(1));
  return [h('section', { class: 'diff', id: 'compare', tabindex: '-1', 'aria-labelledby': 'compare-h' },
    h('h2', { id: 'compare-h' }, 'Compare with an earlier series, case by case'),
    h('p', { class: 'muted' }, 'Working cases only: each case and variant\'s pass rate there (before) and here (after), with one output of each, a failing one first.'),
    h('label', { for: 'diff-with' }, 'Before'), sel, out)];
}

const CHANGE = { better: ['better', 'ok'], worse: ['worse', 'bad'], within_chance: ['within chance', 'open'], same: ['same', ''], only_in_a: ['only before', 'open'], only_in_b: ['only here', 'open'] };

function filesLine(f) {
  if (f.same) return h('p', { id: 'diff-files', class: 'same' }, h('b', {}, 'Same files: '), 'both series ran on the same project files and cases, so every difference below is chance or the models\' randomness.');
  const parts = [];
  if (f.changed.length) parts.push(['changed: ', f.changed.map((x, i) => [i ? ', ' : '', h('code', {}, x)])]);
  if (f.added.length) parts.push(['added: ', f.added.map((x, i) => [i ? ', ' : '', h('code', {}, x)])]);
  if (f.removed.length) parts.push(['removed: ', f.removed.map((x, i) => [i ? ', ' : '', h('code', {}, x)])]);
  if (f.cases_differ) parts.push('the cases differ');
  if (f.changed_during.length) parts.push(`files changed while ${f.changed_during.join(' and ')} ran`);
  return h('p', { id: 'diff-files', class: 'changed' }, h('b', {}, 'The files changed between the two series: '), parts.map((p, i) => [i ? '; ' : '', p]), '.');
}

function chanceLine(d) {
  const pct = `${Math.round(d.level * 100)}%`;
  const rule = `A change counts as worse or better only when Fisher's exact test of the two cells' counts puts it below ${pct} (two-sided); a smaller one is within chance.`;
  if (d.least_p === null) return h('p', { class: 'muted', id: 'diff-chance' }, rule);
  const reps = d.repeats[0] === d.repeats[1] ? `${d.repeats[0]} repeat${d.repeats[0] === 1 ? '' : 's'} a cell` : `${d.repeats[0]} and ${d.repeats[1]} repeats a cell`;
  return h('p', { class: 'muted', id: 'diff-chance' }, rule, ' ', d.least_p >= d.level
    ? `At ${reps} even the largest change (all pass against all fail) has p = ${d.least_p.toFixed(2)}: no one case can move beyond chance; read the per-variant intervals above, or run more repeats.`
    : `Each cell is tested alone: of many unchanged cells, up to ${pct} may still cross it by chance.`);
}

function drawDiff(d, load) {
  const c = d.counts, other = c.only_in_a + c.only_in_b;
  const rate = (r, passes, n) => r === null ? '—' : `${fmt.rate(r)} (${Math.round(passes * 1000) / 1000}/${n})`;
  return [
    filesLine(d.inputs),
    h('p', { id: 'diff-counts' }, h('b', {}, `${c.worse} worse · ${c.better} better`), ' beyond chance · ' +
      `${c.within_chance} within chance · ${c.same} same` + (other ? ` · ${other} in one series only` : '')),
    chanceLine(d),
    h('div', { class: 'scroll' }, h('table', { id: 'diff-table' },
      h('thead', {}, h('tr', {}, ['case', 'variant', 'before', 'after', 'change', 'output before', 'output after'].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, d.rows.map(r => h('tr', { 'data-change': r.change, 'data-case': r.case, 'data-variant': r.variant },
        h('td', { class: 'mono' }, r.case), h('td', {}, r.variant),
        h('td', { class: 'num' }, rate(r.a_rate, r.a_passes, r.a_counted)),
        h('td', { class: 'num' }, rate(r.b_rate, r.b_passes, r.b_counted)),
        h('td', { title: r.p_value === null ? '' : `Fisher's exact test: p = ${r.p_value.toFixed(3)}` }, badge(...CHANGE[r.change]),
          r.p_value !== null && r.change !== 'same' ? h('div', { class: 'muted' }, `p = ${r.p_value.toFixed(2)}`) : null),
        h('td', { class: 'snippet-cell before' }, sampleView(r.a_sample, `${r.case}, ${r.variant}, before`)),
        h('td', { class: 'snippet-cell after' }, sampleView(r.b_sample, `${r.case}, ${r.variant}, after`))))))),
    d.pages > 1 ? pager(d.page, d.pages, d.total, 'cases × variants', load) : null,
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
