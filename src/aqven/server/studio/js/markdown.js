/* A tiny, safe markdown renderer: builds nodes, never HTML strings. */
import { h } from './dom.js';

function mdInline(text) {
  const out = [];
  const re = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|((?<![A-Za-z0-9])_[^_\s][^_]*_(?![A-Za-z0-9]))|(\[[^\]]+\]\([^)\s]+\))/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (m[1]) out.push(h('code', {}, t.slice(1, -1)));
    else if (m[2]) out.push(h('strong', {}, mdInline(t.slice(2, -2))));
    else if (m[3] || m[4]) out.push(h('em', {}, mdInline(t.slice(1, -1))));
    else {
      const lm = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(t);
      out.push(mdLink(lm[1], lm[2]));
    }
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
function mdLink(label, href) {
  if (/^https?:\/\//i.test(href)) return h('a', { href, rel: 'noopener noreferrer', target: '_blank' }, mdInline(label));
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return h('span', {}, mdInline(label));   // javascript:, data: ... never links
  if (/findings\/[^/]+\.ya?ml$/.test(href)) return h('a', { href: '#/findings?file=' + encodeURIComponent(href) }, mdInline(label));
  return h('span', { class: 'mono', title: href }, mdInline(label));
}
/** Series and run ids in the text nodes of `root` (not already in a link) as links to their pages. */
export function linkIds(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) if (!walker.currentNode.parentNode.closest('a')) nodes.push(walker.currentNode);
  const re = /\b(ser|run)_[0-9a-f]{6,}\b/g;
  for (const node of nodes) {
    const text = node.nodeValue;
    if (!re.test(text)) continue;
    re.lastIndex = 0;
    const frag = document.createDocumentFragment();
    let at = 0, m;
    while ((m = re.exec(text))) {
      frag.appendChild(document.createTextNode(text.slice(at, m.index)));
      frag.appendChild(h('a', { href: (m[1] === 'ser' ? '#/series/' : '#/runs/') + m[0], class: 'id-link' }, m[0]));
      at = m.index + m[0].length;
    }
    frag.appendChild(document.createTextNode(text.slice(at)));
    node.parentNode.replaceChild(frag, node);
  }
  return root;
}

/** `opts.breaks`: a line break inside a paragraph stays one (the chat's answers are written line by line);
 * `opts.ids`: series and run ids link to their pages. */
export function markdown(src, opts = {}) {
  const root = h('div', { class: 'md' });
  const lines = String(src || '').replace(/\r\n?/g, '\n').split('\n');
  let para = [], list = null, code = null;
  const flush = () => {
    if (para.length) { root.appendChild(paragraph(para)); para = []; }
    if (list) { root.appendChild(list); list = null; }
  };
  const paragraph = lines => h('p', {}, opts.breaks ? lines.map((l, i) => [i ? h('br') : null, mdInline(l)]) : mdInline(lines.join(' ')));
  for (const line of lines) {
    if (code !== null) {
      if (/^```/.test(line)) { root.appendChild(h('pre', {}, code.join('\n'))); code = null; } else code.push(line);
      continue;
    }
    if (/^```/.test(line)) { flush(); code = []; continue; }
    const hm = /^(#{1,6})\s+(.*)$/.exec(line);
    if (hm) { flush(); root.appendChild(h('h' + Math.min(6, hm[1].length + 1), {}, mdInline(hm[2]))); continue; }
    const um = /^\s*[-*]\s+(.*)$/.exec(line), om = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (um || om) {
      if (para.length) { root.appendChild(paragraph(para)); para = []; }
      const tag = um ? 'ul' : 'ol';
      if (!list || list.tagName.toLowerCase() !== tag) { if (list) root.appendChild(list); list = h(tag); }
      list.appendChild(h('li', {}, mdInline((um || om)[1])));
      continue;
    }
    if (!line.trim()) { flush(); continue; }
    if (list) { root.appendChild(list); list = null; }
    para.push(line.trim());
  }
  if (code !== null) root.appendChild(h('pre', {}, code.join('\n')));
  flush();
  return opts.ids ? linkIds(root) : root;
}
