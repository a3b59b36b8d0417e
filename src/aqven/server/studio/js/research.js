/* Pages: Research, one experiment and its Launch panel. */
import { announce, badge, errorBox, fmt, h, kv, link, replace } from './dom.js';
import { api } from './api.js';
import { go, state } from './nav.js';
import { statusOf } from './decision.js';
import { capPendingNote, questionText, seriesTable } from './widgets.js';
import { standingByExperiment, standingCard, standingCell } from './standing.js';

export async function pageResearch() {
  const [exps, series, stand] = await Promise.all([api('/api/experiments'), api('/api/series?limit=50'), standingByExperiment()]);
  const last = {};
  series.forEach(sr => { if (sr.experiment_id && !last[sr.experiment_id]) last[sr.experiment_id] = sr; });
  const paused = series.filter(sr => sr.status === 'awaiting_approval');
  return [
    h('h1', {}, 'Research'),
    h('p', { class: 'sub' }, 'Each experiment asks one question about one factor. Explore on working cases as often as you like; confirm once on held-out cases.'),
    paused.length ? h('div', { class: 'note warn' }, h('b', {}, `${paused.length} series ${paused.length === 1 ? 'waits' : 'wait'} for your approval: `), paused.map((sr, i) => [i ? ', ' : '', link('#/series/' + sr.series_id, `${sr.experiment_id} (${sr.series_id})`)])) : null,
    h('h2', {}, 'Experiments'),
    h('table', { id: 'experiments' },
      h('thead', {}, h('tr', {}, ['experiment', 'standing finding', 'failure mode', 'question', 'factor', 'latest exploration'].map(t => h('th', {}, t)))),
      h('tbody', {}, exps.map(e => h('tr', { 'data-experiment': e.id },
        h('td', {}, link('#/experiments/' + encodeURIComponent(e.id), e.id)),
        h('td', { class: 'standing-cell' }, standingCell(stand[e.id])),
        h('td', {}, e.failure_mode),
        h('td', {}, e.question.kind, ': ', questionText(e.question)),
        h('td', {}, e.caption, h('div', { class: 'muted' }, `${e.variants.length} variant${e.variants.length > 1 ? 's' : ''}`)),
        h('td', {}, last[e.id] ? [link('#/series/' + last[e.id].series_id, last[e.id].on === 'holdout' ? 'Confirm' : 'Explore'), ' ', badge(statusOf(last[e.id])), ' ', last[e.id].verdict ? badge(last[e.id].verdict) : null] : h('span', { class: 'muted' }, 'none')))))),
    h('h2', {}, 'Series'),
    series.length ? seriesTable(series) : h('p', { class: 'muted' }, 'No series yet.'),
  ];
}

export function variantsTable(e) {
  return h('table', { id: 'variants', class: 'variants' },
    h('caption', {}, e.caption),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'variant'), h('th', { scope: 'col' }, 'value'), h('th', { scope: 'col' }, 'description'))),
    h('tbody', {}, e.variants.map(v => h('tr', {}, h('th', { scope: 'row' }, v.id), h('td', { class: v.value === 'as written' ? 'muted' : 'mono' }, v.value),
      h('td', {}, v.description || h('span', { class: 'muted' }, '—'))))));
}

export async function pageExperiment(id) {
  const [e, project, stand] = await Promise.all([api('/api/experiments/' + encodeURIComponent(id)), api('/api/project'), standingByExperiment()]);
  const subj = e.subject;
  return [
    h('h1', {}, 'Experiment ', h('code', {}, e.id)),
    h('p', { class: 'sub' }, 'failure mode ', badge(e.failure_mode, 'warn'), ' · ', h('span', { class: 'mono' }, e.file)),
    standingCard(stand[id]),
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

export function launchPanel(e, project) {
  const sideDev = h('input', { type: 'radio', name: 'on', value: 'dev', id: 'on-dev', checked: true });
  const sideHold = h('input', { type: 'radio', name: 'on', value: 'holdout', id: 'on-holdout' });
  const cases = h('input', { id: 'lp-cases', type: 'number', min: 1, step: 1, placeholder: 'all' });
  const repeats = h('input', { id: 'lp-repeats', type: 'number', min: 1, max: 20, step: 1, placeholder: String(e.repeats) });
  const cap = h('input', { id: 'lp-cap', type: 'text', inputmode: 'decimal', placeholder: project.spend_cap_usd });
  const planBox = h('div', { id: 'launch-plan', 'aria-live': 'polite' });
  const out = h('div'), ackSlot = h('div', { id: 'ack-slot' });
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
      const b = body(), qs = new URLSearchParams({ on: b.on, ...(b.cases ? { cases: b.cases } : {}), ...(b.repeats ? { repeats: b.repeats } : {}), simulate: state.simulate ? 'true' : 'false' });
      const price = await api(`/api/studio/experiments/${encodeURIComponent(e.id)}/price?${qs}`).catch(() => null);
      if (my !== seq) return;
      replace(planBox, drawPlan(p, refresh, price));
      // Confirm reads held-out cases: the person names the read before Start is enabled.
      const ack = p.on === 'holdout' ? ackBox(p, () => { start.disabled = !ack.querySelector('input').checked; }) : null;
      replace(ackSlot, ack);
      start.disabled = !!ack;
      start.textContent = p.on === 'holdout' ? 'Start the held-out read' : 'Start series';
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
      ackSlot,
      h('p', {}, start, ' ', h('span', { class: 'muted' }, state.simulate ? 'Simulated mode: the project\'s simulators answer.' : 'Every attempt calls the models and costs money.')),
      out));
}

