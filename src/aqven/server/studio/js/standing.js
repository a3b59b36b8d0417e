/* What an experiment stands on, shown first: its newest held-out finding that verifies, with its interval, cases,
 * date, whether its files changed since, and a line of cost per variant (GET /api/studio/standing). */
import { badge, fmt, h, link, simBadge } from './dom.js';
import { api } from './api.js';

export async function standingByExperiment() {
  const list = await api('/api/studio/standing');
  return Object.fromEntries(list.map(st => [st.experiment_id, st]));
}

const interval = st => st.low === null || st.low === undefined ? '' : `${fmt.rate(st.estimate)} [${fmt.rate(st.low)}, ${fmt.rate(st.high)}]`;
const freshBadge = st => st.fresh ? badge('fresh', 'ok') : badge('stale', 'warn');

/** A Research row's first cell: the verdict, its interval, the held-out cases, the date, fresh or stale, costs. */
export function standingCell(st) {
  if (!st) return h('span', { class: 'muted' }, 'no finding yet');
  return h('div', { class: 'standing' },
    h('div', {}, link('#/series/' + st.series_id, badge(st.verdict), { 'aria-label': `${st.verdict}: the series behind the finding` }), ' ',
      h('span', { class: 'mono' }, interval(st)), ' ', freshBadge(st), ' ', simBadge(st.simulated)),
    h('div', { class: 'muted' }, `${st.cases} held-out cases · ${fmt.time(st.ended_at)}`),
    st.costs.length ? h('div', { class: 'costs' }, st.costs.map(c => h('div', {}, c.line))) : null);
}

/** The Experiment page's first card. */
export function standingCard(st) {
  if (!st) {
    return h('section', { class: 'card', id: 'standing', 'aria-labelledby': 'standing-h' },
      h('h2', { id: 'standing-h', style: 'margin-top:0' }, 'Standing finding'),
      h('p', { class: 'muted' }, 'None yet: explore on working cases below, then confirm once on held-out cases.'));
  }
  return h('section', { class: 'card', id: 'standing', 'aria-labelledby': 'standing-h' },
    h('h2', { id: 'standing-h', style: 'margin-top:0' }, 'Standing finding ', badge(st.verdict), ' ', freshBadge(st), ' ', simBadge(st.simulated)),
    h('p', { class: 'claim' }, st.text),
    h('dl', { class: 'kv' },
      h('dt', {}, 'interval'), h('dd', { class: 'mono' }, `${interval(st)} (${Math.round((st.level || 0.95) * 100)}%)`),
      h('dt', {}, 'held-out cases'), h('dd', {}, String(st.cases)),
      h('dt', {}, 'decided'), h('dd', {}, fmt.time(st.ended_at), ' · ', link('#/series/' + st.series_id, st.series_id)),
      h('dt', {}, 'files since'), h('dd', {}, st.fresh ? 'unchanged: it still speaks for these files' : `changed: ${st.changed.join(', ')} — it speaks for the files as they were`),
      st.costs.length ? [h('dt', {}, 'cost'), h('dd', { id: 'standing-costs' }, st.costs.map(c => h('div', {}, c.line)))] : null));
}
