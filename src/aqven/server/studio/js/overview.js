/* Page: Overview. */
import { badge, errorBox, fmt, h, kv, link, replace, simNote } from './dom.js';
import { api } from './api.js';
import { approvalHow, approvalWhat, approvalWho, capPendingNote, seriesTable } from './widgets.js';
import { passkeySection } from './passkey.js';

export async function pageOverview() {
  const o = await api('/api/studio/overview');
  const p = o.project;
  const checkBox = h('div', { id: 'check' }, h('p', { class: 'muted' }, 'Running aqven check…'));
  api('/api/check').then(c => replace(checkBox, checkTable(c))).catch(err => replace(checkBox, errorBox(err)));
  const workersBox = h('div', { id: 'workers' });
  api('/api/workers?ended=true').then(w => replace(workersBox, workersSection(w))).catch(() => {});
  const errored = o.runs.by_status.failed || 0, waiting = o.runs.by_status.waiting_human || 0;
  const byOutcome = o.attempts_by_outcome || {};
  const failedChecks = byOutcome.fail || 0, modelFailures = byOutcome.model_failure || 0;
  const paused = o.awaiting_approval.length;
  return [
    h('h1', {}, p.name || p.package),
    h('p', { class: 'sub' }, p.description || '', ' ', h('span', { class: 'mono' }, p.root)),
    // What waits for the person first: on a phone it is on the first screen.
    paused ? h('div', { class: 'note warn', id: 'waiting' }, h('b', {}, 'Waiting for you: '),
      o.awaiting_approval.map((sr, i) => [i ? ', ' : '', link('#/series/' + sr.series_id, `${sr.experiment_id || 'look'} (${sr.series_id})`)])) : null,
    o.simulate ? simNote('Simulated mode is on for this server: every run and series answers with the project\'s simulators instead of the models. Costs are what the real models would have charged for the same tokens; nothing was billed.') : null,
    h('div', { class: 'cards' },
      h('a', { class: 'stat', href: '#/flows' }, h('b', {}, p.flows.length), h('span', {}, `flows · ${p.agents.length} agents`)),
      h('a', { class: 'stat', href: '#/runs?outcome=fail', id: 'runs-stat' }, h('b', {}, o.runs.total), h('span', {}, `runs · ${failedChecks} failed their checks · ${modelFailures} model failures · ${errored} ended in an error` + (o.runs.simulated ? ` · ${o.runs.simulated} simulated` : ''))),
      h('a', { class: 'stat', href: '#/runs?status=waiting_human' }, h('b', {}, waiting), h('span', {}, 'runs wait for a person')),
      h('a', { class: 'stat', href: '#/research' }, h('b', {}, o.experiments), h('span', {}, `experiments · ${o.series.total} series`)),
      h('a', { class: 'stat', href: '#/research' }, h('b', {}, paused), h('span', {}, 'series await approval')),
      h('a', { class: 'stat', href: '#/findings' }, h('b', {}, o.findings), h('span', {}, 'findings'))),
    capPendingNote(p, () => location.reload()),
    h('h2', {}, h('code', {}, 'aqven check')),
    checkBox,
    h('h2', {}, 'Latest series'),
    o.recent_series.length ? seriesTable(o.recent_series) : h('p', { class: 'muted' }, 'No series yet. Start one from an experiment in ', link('#/research', 'Research'), '.'),
    recentApprovals(o.recent_approvals || []),
    workersBox,
    passkeySection(),
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

// Who approved or stopped what lately, across series (each series page lists all of its own, with the proofs).
function recentApprovals(rows) {
  if (!rows.length) return null;
  return h('section', { id: 'recent-approvals', 'aria-labelledby': 'recent-approvals-h' },
    h('h2', { id: 'recent-approvals-h' }, 'Approvals'),
    h('table', {}, h('thead', {}, h('tr', {}, ['when', 'series', 'what', 'who', 'how'].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.map(a => h('tr', { 'data-series': a.series_id, 'data-person': a.person || '' },
        h('td', {}, fmt.time(a.at)),
        h('td', {}, link('#/series/' + encodeURIComponent(a.series_id), `${a.experiment_id || 'look'} (${a.series_id})`)),
        h('td', {}, approvalWhat(a)), h('td', { class: 'who' }, approvalWho(a)), h('td', {}, approvalHow(a)))))));
}

export function checkTable(c) {
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

// The `aqven worker`s of a shared store (issue 31): shown when the server hands attempts to them, or some ran.
function workersSection(w) {
  const rows = w.workers || [];
  if (!w.cluster && !rows.length) return [];
  return [
    h('h2', {}, 'Workers'),
    rows.length ? h('table', { class: 'data' },
      h('thead', {}, h('tr', {}, ['name', 'host', 'state', 'slots', 'running', 'ran', 'last heartbeat'].map(c => h('th', {}, c)))),
      h('tbody', {}, rows.map(r => h('tr', { 'data-worker': r.id },
        h('td', {}, h('code', {}, r.name)), h('td', {}, r.host),
        h('td', {}, badge(r.state), r.error_code ? h('div', { class: 'note warn' }, h('b', {}, r.error_code + ': '), r.error_message || '') : null),
        h('td', {}, String(r.slots)), h('td', {}, String(r.running)), h('td', {}, String(r.ran)), h('td', {}, fmt.time(r.beat_at))))))
      : h('p', { class: 'muted' }, 'No worker has registered yet: start one with ', h('code', {}, 'aqven worker --store …'), ' (docs/how-to/run-on-several-machines.md).'),
  ];
}