/** Whether the plan can decide: an expected half-width wider than the margin makes the read inconclusive. */
export function cannotDecide(p) {
  return p.half_width !== null && p.half_width !== undefined && p.margin !== undefined && Number(p.half_width) > Number(p.margin);
}

/** The acknowledgement a held-out read asks for, naming the read (first, or again on cases read before). */
function ackBox(p, onchange) {
  const r = p.earlier_reads || {};
  const what = r.earlier_series
    ? `read ${r.read_cases} of these ${p.cases} held-out cases again (${r.earlier_series} earlier held-out series of this experiment read them)`
    : `make the first read of ${p.cases} held-out cases of this experiment`;
  const box = h('input', { type: 'checkbox', id: 'ack', onchange });
  return h('div', { class: 'card note ' + (cannotDecide(p) || r.earlier_series ? 'bad' : 'warn'), id: 'confirm-ack' },
    cannotDecide(p) ? h('p', { id: 'cannot-decide' }, h('b', {}, 'This read cannot decide: '),
      `its expected half-width ±${Number(p.half_width).toFixed(3)} is wider than the ${p.margin} margin, so the verdict will be inconclusive` + (p.recommended && p.recommended.cases ? ` (about ${p.recommended.cases} cases would decide it; ${p.available} are held out).` : '.')) : null,
    h('label', { for: 'ack', class: 'ack' }, box, h('span', {}, `I want to ${what}. Held-out cases are read once per question: a second read is listed in FINDINGS.md.`)));
}

export function drawPlan(p, refresh, price) {
  const rec = p.recommended || {};
  const level = p.level ? ` at ${(p.level * 100).toFixed(1).replace(/\.0$/, '')}%` : '';
  const ps = p.planning_series;
  // Where the planning rate comes from, in numbers a person can check: a dev series' passes, shrunk toward 0.5.
  const seen = ps ? Math.round(Number(p.planning_rate) * (ps.attempts + 1) - 0.5) : null;
  const planning = p.planning === undefined ? null
    : p.planning === 'defaults' ? `defaults: rate ${p.planning_rate}, intra-case correlation ${p.planning_rho}`
    : `${p.planning}: rate ${Number(p.planning_rate).toFixed(3)} = (${seen} passes + 0.5) / (${ps.attempts} attempts + 1), its ${seen}/${ps.attempts} pulled a little toward 0.5 so that a series that never failed does not plan as if it never can; intra-case correlation ${Number(p.planning_rho).toFixed(2)}`;
  const power = p.power ? p.power.text : null;
  const floor = p.zero_failure_floor ? p.zero_failure_floor.text : null;
  const why = p.why_so_many ? p.why_so_many.text : null;
  return [
    kv([
      ['attempts', [h('b', {}, `${p.attempts}`), ` = ${p.cases} cases × ${p.repeats} repeats × ${p.variants} variant${p.variants > 1 ? 's' : ''}`]],
      ['cases available', `${p.available} on the ${p.on === 'holdout' ? 'held-out' : 'working'} side`],
      ['expected half-width', p.half_width === null || p.half_width === undefined ? '—' : `±${Number(p.half_width).toFixed(3)}${level} (margin ${p.margin})`],
      // One number of cases, with where it comes from (the power simulation of the interval the series reports).
      ['recommended', h('span', { id: 'recommended' }, rec.cases ? `${rec.cases} cases × ${rec.repeats} repeats` : '—', power ? h('div', { class: 'muted' }, power) : null)],
      ...(planning ? [['planned with', planning]] : []),
      // Why more cases than a normal interval that knew the spread would need (one line), else the floor when it binds.
      ...(why ? [['why so many', h('span', { id: 'why-so-many' }, why)]]
        : floor && p.zero_failure_floor.cases && p.cases < p.zero_failure_floor.cases ? [['why so many', floor]] : []),
      ['cap', `${fmt.money(p.cap_usd)} for this series (project cap ${fmt.money(p.project_cap_usd)}, ${p.project_cap_source === 'override' ? 'from .aqven/local.yaml' : p.project_cap_source === 'project' ? 'from aqven.yaml' : 'the default'})`],
      ['price', h('span', { id: 'price-estimate' }, price ? price.text : 'none before it runs: the spend is counted as attempts finish; near 90% of the cap the series pauses for you')],
    ]),
    p.below_recommended && rec.text ? h('div', { class: 'note warn', role: 'status' }, h('b', {}, 'Fewer cases than recommended: '), rec.text) : null,
    capPendingNote(p, refresh),
    p.needs_approval ? h('div', { class: 'note warn' }, 'This cap is above the project cap: the series will wait for approval before anything runs.') : null,
    p.earlier_reads && p.earlier_reads.text ? h('div', { class: 'note warn', role: 'status', id: 'earlier-reads' }, h('b', {}, 'Read before: '), p.earlier_reads.text) : null,
    p.on === 'holdout' ? h('div', { class: 'note' }, 'Confirm reads the held-out cases once per question: start it when the change is done and the question is fixed. A verdict other than invalid writes a finding and regenerates FINDINGS.md.') : null,
  ];
}
