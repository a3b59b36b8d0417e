/* Pages: Flows and one flow. */
import { h, link, pre } from './dom.js';
import { api } from './api.js';
import { flowGraph } from './flowgraph.js';

export async function rangesByFlow() {
  const exps = await api('/api/experiments');
  const out = {};
  exps.forEach(e => {
    if (e.subject && (e.subject.from || e.subject.to)) (out[e.subject.flow] = out[e.subject.flow] || []).push({ experiment: e.id, from: e.subject.from, to: e.subject.to });
  });
  return { out, exps };
}

export async function pageFlows() {
  const [flows, agents, rb] = await Promise.all([api('/api/flows'), api('/api/agents'), rangesByFlow()]);
  const full = await Promise.all(flows.map(f => api('/api/flows/' + encodeURIComponent(f.id))));
  return [
    h('h1', {}, 'Flows'),
    h('p', { class: 'sub' }, 'Each flow as its graph: nodes run left to right as their inputs become ready; a dashed box is a group; a yellow band is the range of top-level nodes an experiment runs.'),
    full.map(f => h('section', { class: 'card' },
      h('h2', { style: 'margin-top:0' }, link('#/flows/' + encodeURIComponent(f.id), f.id)),
      h('p', { class: 'muted' }, f.description || ''),
      flowGraph(f, rb.out[f.id]),
      f.diagnostics && f.diagnostics.length ? h('div', { class: 'note bad' }, f.diagnostics.map(d => h('div', {}, `${d.file || ''}${d.line ? ':' + d.line : ''} ${d.code}: ${d.message}`))) : null)),
    h('h2', {}, 'Agents'),
    agentsTable(agents),
  ];
}
export function agentsTable(agents) {
  return h('table', {},
    h('thead', {}, h('tr', {}, ['agent', 'model', 'output mode', 'settings', 'simulator'].map(t => h('th', {}, t)))),
    h('tbody', {}, agents.map(a => h('tr', {},
      h('td', {}, h('b', {}, a.id), a.description ? h('div', { class: 'muted' }, a.description) : null),
      h('td', { class: 'mono' }, a.model),
      h('td', {}, a.output_mode),
      h('td', { class: 'mono' }, Object.entries(a.settings || {}).map(([k, v]) => `${k}=${v}`).join(' ')),
      h('td', { class: 'mono' }, a.simulator || '—')))));
}

export async function pageFlow(id) {
  const [f, agents, rb] = await Promise.all([api('/api/flows/' + encodeURIComponent(id)), api('/api/agents'), rangesByFlow()]);
  const used = new Set();
  const walk = ns => ns.forEach(n => { if (n.agent) used.add(n.agent); if (n.children) walk(n.children); });
  walk(f.nodes);
  const exps = rb.exps.filter(e => e.subject.flow === id);
  return [
    h('h1', {}, 'Flow ', h('code', {}, id)),
    h('p', { class: 'sub' }, f.description || '', ' ', h('span', { class: 'mono' }, f.file)),
    flowGraph(f, rb.out[id]),
    f.diagnostics.length ? h('div', { class: 'note bad' }, f.diagnostics.map(d => h('div', {}, `${d.file || ''}${d.line ? ':' + d.line : ''} ${d.code}: ${d.message}`))) : null,
    h('p', {}, link('#/runs?' + new URLSearchParams({ flow: id }), 'Runs of this flow'), ' · ', link('#/runs?' + new URLSearchParams({ new: id }), 'Start a run')),
    h('h2', {}, 'Nodes'),
    h('table', {},
      h('thead', {}, h('tr', {}, ['node', 'kind', 'after', 'agent / code / flow', 'inputs'].map(t => h('th', {}, t)))),
      h('tbody', {}, (function rows(ns, depth) {
        return ns.flatMap(n => [h('tr', {},
          h('td', { style: `padding-left:${9 + depth * 18}px` }, h('b', {}, n.id)),
          h('td', {}, n.kind),
          h('td', {}, (n.deps || []).join(', ') || '—'),
          h('td', { class: 'mono' }, n.agent ? `${n.agent} (${n.model})` : n.code || (n.flow ? link('#/flows/' + encodeURIComponent(n.flow), n.flow) : '') || (n.result || '')),
          h('td', { class: 'mono' }, Object.keys(n.inputs || {}).join(', '))),
        ...rows(n.children || [], depth + 1)]);
      })(f.nodes, 0))),
    h('h2', {}, 'Types'),
    h('div', { class: 'row' }, h('div', { class: 'grow' }, h('h3', {}, 'input'), pre(f.input_schema)), h('div', { class: 'grow' }, h('h3', {}, 'output'), pre(f.output_schema))),
    exps.length ? [h('h2', {}, 'Experiments on this flow'), h('ul', {}, exps.map(e => h('li', {}, link('#/experiments/' + encodeURIComponent(e.id), e.id), ` — ${e.caption}` + (e.subject.from ? ` · range ${e.subject.from} → ${e.subject.to}` : ''))))] : null,
    h('h2', {}, 'Agents of this flow'),
    agentsTable(agents.filter(a => used.has(a.id))),
  ];
}
