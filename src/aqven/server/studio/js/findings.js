/* Page: Findings. */
import { badge, fmt, h, kv, link, simBadge, simNote } from './dom.js';
import { api } from './api.js';
import { markdown } from './markdown.js';
import { clsOf, diffLabel, intervalPlot, refsFor } from './plots.js';

export async function pageFindings(query) {
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

export function findingCard(f, want) {
  if (!f.readable) return h('div', { class: 'card note bad', 'data-file': f.file, tabindex: -1 }, h('code', {}, f.file), ': not readable YAML');
  const v = f.verdict || {}, sc = f.scope || {}, fr = f.freshness || {};
  const q = f.question || {};
  const cells = (f.cells || []).map(c => ({ label: c.variant, est: c.estimate, low: c.low, high: c.high, level: c.level }));
  const comps = (f.comparisons || []).map(c => ({ label: diffLabel(c.variant, c.baseline), est: c.estimate, low: c.low, high: c.high, level: c.level, cls: clsOf(c.decision) }));
  return h('section', { class: 'card finding', 'data-file': f.file, tabindex: -1, style: want === f.file ? 'border-color:#2357c6' : null },
    h('h3', { style: 'margin-top:0' }, link('#/experiments/' + encodeURIComponent(f.experiment_id), f.experiment_id), ' ', badge(v.verdict), ' ', simBadge(sc.simulated),
      ' ', f.verifies ? null : f.intact && !f.code ? badge('could not be verified here', 'warn') : badge('does not verify: ' + (f.code || 'E_FINDING_TAMPERED'), 'bad')),
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
    cells.length ? intervalPlot(cells, q.kind === 'threshold' ? refsFor(q, false) : [], { clamp: [0, 1], label: `cells of finding ${f.series_id}` }) : null,
    comps.length ? intervalPlot(comps, refsFor(q, true), { clamp: [-1, 1], label: `comparisons of finding ${f.series_id}` }) : null);
}
