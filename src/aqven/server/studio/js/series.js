/* Page: a series, live. */
import { announce, badge, errorBox, fmt, h, kv, link, pager, patch, replace, simBadge, simNote, words } from './dom.js';
import { api } from './api.js';
import { proveAct } from './passkey.js';
import { bar, clsOf, diffLabel, intervalPlot, refsFor, spendPlot } from './plots.js';
import { decisionHeader, ENDED, statusOf } from './decision.js';
import { caseGridSection, compareSection, distributionsSection } from './compare.js';
import { stream } from './nav.js';
import { approvalHow, approvalWho, capPendingNote } from './widgets.js';

export async function pageSeries(id, _query, ctx) {
  const first = await api('/api/studio/series/' + encodeURIComponent(id));
  const sec = { head: h('div'), notice: h('div', { id: 'notice', role: 'status' }), pause: h('div'), verdict: h('div'), approvals: h('div'), progress: h('div'), ranOn: h('div'), matrix: h('div'), compare: h('div'), dist: h('div'), cases: h('div'), grid: h('div'), attempts: h('div') };
  let lastStatus = first.status;
  const stack = h('div', { class: 'stack' }, sec.verdict, sec.progress);
  const render = sn => {
    const e = sn.experiment;
    patch(sec.head, [sn.status, sn.stop_reason, sn.simulated, sn.finding, sn.cancelled], () => [
      h('h1', {}, 'Series ', h('code', {}, sn.series_id)),
      h('p', { class: 'sub' }, e ? ['experiment ', link('#/experiments/' + encodeURIComponent(e.id), e.id), ' · '] : 'a look · ',
        fmt.side(sn.on), ' · ', badge(statusOf(sn)), ' ', simBadge(sn.simulated), ' · started ', fmt.time(sn.created_at)),
      sn.simulated ? simNote('This series ran on the project\'s simulators, not on the models: its numbers test the flow\'s wiring and the statistics, not the models. Spend is what the real models would have charged.') : null,
      sn.cancelled ? h('p', { class: 'note', id: 'cancelled-by' }, h('b', {}, 'Cancelled '), cancelledBy(sn.cancelled.by), sn.cancelled.note ? ` — “${sn.cancelled.note}”` : '') : null,
      sn.finding ? h('div', { class: 'note ok' }, 'Finding written: ', link('#/findings?file=' + encodeURIComponent(sn.finding), sn.finding), ' — FINDINGS.md was regenerated.') : null,
      ['running', 'waiting_human'].includes(sn.status) ? h('p', {}, h('button', { type: 'button', class: 'danger', id: 'cancel', onclick: () => cancelSeries(sn.series_id) }, 'Cancel series')) : null,
    ]);
    patch(sec.pause, [sn.status, sn.pause, sn.spend.cap_usd], () => sn.status === 'awaiting_approval' ? pausePanel(sn, sec.notice) : []);
    patch(sec.approvals, [sn.approvals, sn.project_cap], () => approvalsSection(sn));
    patch(sec.progress, [sn.progress, sn.spend, sn.eta, sn.spend_curve.length, sn.status], () => progressSection(sn));
    patch(sec.verdict, [sn.verdict, sn.status, sn.stop_reason, sn.error, sn.progress.done, sn.coarse], () => decisionHeader(sn));
    patch(sec.ranOn, [sn.ran_on], () => ranOnSection(sn.ran_on));
    patch(sec.matrix, [sn.matrix, sn.status, sn.verdict && sn.verdict.comparisons], () => matrixSection(sn));
    patch(sec.compare, [sn.on, sn.kind, ENDED.includes(sn.status)], () => compareSection(sn));
    patch(sec.dist, [sn.status, ENDED.includes(sn.status) ? 0 : Math.floor(sn.progress.done / 50)], () => distributionsSection(sn));
    patch(sec.grid, [sn.status, sn.on, ENDED.includes(sn.status) ? 0 : Math.floor(sn.progress.done / 50)], () => caseGridSection(sn));
    patch(sec.cases, [sn.cases, sn.hidden_cases], () => casesSection(sn));
    stack.dataset.active = String(!ENDED.includes(sn.status));
    if (sn.status !== lastStatus) { announce(`series ${sn.status}` + (sn.verdict && sn.status === 'done' ? ': ' + sn.verdict.verdict : '')); lastStatus = sn.status; }
  };
  render(first);
  replace(sec.attempts, h('details', { id: 'attempts-all', ontoggle: ev => { if (ev.target.open && !ev.target.dataset.loaded) { ev.target.dataset.loaded = '1'; loadAttempts(id, 1, ev.target.querySelector('.body')); } } },
    h('summary', {}, `All ${first.progress.attempts} attempts, a page at a time`), h('div', { class: 'body' })));
  if (!['done', 'cancelled', 'failed'].includes(first.status)) {
    stream('/api/series/' + encodeURIComponent(id) + '/stream', { snapshot: sn => { if (ctx.alive()) render(sn); } });
  }
  // While it runs or waits, its progress and spend come before the verdict (what a person acts on, first screen).
  return [sec.head, sec.notice, sec.pause, stack, sec.ranOn, sec.approvals, sec.matrix, sec.compare, sec.dist, sec.cases, sec.grid, sec.attempts];
}

