/* Pages: Runs and one run (its trace, a human node's form). */
import { announce, badge, errorBox, fmt, h, kv, link, pager, patch, pre, replace, simBadge, simNote } from './dom.js';
import { api } from './api.js';
import { proveAct } from './passkey.js';
import { go, route, state, stream } from './nav.js';
import { checksSection, outcomeBadge, outcomeText, outputView } from './attempt.js';
import { approvalHow, approvalWho } from './widgets.js';

const OUTCOMES = { pass: 'pass', fail: 'check failed', model_failure: 'model failure', infra: 'infra error', ok: 'ok (by hand)' };
const OUTCOME_CLS = { pass: 'ok', fail: 'bad', model_failure: 'bad', infra: 'warn', ok: 'ok' };

export async function pageRuns(query) {
  const q = Object.fromEntries(query.entries());
  const page = Number(q.page || 1);
  const params = new URLSearchParams({ page, per_page: 50 });
  for (const [k, p] of [['flow', 'flow_id'], ['status', 'status'], ['outcome', 'outcome'], ['series', 'series_id'], ['case', 'case'], ['source', 'source']]) if (q[k]) params.set(p, q[k]);
  const [data, datasets] = await Promise.all([api('/api/studio/runs?' + params), api('/api/datasets')]);
  const f = { flow: h('select', { id: 'f-flow' }, h('option', { value: '' }, 'all flows'), data.flows.map(x => h('option', { value: x, selected: q.flow === x }, x))),
    status: h('select', { id: 'f-status' }, h('option', { value: '' }, 'any status'), data.statuses.map(x => h('option', { value: x, selected: q.status === x }, x))),
    outcome: h('select', { id: 'f-outcome' }, h('option', { value: '' }, 'any outcome'), data.outcomes.map(x => h('option', { value: x, selected: q.outcome === x }, OUTCOMES[x] || x))),
    source: h('select', { id: 'f-source' }, h('option', { value: '' }, 'any source'), h('option', { value: 'series', selected: q.source === 'series' }, 'attempts of series'), h('option', { value: 'hand', selected: q.source === 'hand' }, 'started by hand')),
    case: h('input', { id: 'f-case', type: 'search', value: q.case || '', placeholder: 'case name' }) };
  const apply = e => { e.preventDefault(); go('/runs', { flow: f.flow.value, status: f.status.value, outcome: f.outcome.value, source: f.source.value, case: f.case.value, series: q.series || '' }); };
  const anySim = data.items.some(r => r.simulated);
  return [
    h('h1', {}, 'Runs'),
    h('p', { class: 'sub' }, 'Every run, newest first: those started by hand and every attempt of a series. Open one for its trace.'),
    newRunForm(data.flows, datasets, q.new),
    h('form', { class: 'filters', onsubmit: apply, 'aria-label': 'filter runs' },
      h('div', {}, h('label', { for: 'f-flow' }, 'Flow'), f.flow),
      h('div', {}, h('label', { for: 'f-status' }, 'Status'), f.status),
      h('div', {}, h('label', { for: 'f-outcome' }, 'Outcome'), f.outcome),
      h('div', {}, h('label', { for: 'f-source' }, 'Source'), f.source),
      h('div', {}, h('label', { for: 'f-case' }, 'Case'), f.case),
      q.series ? h('div', {}, h('label', {}, 'Series'), h('code', {}, q.series)) : null,
      h('button', { type: 'submit', class: 'primary' }, 'Apply'),
      h('button', { type: 'button', onclick: () => go('/runs') }, 'Clear')),
    anySim ? simNote('Runs marked simulated were answered by the project\'s simulators, not by the models.') : null,
    data.items.length ? h('table', { id: 'runs-table' },
      h('thead', {}, h('tr', {}, ['run', 'flow', 'case', 'status', 'outcome', 'started', 'took', 'tokens', 'cost', 'source'].map(t => h('th', { class: ['tokens', 'cost'].includes(t) ? 'num' : null }, t)))),
      h('tbody', {}, data.items.map(r => h('tr', { class: r.status === 'failed' || ['fail', 'model_failure'].includes(r.attempt_outcome) ? 'failing' : null, 'data-outcome': r.attempt_outcome || '' },
        h('td', { class: 'nowrap' }, link('#/runs/' + r.id, r.id)),
        h('td', {}, r.flow_id),
        h('td', {}, r.held_out ? h('span', { class: 'muted' }, 'held-out case') : (r.case_name || h('span', { class: 'muted' }, 'input'))),
        h('td', {}, h('span', { class: 'nowrap' }, badge(r.status), ' ', simBadge(r.simulated)), r.error_code ? h('div', { class: 'mono err' }, r.error_code) : null),
        h('td', { class: 'outcome' }, r.attempt_outcome ? badge(OUTCOMES[r.attempt_outcome] || r.attempt_outcome, OUTCOME_CLS[r.attempt_outcome]) : '—'),
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

export function newRunForm(flows, datasets, preset) {
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

export async function pageRun(id, _query, ctx) {
  let first, attempt;
  try {
    [first, attempt] = await Promise.all([api('/api/studio/runs/' + encodeURIComponent(id) + '/trace'),
      api('/api/studio/runs/' + encodeURIComponent(id) + '/attempt')]);
  } catch (err) {
    if (err.code !== 'HOLDOUT_HIDDEN') throw err;
    return [h('h1', {}, 'Run ', h('code', {}, id)), h('div', { class: 'note warn', id: 'held-out-run' }, h('b', {}, 'A run of a held-out case. '),
      'Held-out cases are never shown one by one, so that no change is tuned to them: its case, output and trace stay hidden. Its series page shows what it counted for.'),
      h('p', {}, link('#/runs', 'All runs'))];
  }
  let att = attempt.attempt;
  const expanded = new Set();
  const head = h('div'), waitBox = h('div'), timeline = h('div'), output = h('div'), checks = h('div');
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
    patch(head, [r.status, r.cost_usd, r.model_calls, r.ended_at, r.error, att], () => [
      h('h1', {}, 'Run ', h('code', {}, r.id)),
      h('p', { class: 'sub' }, 'flow ', link('#/flows/' + encodeURIComponent(r.flow_id), r.flow_id),
        r.request.from_node || r.request.to_node ? ` (range ${r.request.from_node || 'start'} → ${r.request.to_node || 'end'})` : '',
        ' · ', src.kind === 'series' && src.side === 'holdout' ? 'a held-out case' : (r.case_name ? ['case ', h('b', {}, r.case_name)] : 'an input given by hand'),
        ' · ', badge(r.status), ' ', outcomeBadge(att), ' ', simBadge(r.simulated)),
      r.simulated ? simNote('This run was answered by the project\'s simulators, not by the models; its cost is what the real models would charge for the same tokens.') : null,
      kv([
        ['source', src.kind === 'series' ? ['attempt of series ', link('#/series/' + src.series_id, src.series_id), src.experiment_id ? [' (', link('#/experiments/' + encodeURIComponent(src.experiment_id), src.experiment_id), `, variant ${src.variant_id}, ${fmt.side(src.side)})`] : ''] : 'started by hand'],
        ['started', fmt.time(r.started_at || r.created_at)],
        ['took', fmt.dur(r.started_at, r.ended_at)],
        ['model calls', String(r.model_calls)],
        ['tokens', `${r.input_tokens} in · ${r.output_tokens} out`],
        ['cost', (r.cost_is_lower_bound ? 'at least ' : '') + fmt.money(r.cost_usd) + (r.cost_is_lower_bound ? ` (${r.unpriced_calls} call(s) had no known price)` : '')],
        ['outcome', h('span', { id: 'outcome' }, outcomeText(att, r))],
        att ? ['the flow', r.outcome === 'ok' ? 'ran to its end (its checks decide the outcome)' : r.outcome || '—'] : null,
      ]),
      r.error ? h('div', { class: 'note bad', role: 'alert' }, h('b', {}, r.error.code), ': ', r.error.message, r.error.node_id ? [' — at node ', h('code', {}, r.error.node_id)] : '') : null,
      src.kind === 'series' && src.side === 'holdout' ? null : h('details', {}, h('summary', {}, 'What it ran on (input, context, node outputs)'),
        pre({ input: r.request.input, context: r.request.context, node_outputs: r.request.node_outputs })),
    ]);
    patch(waitBox, t.waiting, () => t.waiting ? humanForm(r.id, t.waiting) : []);
    patch(timeline, [t.nodes, [...expanded]], () => drawTimeline(t, expanded, redraw));
    patch(checks, [att], () => checksSection(att));
    patch(output, [r.output, att], () => outputView(r.output, att));
  };
  render(first);
  if (!['done', 'failed'].includes(first.run.status)) {
    stream('/api/runs/' + encodeURIComponent(id) + '/stream', {
      trace: async t => {
        if (!ctx.alive()) return;
        if (['done', 'failed'].includes(t.run.status) && t.run.series_id) att = (await api('/api/studio/runs/' + encodeURIComponent(id) + '/attempt')).attempt;
        render(t);
        if (['done', 'failed'].includes(t.run.status)) announce(`run ${t.run.status}`);
      },
    });
  }
  return [head, waitBox, checks, output, h('h2', {}, 'Trace'), h('p', { class: 'muted' }, 'Each node on the run\'s clock. Open a node (Enter) for its inputs, output, model calls, tokens and cost.'), timeline];
}

export function drawTimeline(t, expanded, redraw) {
  const nodes = t.nodes;
  if (!nodes.length) return h('p', { class: 'muted' }, 'No node has started yet.');
  // From the earliest event: a run over a node range (or a resumed one) has nodes that started before it did.
  const starts = nodes.filter(n => n.start).map(n => new Date(n.start).getTime());
  const t0 = Math.min(new Date(t.run.started_at || t.run.created_at).getTime(), ...starts);
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

export function nodeDetail(n) {
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
    n.human ? [h('h3', {}, 'Asked a person'), h('p', {}, n.human.question || ''), n.human.answer !== undefined ? pre(n.human.answer) : null,
      n.human.by ? h('p', { class: 'muted', id: 'human-answered-by' }, `answered by ${approvalWho(n.human.by)}, ${approvalHow(n.human.by)}`) : null] : null,
    n.output !== null && n.output !== undefined ? [h('h3', {}, 'Output'), pre(n.output)] : null);
}

export function humanForm(runId, w) {
  const schema = w.output_schema || { type: 'string' };
  const isText = schema.type === 'string';
  const ta = h('textarea', { id: 'human-answer', rows: isText ? 3 : 5, placeholder: isText ? 'your answer' : JSON.stringify(exampleOf(schema)) });
  const out = h('div');
  const submit = async e => {
    e.preventDefault();
    let answer = ta.value;
    if (!isText) { try { answer = JSON.parse(ta.value); } catch (err) { replace(out, h('div', { class: 'note bad', role: 'alert' }, 'Not valid JSON: ' + err.message)); return; } }
    try {
      const passkey = await proveAct('human_answer', `${runId}/${w.node_id}`, '', answer);
      await api(`/api/studio/runs/${encodeURIComponent(runId)}/human/${w.node_id.split('/').map(encodeURIComponent).join('/')}`, { method: 'POST', body: passkey ? { answer, passkey } : { answer } });
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
export function exampleOf(schema) {
  if (!schema || typeof schema !== 'object') return '';
  if (schema.type === 'object') return Object.fromEntries(Object.entries(schema.properties || {}).map(([k, v]) => [k, exampleOf(v)]));
  if (schema.type === 'array') return [exampleOf(schema.items)];
  if (schema.type === 'boolean') return true;
  if (schema.type === 'integer' || schema.type === 'number') return 0;
  return '';
}
