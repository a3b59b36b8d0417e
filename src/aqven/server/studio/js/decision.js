/* The decision header of a series: the verdict badge and its one-line claim, the full sentence, a table per
 * comparison. A series that has not ended is "not decided yet"; a held-out one shows no provisional verdict. */
import { badge, fmt, h, link } from './dom.js';

export const ENDED = ['done', 'cancelled', 'failed'];

/** The status a person reads: a series stopped at its cap ends "done" in the store, but it did not finish. */
export function statusOf(sn) {
  return sn.status === 'done' && sn.stop_reason === 'stopped_at_cap' ? 'stopped' : sn.status;
}

function pct(level) { return `${Math.round((level || 0.95) * 1000) / 10}%`; }

/** One comparison or cell in a line: estimate, interval, and the line it is read against. */
export function claimOf(d, q) {
  const m = Number(q.margin || 0);
  if (q.kind === 'threshold') {
    const b = Number(q.bound), up = q.direction !== 'at_most';
    const line = Math.round((up ? b + m : b - m) * 1e6) / 1e6;
    return `${q.metric} of ${d.variant} ${fmt.rate(d.estimate)} (${pct(d.level)} CI ${fmt.rate(d.low)} to ${fmt.rate(d.high)}) against bound ${b} ${up ? '+' : '−'} margin ${m} = ${line}`;
  }
  const sign = q.kind === 'noninferior' ? `margin −${m}` : `margin +${m}`;
  return `${d.variant} − ${d.baseline} ${fmt.signed(d.estimate)} (${pct(d.level)} CI ${fmt.signed(d.low)} to ${fmt.signed(d.high)}) against ${sign}`;
}

function comparisonTable(v, q) {
  const rows = v.decided || [];
  if (!rows.length) return null;
  const diff = q.kind !== 'threshold';
  const num = x => diff ? fmt.signed(x) : fmt.rate(x);
  return h('table', { id: 'decision-table', class: 'decision-table' },
    h('thead', {}, h('tr', {}, [diff ? 'comparison' : 'variant', 'estimate', 'interval', 'half-width', diff ? 'margin' : 'line', 'cases', 'decision'].map(t => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map(d => h('tr', {},
      h('th', { scope: 'row' }, diff ? `${d.variant} − ${d.baseline}` : d.variant),
      h('td', { class: 'num' }, num(d.estimate)),
      h('td', { class: 'nowrap' }, `${pct(d.level)}: ${num(d.low)} to ${num(d.high)}`),
      h('td', { class: 'num' }, `±${Number(d.half_width).toFixed(3)}`),
      h('td', {}, diff ? (q.kind === 'noninferior' ? `−${q.margin}` : `+${q.margin}`) : `${q.bound} ${q.direction === 'at_most' ? '−' : '+'} ${q.margin}`),
      h('td', { class: 'num' }, d.cases),
      h('td', {}, badge(d.decision))))));
}

/** From the decision to the cases: a button that brings the diff with an earlier series into view (dev only). */
function toCompare(sn) {
  if (sn.kind === 'look' || sn.on === 'holdout' || !sn.experiment_id) return null;
  const jump = () => {
    const target = document.getElementById('compare');
    if (!target) return;
    target.scrollIntoView({ block: 'start' });
    (document.getElementById('diff-with') || target).focus({ preventScroll: true });
  };
  return h('p', { class: 'to-compare' }, h('button', { type: 'button', id: 'to-compare', onclick: jump }, 'Compare with an earlier series, case by case ↓'));
}

export function decisionHeader(sn) {
  const v = sn.verdict, q = (sn.plan && sn.plan.question) || {};
  const out = [];
  if (sn.error) out.push(h('div', { class: 'note bad', role: 'alert' }, h('b', {}, 'Failed: '), `${sn.error.code}: ${sn.error.message}`, sn.error.run_id ? [' — ', link('#/runs/' + sn.error.run_id, 'open its run')] : ''));
  if (sn.kind === 'look') return [...out, h('p', { class: 'muted' }, 'A look has no verdict: every case is listed with its checks, cost and trace.')];
  const status = statusOf(sn);
  if (!ENDED.includes(sn.status)) {
    const held = sn.on === 'holdout';
    const coarse = sn.coarse;
    const so_far = !held && v && v.decided && v.decided.length && sn.progress.counted ? v.text.replace(/^Provisional \(still running\): /, '') : null;
    out.push(h('section', { class: 'card verdict decision', id: 'verdict', 'data-provisional': 'true', 'aria-label': 'decision' },
      h('div', { class: 'claim' }, badge('not decided yet', 'open'), ' ',
        h('span', { id: 'verdict-claim' }, held
          ? `The verdict comes when the series ends. Held-out numbers move only every ${coarse ? coarse.step : 'few'} attempts${coarse && coarse.as_of_done ? ` (shown as of ${coarse.as_of_done} done)` : ''}, so no attempt's result shows while it runs.`
          : sn.progress.done ? `${sn.progress.done} of ${sn.progress.attempts} attempts done: the interval can still move.` : 'No attempt has finished yet.')),
      so_far ? h('p', { class: 'muted', id: 'verdict-so-far' }, h('b', {}, 'So far: '), so_far) : null,
      toCompare(sn)));
    return out;
  }
  if (!v) return out;
  const stopped = status === 'stopped';
  const first = (v.decided || [])[0];
  const claim = stopped ? `Stopped at the cap with ${sn.progress.queued} attempts never run: a stopped series decides nothing.`
    : sn.status === 'cancelled' ? 'Cancelled: a cancelled series decides nothing and writes no finding.'
    : first ? (v.decided.length > 1 ? `${v.decided.length} comparisons; ` : '') + claimOf(first, q) + (v.decided.length > 1 ? ' …' : '')
    : v.text;
  out.push(h('section', { class: 'card verdict decision final', id: 'verdict', 'data-provisional': 'false', 'aria-label': 'decision' },
    h('div', { class: 'claim' }, badge(stopped ? 'stopped' : v.verdict, stopped ? 'stopped' : v.verdict), ' ', h('span', { id: 'verdict-claim' }, claim)),
    h('p', { id: 'verdict-text' }, v.text),
    comparisonTable(v, q),
    v.verdict === 'signal' ? h('p', { class: 'muted' }, 'A signal is worth acting on while exploring, but it is not evidence: confirm it once on held-out cases.') : null,
    toCompare(sn)));
  return out;
}