// Where its attempts ran, when `aqven worker`s ran them (issue 31): per worker, the attempts it ran last.
function ranOnSection(ranOn) {
  if (!ranOn || !ranOn.length) return [];
  return h('p', { id: 'ran-on' }, h('b', {}, 'Ran on workers: '),
    ranOn.map((w, i) => [i ? ', ' : '', h('span', { class: 'mono', title: w.worker }, `${w.name || w.worker}`), w.host ? ` on ${w.host}` : '', ` (${w.attempts})`]));
}

// Who cancelled, as the server proved it: a person (in Studio, at a terminal) or an agent's credential.
function cancelledBy(by) {
  if (!by) return 'by someone (recorded before AQVEN named who)';
  if (by.kind === 'person') return `by ${by.person || 'a person'} ${by.channel === 'studio' ? 'in Studio' : 'at a terminal'}`;
  return by.channel === 'mcp' ? 'by an agent, with its MCP tool series_cancel' : 'with the server token (an agent, or the aqven command run by anyone)';
}

export async function cancelSeries(id) {
  if (!confirm('Cancel this series? Queued attempts never start; running ones finish and are paid; no finding is written.')) return;
  try { await api(`/api/series/${id}/cancel`, { method: 'POST', body: { reason: 'cancelled in Studio' } }); announce('series cancelled'); }
  catch (err) { alert(`${err.code}: ${err.message}`); }
}

/** What finishing would cost at the cost per attempt so far (the server adds it up, in Decimal). */
function loadFinish(sn, draw) {
  const box = h('span');
  api(`/api/studio/series/${encodeURIComponent(sn.series_id)}/finish`).then(est => {
    if (est.total_usd !== null && est.left) replace(box, draw(est));
  }).catch(err => replace(box, errorBox(err)));
  return box;
}

