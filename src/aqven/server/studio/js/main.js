/* AQVEN Studio: ES modules, no build step, nothing fetched from elsewhere. Pages are drawn from the project
 * server's REST API; live pages hold one server-sent event stream each. */
import { labelTables, main } from './dom.js';
import { api } from './api.js';
import { go, start, state } from './nav.js';
import { pageOverview } from './overview.js';
import { pageFlow, pageFlows } from './flows.js';
import { pageRun, pageRuns } from './runs.js';
import { pageExperiment, pageResearch } from './research.js';
import { pageSeries } from './series.js';
import { pageFindings } from './findings.js';
import { pageChat } from './chat.js';

const routes = [
  [/^\/?$/, pageOverview, 'overview'],
  [/^\/overview$/, pageOverview, 'overview'],
  [/^\/flows$/, pageFlows, 'flows'],
  [/^\/flows\/([^/]+)$/, pageFlow, 'flows'],
  [/^\/runs$/, pageRuns, 'runs'],
  [/^\/runs\/([^/]+)$/, pageRun, 'runs'],
  [/^\/research$/, pageResearch, 'research'],
  [/^\/experiments\/([^/]+)$/, pageExperiment, 'research'],
  [/^\/series\/([^/]+)$/, pageSeries, 'research'],
  [/^\/findings$/, pageFindings, 'findings'],
  [/^\/chat$/, pageChat, 'chat'],
];

document.getElementById('skip').addEventListener('click', () => main.focus());
// Tables drawn now or later (live sections, pages of a listing) get their cards' labels (dom.labelTables).
new MutationObserver(() => labelTables(main)).observe(main, { childList: true, subtree: true });
document.addEventListener('keydown', ev => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const t = ev.target;
  if (t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName))) return;
  const pages = ['/', '/flows', '/runs', '/research', '/findings', '/chat'];
  const n = Number(ev.key);
  if (n >= 1 && n <= pages.length) { ev.preventDefault(); go(pages[n - 1]); }
});

(async function boot() {
  try {
    const o = await api('/api/studio/status');
    state.project = o; state.simulate = o.simulate;
    document.getElementById('project-name').textContent = `${o.name || o.package} · ${o.package}`;
    const banner = document.getElementById('sim-banner');
    if (o.simulate) { banner.hidden = false; banner.textContent = 'Simulated mode: simulators answer, no model is called'; }
  } catch (err) { /* the page itself shows the error */ }
  start(routes);
})();
