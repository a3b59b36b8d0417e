/* Page: Chat. */
import { announce, h, kv, replace, simNote } from './dom.js';
import { api } from './api.js';
import { markdown } from './markdown.js';

const chatLog = JSON.parse(sessionStorage.getItem('aqven-chat') || '[]');
function saveChat() { sessionStorage.setItem('aqven-chat', JSON.stringify(chatLog.slice(-60))); }

export async function pageChat() {
  const info = await api('/api/chat');
  const r = info.responder;
  const log = h('div', { class: 'chat-log', id: 'chat-log', role: 'log', 'aria-live': 'polite' });
  const ta = h('textarea', { id: 'chat-input', rows: 3, placeholder: 'Ask about findings, experiments, series, runs…', 'aria-label': 'your message' });
  const send = h('button', { type: 'submit', class: 'primary', id: 'chat-send' }, 'Send');
  const drawLog = () => {
    replace(log, chatLog.length ? chatLog.map(m => m.role === 'error' ? h('div', { class: 'msg error note bad', role: 'alert' },
      h('b', {}, 'The chat failed: '), m.content, m.hint ? h('div', { class: 'muted' }, 'hint: ' + m.hint) : null) : h('div', { class: 'msg ' + m.role },
      m.role === 'assistant' ? markdown(m.content, { breaks: true, ids: true }) : m.content, m.tools && m.tools.length ? h('div', { class: 'tools' }, 'tools used: ' + m.tools.map(t => `${t.name}(${Object.entries(t.args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(', ')})`).join(' · ')) : null,
      m.responder ? h('div', { class: 'tools' }, m.responder) : null)) : h('p', { class: 'muted' }, 'No messages yet.'));
    log.scrollTop = log.scrollHeight;
  };
  const submit = async ev => {
    ev.preventDefault();
    const text = ta.value.trim();
    if (!text) return;
    chatLog.push({ role: 'user', content: text });
    ta.value = ''; send.disabled = true; drawLog();
    log.appendChild(h('div', { class: 'msg assistant muted', id: 'chat-thinking' }, 'thinking…'));
    try {
      const res = await api('/api/chat', { method: 'POST', body: { messages: chatLog.filter(m => m.role === 'user' || m.role === 'assistant').map(m => ({ role: m.role, content: m.content })) } });
      chatLog.push({ role: 'assistant', content: res.reply, tools: res.tool_calls, responder: res.responder.kind === 'offline' ? 'answered by the offline responder (simulated, no model)' : `answered by ${res.responder.model}` });
      announce('the chat answered');
    } catch (err) {
      // An error is shown as one (never as the assistant's answer) and is not sent back as part of the talk.
      chatLog.push({ role: 'error', content: `${err.code}: ${err.message}`, hint: err.hint || '' });
    }
    saveChat(); send.disabled = false; drawLog(); ta.focus();
  };
  ta.addEventListener('keydown', ev => { if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); submit(ev); } });
  drawLog();
  return [
    h('h1', {}, 'Chat'),
    h('p', { class: 'sub' }, 'An agent that read FINDINGS.md, AGENTS.md and CLAUDE.md before your first message, and can use the project\'s tools (the MCP server\'s, minus approval).'),
    r.kind === 'offline' ? simNote(r.text + '.') : h('div', { class: 'note warn' }, r.text + '.'),
    kv([['read first', info.context_files.map((f, i) => [i ? ' · ' : '', h('code', {}, f.name), f.present ? ` (${f.chars} chars)` : ' (absent)'])],
      ['tools', info.tools.join(', ')], ['never', 'approves or continues a series: that is yours to do on the series page']]),
    log,
    h('form', { class: 'chat-form', onsubmit: submit }, ta, h('div', {}, send, h('p', {}, h('button', { type: 'button', onclick: () => { chatLog.length = 0; saveChat(); drawLog(); } }, 'Clear')))),
    h('p', { class: 'muted' }, 'Enter sends; Shift+Enter starts a new line.'),
  ];
}