export function pausePanel(sn, notice) {
  const p = sn.pause || {};
  const cap = Number(sn.spend.cap_usd);
  const twice = cap * 2;
  const suggested = p.reason === 'cap_above_project' ? sn.spend.cap_usd : (twice >= 1 ? twice.toFixed(2) : String(Number(twice.toPrecision(6))));
  const capIn = h('input', { id: 'approve-cap', type: 'text', inputmode: 'decimal', value: suggested, 'aria-describedby': 'approve-help' });
  const out = h('div'), useBox = h('div'), choices = h('div', { class: 'row', id: 'approve-choices' });
  // No button approves an amount it does not name: the typed one says what it sets as it is typed.
  const typed = h('button', { type: 'submit', class: 'primary', id: 'approve' });
  const dflt = p.reason === 'cap_above_project' ? '(the cap it asked for)' : '(double)';
  const name = () => { const v = capIn.value.trim(); typed.textContent = `Approve ${fmt.money(v || suggested)}` + (!v || v === suggested ? ` ${dflt}` : ''); };
  capIn.addEventListener('input', name);
  name();
  const act = async (what, amount) => {
    if (what === 'stop' && !confirm(`Stop this series? Its ${sn.progress.attempts - sn.progress.done} queued attempts never run, its verdict is invalid (stopped at the cap) and no finding is written.`)) return;
    const old = fmt.money(sn.spend.cap_usd), asked = what === 'approve' ? (amount || capIn.value.trim()) : '';
    replace(out, h('p', { class: 'muted' }, what === 'approve' ? `Approving ${fmt.money(asked || suggested)}…` : 'Stopping…'));
    try {
      const body = what === 'approve' ? { cap_usd: asked || null } : {};
      const passkey = await proveAct(what, sn.series_id, what === 'approve' ? asked || 'default' : '');
      if (passkey) body.passkey = passkey;
      await api(`/api/series/${sn.series_id}/${what}`, { method: 'POST', body });
      announce(what === 'approve' ? 'approved: the series runs on' : 'series stopped');
      replace(out);
      // The note stays on the page (the panel goes when the series runs on, and comes back at the next pause).
      replace(notice, h('div', { class: 'note ok', id: 'approved-note' }, what === 'approve'
        ? `Approved at ${fmt.time(new Date().toISOString())}: the cap went from ${old} to ${fmt.money(asked || suggested)}; the series runs on. Every approval is listed under Approvals.`
        : `Stopped at ${fmt.time(new Date().toISOString())}: the queued attempts never run; its verdict is invalid (stopped at the cap).`));
    } catch (err) { replace(out, errorBox(err)); }
  };
  const reason = p.reason === 'spend_near_cap'
    ? `It paused near its cap: it spent ${fmt.money(p.spent_usd)} of its ${fmt.money(sn.spend.cap_usd)} cap, and with a reserve for each running attempt it would pass 90% of the cap. It starts no new attempt until you continue it.`
    : p.reason === 'cap_above_project'
      ? `Its cap ${fmt.money(sn.spend.cap_usd)} is above the project cap ${fmt.money(sn.spend.project_cap_usd)}: nothing runs until a person approves.`
      : `Paused: ${p.reason || 'waiting'}.`;
  // The two amounts a person weighs, side by side, each named, with what each buys.
  const offer = est => {
    const double = est.double_usd || suggested;
    const doubleSays = p.reason === 'cap_above_project' ? 'the cap the series asked for'
      : est.double_pauses_after === 0 ? 'double pauses again before another attempt can start'
      : est.double_pauses_after !== null && est.double_pauses_after !== undefined
        ? `double pauses again after about ${est.double_pauses_after} more attempt${est.double_pauses_after === 1 ? '' : 's'}`
        : est.cap_to_finish_usd ? 'double is enough to finish' : 'double the old cap';
    replace(choices,
      h('div', { class: 'field' }, h('button', { type: 'button', class: 'primary', id: 'approve-double', onclick: () => act('approve', double) }, `Approve ${fmt.money(double)}${p.reason === 'cap_above_project' ? '' : ' (double)'}`),
        h('div', { class: 'muted', id: 'double-note' }, doubleSays)),
      est.cap_to_finish_usd && p.reason !== 'cap_above_project' ? h('div', { class: 'field' },
        h('button', { type: 'button', class: 'primary', id: 'approve-finish', onclick: () => act('approve', est.cap_to_finish_usd) }, `Approve ${fmt.money(est.cap_to_finish_usd)} — enough to finish`),
        h('div', { class: 'muted' }, `about ${fmt.money(est.more_usd)} more for the ${est.left} attempts left`)) : null,
      est.decides ? h('p', { class: 'note warn', id: 'finish-decides' }, est.decides[0].toUpperCase() + est.decides.slice(1) + '.') : null);
  };
  const finishBox = loadFinish(sn, est => {
    offer(est);
    if (p.reason === 'cap_above_project') return h('span');
    useBox.appendChild(h('button', { type: 'button', id: 'use-finish-cap', onclick: () => { capIn.value = est.cap_to_finish_usd; name(); capIn.focus(); } }, `Use ${fmt.money(est.cap_to_finish_usd)} (enough to finish)`));
    return h('span', { id: 'finish-estimate' }, `about ${fmt.money(est.more_usd)} more for the ${est.left} attempts left (${fmt.money(est.total_usd)} in all, at ${fmt.money(est.per_attempt_usd)} an attempt so far): a cap of ${fmt.money(est.cap_to_finish_usd)} lets it finish`);
  });
  return h('section', { class: 'card note warn', id: 'approval', 'aria-labelledby': 'approval-h' },
    h('h2', { id: 'approval-h', style: 'margin-top:0' }, 'Waiting for your approval'),
    h('p', {}, reason),
    kv([['reason', h('span', { 'data-code': p.reason || '' }, words(p.reason || ''))], ['spent', fmt.money(p.spent_usd || sn.spend.usd) + (sn.spend.lower_bound ? ' (a lower bound)' : '')], ['cap', fmt.money(sn.spend.cap_usd)],
      ['done', `${sn.progress.done} of ${sn.progress.attempts} attempts`],
      p.reason === 'cap_above_project' ? null : ['to finish', finishBox]]),
    choices,
    h('form', { onsubmit: ev => { ev.preventDefault(); act('approve'); } },
      h('div', { class: 'row' },
        h('div', { class: 'field' }, h('label', { for: 'approve-cap' }, 'Or another cap (USD)'), capIn,
          h('div', { id: 'approve-help', class: 'muted' }, p.reason === 'cap_above_project' ? 'the cap the series asked for' : 'double the old cap unless you type another'),
          useBox),
        h('div', { class: 'field', style: 'align-self:center' }, typed, ' ',
          h('button', { type: 'button', class: 'danger', id: 'stop', onclick: () => act('stop') }, 'Stop…')))),
    out);
}

