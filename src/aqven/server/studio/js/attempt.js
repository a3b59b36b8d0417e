/* A run that was an attempt of a series: each check's result and reason, the expected output, and the reply
 * as text with the passages a failed check quotes highlighted (the JSON on demand). */
import { badge, h, kv, link, pre } from './dom.js';
import { markdown } from './markdown.js';

/** What the attempt counted as, in words: the flow can finish fine ("ok") while a check failed. */
export function outcomeText(att, run) {
  if (att) {
    if (att.outcome === 'pass') return 'pass: every check passed (counted)';
    if (att.outcome === 'fail') return `fail: ${att.error_code || 'a check failed'} (counted)`;
    if (att.outcome === 'model_failure') return 'model failure (counted)';
    if (att.outcome === 'infra') return 'infrastructure error (not counted in metrics)';
    if (!att.outcome) return att.status === 'done' ? '—' : `not finished (${att.status})`;
    return att.outcome;
  }
  if (!run.outcome) return '—';
  return run.outcome === 'infra' ? 'infrastructure error (not counted in metrics)' : run.outcome === 'model_failure' ? 'model failure (counted)' : 'ok';
}

export function outcomeBadge(att) {
  if (!att || !att.outcome) return null;
  const text = att.outcome === 'fail' ? 'check failed' : att.outcome === 'pass' ? 'checks passed' : att.outcome.replace('_', ' ');
  return badge(text, att.outcome === 'pass' ? 'ok' : att.outcome === 'infra' ? 'warn' : 'bad');
}

function checkResult(c) {
  if (c.error) return badge('error', 'warn');
  if (c.passed === true) return badge(c.score !== null && c.score !== undefined && c.score !== 1 ? `pass ${c.score.toFixed(2)}` : 'pass', 'ok');
  if (c.passed === false) return badge(c.score !== null && c.score !== undefined && c.score !== 0 ? `fail ${c.score.toFixed(2)}` : 'fail', 'bad');
  return badge(c.score === null || c.score === undefined ? 'not scored' : c.score.toFixed(2), 'open');
}

export function checksSection(att) {
  if (!att) return [];
  const rows = att.checks || [];
  return h('section', { id: 'checks', 'aria-labelledby': 'checks-h' },
    h('h2', { id: 'checks-h' }, 'Checks'),
    h('p', { class: 'muted' }, 'Attempt of ', link('#/series/' + att.series_id, att.series_id), ` · variant ${att.variant_id} · case `, h('b', {}, att.case_name), ` · repeat ${att.repeat + 1}`),
    rows.length ? h('table', { class: 'checks' },
      h('thead', {}, h('tr', {}, ['check', 'result', 'reason'].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.map(c => h('tr', { class: c.passed === false ? 'failing' : null, 'data-check': c.check_id },
        h('th', { scope: 'row', class: 'mono' }, c.check_id), h('td', {}, checkResult(c)),
        h('td', { class: 'reason' }, c.error ? `${c.error.code}: ${c.error.message}` : c.reason || '—'))))) :
      h('p', { class: 'muted' }, att.status === 'done' ? `No check ran: ${att.error_code || att.outcome || 'the attempt ended before its checks'}.` : 'The checks run when the attempt finishes.'),
    att.expected_output !== null && att.expected_output !== undefined
      ? [h('h3', {}, 'Expected output'), typeof att.expected_output === 'string' ? h('p', { id: 'expected' }, att.expected_output) : h('div', { id: 'expected' }, pre(att.expected_output))] : null);
}

/** Wrap every occurrence of the quoted passages in <mark> inside the text nodes of `root`. */
export function highlight(root, quotes) {
  const wanted = (quotes || []).filter(q => q && q.trim().length >= 3);
  if (!wanted.length) return root;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const text = node.nodeValue;
    const hits = [];
    for (const q of wanted) { let i = text.indexOf(q); while (i >= 0) { hits.push([i, i + q.length]); i = text.indexOf(q, i + q.length); } }
    if (!hits.length) continue;
    hits.sort((a, b) => a[0] - b[0]);
    const frag = document.createDocumentFragment();
    let at = 0;
    for (const [a, b] of hits) {
      if (a < at) continue;
      frag.appendChild(document.createTextNode(text.slice(at, a)));
      frag.appendChild(h('mark', { title: 'quoted by a failed check' }, text.slice(a, b)));
      at = b;
    }
    frag.appendChild(document.createTextNode(text.slice(at)));
    node.parentNode.replaceChild(frag, node);
  }
  return root;
}

/** The run's output as a person reads it: its text fields rendered, short fields as a list, the JSON on demand. */
export function outputView(output, att) {
  if (output === null || output === undefined) return [];
  const quotes = att ? att.checks.flatMap(c => c.quotes || []) : [];
  const text = [], fields = [];
  if (typeof output === 'string') text.push(['reply', output]);
  else if (output && typeof output === 'object' && !Array.isArray(output)) {
    for (const [k, v] of Object.entries(output)) {
      if (typeof v === 'string' && (v.length > 80 || v.includes('\n'))) text.push([k, v]);
      else fields.push([k, typeof v === 'string' ? v : Array.isArray(v) && v.every(x => typeof x === 'string') ? h('ul', {}, v.map(x => h('li', {}, x))) : JSON.stringify(v)]);
    }
  }
  const fieldsList = fields.length ? kv(fields.map(([k, v]) => [k, v])) : null;
  if (fieldsList) highlight(fieldsList, quotes);
  return [
    h('h2', {}, 'Output'),
    text.map(([k, v]) => h('section', { class: 'card reply', 'data-field': k }, h('div', { class: 'muted mono' }, k), highlight(markdown(v), quotes))),
    fieldsList,
    !text.length && !fieldsList ? pre(output) : null,
    h('details', { id: 'output-json' }, h('summary', {}, 'Output as JSON'), pre(output)),
  ];
}
