/* The router: hash routes, the page being drawn, clean-ups when a page is left, event streams. */
import { errorBox, h, link, main, replace } from './dom.js';

let routes = [];             // [pattern, page function, nav entry], given by main.js
let leaving = [];            // clean-ups of the current page (event streams, timers)
let pageToken = 0;           // a page drawn for an older route stops drawing
export const state = { project: null, simulate: false };

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, qs] = raw.split('?');
  return { path, query: new URLSearchParams(qs || '') };
}
export function go(path, query) {
  const qs = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '' && v !== null && v !== undefined)).toString() : '';
  location.hash = '#' + path + (qs ? '?' + qs : '');
}

export async function route() {
  leaving.forEach(fn => { try { fn(); } catch (e) { /* already closed */ } });
  leaving = [];
  const token = ++pageToken;
  const { path, query } = parseHash();
  let found = routes.find(([re]) => re.test(path));
  if (!found) found = [/.*/, () => [h('h1', {}, 'Not found'), h('p', {}, 'No page at ', h('code', {}, path), '. ', link('#/', 'Overview'))], ''];
  const [re, fn, nav] = found;
  const args = (re.exec(path) || []).slice(1).map(decodeURIComponent);
  document.querySelectorAll('#nav a').forEach(a => a.classList.toggle('active', a.dataset.page === nav));
  document.querySelectorAll('#nav a').forEach(a => a.dataset.page === nav ? a.setAttribute('aria-current', 'page') : a.removeAttribute('aria-current'));
  replace(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    const ctx = { token, alive: () => token === pageToken };
    const content = await fn(...args, query, ctx);
    if (token !== pageToken) return;
    replace(main, content);
  } catch (err) {
    if (token !== pageToken) return;
    replace(main, h('h1', {}, 'Something went wrong'), errorBox(err));
  }
  const heading = main.querySelector('h1');
  document.title = (heading ? heading.textContent + ' — ' : '') + 'AQVEN Studio';
  if (!route.first) main.focus({ preventScroll: false });
  route.first = false;
}
route.first = true;
export function onLeave(fn) { leaving.push(fn); }
export function stream(url, handlers) {
  const es = new EventSource(url);
  for (const [ev, fn] of Object.entries(handlers)) es.addEventListener(ev, e => fn(JSON.parse(e.data)));
  es.addEventListener('end', () => es.close());
  onLeave(() => es.close());
  return es;
}

/** Draw the page of the current hash now and on every change of it. */
export function start(table) {
  routes = table;
  window.addEventListener('hashchange', route);
  route();
}