// Every approval and stop: who gave it (the passkey's name, or the person key's) and the channel it came through;
// one that no person was asked for in Studio or at a terminal (REST with the server token, or `--yes`) is marked.
export function approvalsSection(sn) {
  const rows = sn.approvals || [];
  const pending = sn.project_cap && sn.project_cap.project_cap_pending ? capPendingNote(sn.project_cap, null) : null;
  if (!rows.length) return pending ? [pending] : [];
  const unattended = rows.filter(a => a.channel === 'rest' || (a.channel === 'terminal' && a.confirmed !== 'tty'));
  return [pending, h('section', { class: 'card', id: 'approvals', 'aria-labelledby': 'approvals-h' },
    h('h2', { id: 'approvals-h', style: 'margin-top:0' }, 'Approvals'),
    h('table', {}, h('thead', {}, h('tr', {}, ['when', 'what', 'who', 'how', 'old cap', 'new cap', 'spent'].map(c => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map(a => h('tr', { 'data-channel': a.channel, 'data-person': a.person || '' }, h('td', {}, fmt.time(a.at)), h('td', {}, a.action),
        h('td', { class: 'who' }, approvalWho(a)), h('td', {}, approvalHow(a)),
        h('td', {}, fmt.money(a.old_cap_usd)), h('td', {}, a.new_cap_usd ? fmt.money(a.new_cap_usd) : '—'), h('td', {}, fmt.money(a.spent_usd)))))),
    unattended.length ? h('p', { class: 'note warn', id: 'approvals-unattended' }, `${unattended.length} of these came without a person asked in Studio or at a terminal (REST with the server token, or --yes).`) : null)];
}

// Where a person acted on the series, on the spend curve's clock (seconds after the series was created).
function spendMarks(sn) {
  const at = iso => (new Date(iso) - new Date(sn.created_at)) / 1000;
  const marks = (sn.approvals || []).map(a => ({ t: at(a.at), label: a.action === 'stop' ? 'stopped' : `approved ${fmt.money(a.new_cap_usd)}` }));
  if (sn.status === 'awaiting_approval' && sn.pause && sn.spend_curve && sn.spend_curve.length) {
    marks.push({ t: sn.spend_curve[sn.spend_curve.length - 1].t, label: 'paused' });
  }
  return marks;
}

export function progressSection(sn) {
  const pr = sn.progress, sp = sn.spend;
  const eta = sn.eta;
  const etaText = !eta ? (sn.ended_at ? `ended ${fmt.time(sn.ended_at)}` : '') : eta.state === 'running'
    ? `about ${fmt.secs(eta.remaining_seconds)} left (${fmt.perMinute(eta.attempts_per_minute)} attempts a minute, done near ${fmt.time(eta.finish_at)})`
    : eta.state === 'estimating' ? 'estimating the time left…' : 'paused: no time estimate while it waits';
  const cap = Number(sp.cap_usd) || 0, spent = Number(sp.usd) || 0;
  return h('div', { class: 'row' },
    h('section', { class: 'card grow', 'aria-label': 'progress' },
      h('h2', { style: 'margin-top:0' }, 'Progress'),
      bar(pr.attempts ? pr.done / pr.attempts : 0, '', null, 'attempts done'),
      h('p', {}, h('b', { id: 'progress-text' }, `${pr.done} of ${pr.attempts} attempts`), ` · ${pr.running} running · `,
        ENDED.includes(sn.status) && pr.queued ? h('b', { id: 'never-ran' }, `${pr.queued} never ran`) : `${pr.queued} queued`,
        ` · ${pr.model_failures} model failures · ${pr.infra_errors} infrastructure errors` + (pr.reruns ? ` · ${pr.reruns} re-runs` : '')),
      h('p', { class: 'muted', id: 'eta' }, etaText)),
    h('section', { class: 'card grow', 'aria-label': 'spend' },
      h('h2', { style: 'margin-top:0' }, 'Spend'),
      bar(cap ? spent / cap : 0, 'spend' + (cap && spent / cap >= 0.75 ? ' near' : ''), 0.9, 'spend against the cap'),
      h('p', {}, h('b', { id: 'spend-text' }, `${sp.lower_bound ? 'at least ' : ''}${fmt.money(sp.usd)} of ${fmt.money(sp.cap_usd)}`), ` cap · project cap ${fmt.money(sp.project_cap_usd)}`),
      sp.lower_bound ? h('p', { class: 'note warn' }, `${sp.unpriced_attempts} attempt(s) ran on a model without a known price: the spend is a lower bound.`) : null,
      ENDED.includes(sn.status) ? null : h('p', { class: 'muted', id: 'spend-finish' }, loadFinish(sn, est => `To finish: about ${fmt.money(est.total_usd)} in all (${fmt.money(est.more_usd)} more), at the cost per attempt so far` +
        (Number(est.cap_to_finish_usd) > cap ? ` — a cap of ${fmt.money(est.cap_to_finish_usd)} lets it finish without another pause.` : '.'))),
      spendPlot(sn.spend_curve, sp.cap_usd, spendMarks(sn))));
}

export function matrixSection(sn) {
  const e = sn.experiment, q = (sn.plan && sn.plan.question) || (e && e.question);
  if (!q || q.kind === 'look') return [];
  const values = {}, about = {};
  ((e && e.variants) || []).forEach(v => { values[v.id] = v.value; about[v.id] = v.description; });
  const decided = {};
  const ended = ENDED.includes(sn.status);  // colours say a decision: none before the series ended
  ((sn.verdict && sn.verdict.decided) || []).forEach(d => { decided[d.variant] = d.decision; });
  const rows = sn.matrix.map(m => ({ label: m.variant, est: m.estimate, low: m.low, high: m.high, level: m.level || 0.95, cls: q.kind === 'threshold' && ended ? clsOf(decided[m.variant]) : '' }));
  const comps = (sn.verdict && sn.verdict.comparisons) || [];
  return [
    h('h2', {}, 'Per variant'),
    e ? h('p', { class: 'muted' }, e.caption) : null,
    h('div', { class: 'scroll' }, h('table', { id: 'matrix' },
      h('thead', {}, h('tr', {}, ['variant', 'value', 'attempts', 'done', 'counted', 'passes', 'rate', '95% interval', 'model failures', 'infra errors', 'spend'].map(t => h('th', { class: ['attempts', 'done', 'counted', 'passes', 'rate', 'model failures', 'infra errors', 'spend'].includes(t) ? 'num' : null }, t)))),
      h('tbody', {}, sn.matrix.map(m => h('tr', {},
        h('th', { scope: 'row' }, m.variant, about[m.variant] ? h('div', { class: 'muted about' }, about[m.variant]) : null),
        h('td', { class: 'mono' }, values[m.variant] || '—'),
        h('td', { class: 'num' }, m.attempts), h('td', { class: 'num' }, m.done), h('td', { class: 'num' }, m.counted),
        h('td', { class: 'num' }, m.passes), h('td', { class: 'num' }, fmt.rate(m.estimate)),
        h('td', {}, m.low === undefined || m.low === null ? '—' : `${fmt.rate(m.low)} to ${fmt.rate(m.high)}`),
        h('td', { class: 'num' }, m.model_failures), h('td', { class: 'num' }, m.infra_errors), h('td', { class: 'num' }, fmt.money(m.spend_usd))))))),
    h('h3', {}, `${q.metric || 'rate'} of each variant, ${pct(rows)} interval` + (q.kind === 'threshold' ? ' against the bound' : '')),
    intervalPlot(rows, q.kind === 'threshold' ? refsFor(q, false) : [], { clamp: [0, 1], label: `${q.metric} per variant with ${pct(rows)} intervals`, axis: `${q.metric || 'rate'} (share of attempts that pass, per case averaged)` }),
    comps.length ? [h('h3', { id: 'diff-plot-h' }, `difference from ${comps[0].baseline}, against the margin, ${pct(comps)} interval` + (comps.length > 1 || (comps[0].level || 0.95) > 0.95 ? ' (each, so that all hold together at 95%)' : '')),
      intervalPlot(comps.map(c => ({ label: diffLabel(c.variant, c.baseline), est: c.estimate, low: c.low, high: c.high, level: c.level, cls: ended ? clsOf(c.decision) : '' })), refsFor(q, true), { clamp: [-1, 1], label: `differences with ${pct(comps)} intervals against the margin`, axis: `${q.metric || 'rate'}: variant minus ${comps[0].baseline}` })] : null,
  ];
}

// The level of a plot's intervals, as their rows carry it (a Bonferroni split shows 97.5%, not 95%).
function pct(rows) {
  const levels = [...new Set(rows.map(r => r.level || 0.95))];
  return levels.map(l => `${Math.round(l * 1000) / 10}%`).join('/');
}

export function casesSection(sn) {
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
          attemptLinks(c.attempts, `${r.case}, ${v}`));
      }))))));
  if (sn.hidden_cases) out.push(h('p', { class: 'muted' }, `${sn.hidden_cases} more case(s) not listed (held-out cases, or beyond the first 50).`));
  return out;
}

/** Links to the traces of a case's failing attempts (at most 6), else to its first one; the rest are counted. */
export function attemptLinks(attempts, whose) {
  const bad = attempts.filter(a => a.outcome && a.outcome !== 'pass');
  const shown = (bad.length ? bad : attempts.filter(a => a.run_id).slice(0, 1)).slice(0, 6);
  const waiting = attempts.filter(a => a.status !== 'done').length;
  return h('div', {},
    shown.map(a => a.run_id ? [link('#/runs/' + a.run_id, `#${a.repeat + 1}${a.outcome && a.outcome !== 'pass' ? ' ' + (a.error || a.outcome) : ''}`,
      { class: 'attempt-link', title: `${a.outcome || a.status}${a.message ? ': ' + a.message : ''}`, 'data-outcome': a.outcome || a.status,
        'aria-label': `${whose ? whose + ': ' : ''}attempt ${a.repeat + 1}, ${words(a.outcome || a.status)}` }), ' '] : null),
    bad.length > shown.length ? h('span', { class: 'muted' }, `+${bad.length - shown.length} more failing `) : null,
    waiting ? h('span', { class: 'muted' }, `${waiting} not finished`) : null);
}

export async function loadAttempts(id, page, box) {
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
