/* Pieces several pages share: the series table, the project-cap note, a question in words, an approval's who and how. */
import { announce, badge, errorBox, fmt, h, link, replace, simBadge } from './dom.js';
import { api } from './api.js';
import { proveAct } from './passkey.js';
import { statusOf } from './decision.js';

export function seriesTable(list) {
  return h('table', {},
    h('thead', {}, h('tr', {}, ['series', 'experiment', 'on', 'status', 'verdict', 'created'].map(t => h('th', {}, t)))),
    h('tbody', {}, list.map(sr => h('tr', {},
      h('td', {}, link('#/series/' + sr.series_id, sr.series_id), ' ', simBadge(sr.simulated)),
      h('td', {}, sr.experiment_id ? link('#/experiments/' + encodeURIComponent(sr.experiment_id), sr.experiment_id) : sr.kind),
      h('td', {}, sr.on === 'holdout' ? 'Confirm' : 'Explore'),
      h('td', {}, badge(statusOf(sr))),
      h('td', {}, sr.verdict && statusOf(sr) !== 'stopped' ? badge(sr.verdict) : '—'),
      h('td', {}, fmt.time(sr.created_at))))));
}

export function questionText(q) {
  if (!q) return '';
  if (q.kind === 'threshold') return `${q.metric} ${q.direction === 'at_most' ? 'at most' : 'at least'} ${q.bound}, margin ${q.margin}`;
  if (q.kind === 'compare') return `each variant beats ${q.baseline} on ${q.metric} by more than ${q.margin}`;
  if (q.kind === 'noninferior') return `${q.variant || 'each variant'} is not worse than ${q.baseline} on ${q.metric} by more than ${q.margin}`;
  return q.kind;
}

// aqven.yaml asked for a higher project cap than a person confirmed: say so, and let the person confirm it.
export function capPendingNote(p, after) {
  if (!p.project_cap_pending) return null;
  const out = h('span');
  const confirmIt = async () => {
    try {
      const body = { cap_usd: p.project_cap_asked_usd };
      const passkey = await proveAct('cap_confirm', 'project', p.project_cap_asked_usd);
      if (passkey) body.passkey = passkey;
      await api('/api/project/cap/confirm', { method: 'POST', body });
      announce('project cap confirmed');
      if (after) after();
    } catch (err) { replace(out, errorBox(err)); }
  };
  return h('div', { class: 'note warn', id: 'cap-pending', role: 'status' },
    h('b', {}, 'The project cap is not confirmed: '), p.project_cap_note, '. ',
    h('button', { type: 'button', id: 'confirm-cap', onclick: confirmIt }, `Confirm ${fmt.money(p.project_cap_asked_usd)} as the project cap`), ' ', out);
}

// An approval or stop as the server recorded it: how it was given (the channel its credential proved) and what it did.
// Who gave it is `a.person`: the passkey's name, or the person key's (the login name at the terminal).
export function approvalHow(a) {
  if (a.channel === 'terminal') return `terminal (${a.confirmed === 'tty' ? 'asked at a TTY' : a.confirmed || 'unconfirmed'})`;
  if (a.channel === 'studio') return `Studio (${a.confirmed === 'passkey' ? 'passkey' : 'session'})`;
  return a.channel === 'rest' ? 'server token' : a.channel;
}
export function approvalWhat(a) {
  if (a.action === 'stop') return 'stopped';
  return a.new_token_cap ? `approved ${Number(a.new_token_cap).toLocaleString()} tokens` : `approved ${fmt.money(a.new_cap_usd)}`;
}
export function approvalWho(a) { return a.person || 'someone (before people were named)'; }
