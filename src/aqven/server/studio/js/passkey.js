/* Passkeys: a person's proof for money. The browser's authenticator signs a challenge the server bound to one act
 * (what, on what, for how much, once); the server keeps only public keys and verifies (the webauthn library). */
import { api } from './api.js';
import { announce, errorBox, fmt, h, replace } from './dom.js';

function dec(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - s.length % 4) % 4));
  return Uint8Array.from(b, c => c.charCodeAt(0));
}
function enc(buf) {
  let s = '';
  new Uint8Array(buf).forEach(b => { s += String.fromCharCode(b); });
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
const ids = list => (list || []).map(c => ({ ...c, id: dec(c.id) }));
function credentialJSON(cred) {
  const r = cred.response, out = { id: cred.id, rawId: enc(cred.rawId), type: cred.type, clientExtensionResults: {}, response: { clientDataJSON: enc(r.clientDataJSON) } };
  if (r.attestationObject) out.response.attestationObject = enc(r.attestationObject);
  if (r.authenticatorData) Object.assign(out.response, { authenticatorData: enc(r.authenticatorData), signature: enc(r.signature), userHandle: r.userHandle ? enc(r.userHandle) : null });
  return out;
}

export async function passkeyStatus() { return api('/api/studio/passkeys'); }

async function assertFor(action, target, amount, answer) {
  const body = { action, target, amount: amount || '' };
  if (answer !== undefined) body.answer = answer;
  const ch = await api('/api/studio/passkeys/challenge', { method: 'POST', body });
  const o = ch.options;
  const cred = await navigator.credentials.get({ publicKey: { ...o, challenge: dec(o.challenge), allowCredentials: ids(o.allowCredentials) } });
  return { nonce: ch.nonce, credential: credentialJSON(cred) };
}

/** The passkey's proof of one act, or null when this project does not ask for one (then the session is enough). */
export async function proveAct(action, target, amount, answer) {
  const st = await passkeyStatus();
  return st.required ? assertFor(action, target, amount, answer) : null;
}

async function register(st, user) {
  const body = st.passkeys.length ? { user, passkey: await assertFor('passkey_add', 'project', '') } : { user };
  const reg = await api('/api/studio/passkeys/register/options', { method: 'POST', body });
  const o = reg.options;
  const cred = await navigator.credentials.create({ publicKey: { ...o, challenge: dec(o.challenge), user: { ...o.user, id: dec(o.user.id) }, excludeCredentials: ids(o.excludeCredentials) } });
  return api('/api/studio/passkeys/register', { method: 'POST', body: { nonce: reg.nonce, credential: credentialJSON(cred) } });
}

/** Overview's section: the project's passkeys, registering one, and the requirement that money moves on one. */
export function passkeySection() {
  const box = h('section', { class: 'card', id: 'passkeys', 'aria-labelledby': 'passkeys-h' }, h('p', { class: 'muted' }, 'Reading passkeys…'));
  const out = h('div', { role: 'status' });
  const draw = st => {
    // Whose passkey it is: every act it signs is recorded with this name (by default the person of this session).
    const userIn = h('input', { id: 'passkey-user', type: 'text', maxlength: 64, autocomplete: 'name', value: st.session_person || '', 'aria-describedby': 'passkey-user-help' });
    replace(box,
      h('h2', { id: 'passkeys-h', style: 'margin-top:0' }, 'Passkeys'),
      h('p', { id: 'passkey-rule' }, st.required
        ? 'Money moves on a passkey here: every approval, stop, cap confirmation and answer to a human node asks your passkey, and the terminal (aqven approve) is refused.'
        : st.passkeys.length
          ? 'The passkey requirement is off: a Studio session or `aqven approve` at a terminal approves.'
          : 'No passkey yet: a Studio session or `aqven approve` at a terminal approves. Register a passkey so that only you, with your authenticator, can approve spending; an agent with the project\'s files cannot.'),
      st.passkeys.length ? h('table', { id: 'passkey-table' },
        h('thead', {}, h('tr', {}, ['whose', 'registered', 'added with'].map(t => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, st.passkeys.map(k => h('tr', {}, h('td', {}, k.user), h('td', {}, fmt.time(k.created_at)), h('td', { class: 'mono' }, k.added_with ? k.added_with.slice(0, 10) + '…' : 'first'))))) : null,
      h('div', { class: 'field' },
        h('label', { for: 'passkey-user' }, 'Whose passkey'), userIn,
        h('div', { class: 'muted', id: 'passkey-user-help' }, 'the name every approval it signs is recorded with: yours, or the person who registers their own')),
      h('p', {},
        h('button', { type: 'button', id: 'passkey-register', onclick: () => act(() => register(st, userIn.value.trim()), 'passkey registered') }, st.passkeys.length ? 'Add another passkey' : 'Register a passkey'), ' ',
        st.passkeys.length ? (st.requirement_on
          ? h('button', { type: 'button', id: 'passkey-off', onclick: async () => act(async () => api('/api/studio/passkeys/requirement', { method: 'POST', body: { required: false, passkey: await assertFor('passkey_requirement_off', 'project', '') } }), 'passkey requirement off') }, 'Turn the requirement off…')
          : h('button', { type: 'button', id: 'passkey-on', onclick: () => act(() => api('/api/studio/passkeys/requirement', { method: 'POST', body: { required: true } }), 'passkey requirement on') }, 'Require a passkey again')) : null),
      out);
  };
  const act = async (fn, said) => {
    try { draw(await fn()); announce(said); } catch (err) { replace(out, errorBox(err)); }
  };
  passkeyStatus().then(draw).catch(err => replace(box, errorBox(err)));
  return box;
}
