/* A flow drawn as its graph. */
import { h, s } from './dom.js';

/** A flow as its graph: nodes left to right by dependency, groups drawn around their children. */
export function flowGraph(flow, ranges) {
  const NW = 160, NH = 50, GAPX = 42, GAPY = 14, PAD = 12, HEAD = 22;
  function layout(nodes) {
    const ids = new Set(nodes.map(n => n.id));
    const level = {};
    const lv = n => {
      if (level[n.id] !== undefined) return level[n.id];
      level[n.id] = 0;
      const deps = (n.deps || []).filter(d => ids.has(d));
      level[n.id] = deps.length ? 1 + Math.max(...deps.map(d => lv(nodes.find(m => m.id === d)))) : 0;
      return level[n.id];
    };
    nodes.forEach(lv);
    const cols = [];
    nodes.forEach(n => {
      const box = n.children && n.children.length ? layout(n.children) : null;
      const w = box ? box.w + 2 * PAD : NW, hh = box ? box.h + 2 * PAD + HEAD : NH;
      (cols[level[n.id]] = cols[level[n.id]] || []).push({ n, box, w, h: hh });
    });
    let x = 0, H = 0;
    const items = {};
    cols.forEach(col => {
      const cw = Math.max(...col.map(c => c.w));
      let y = 0;
      col.forEach(c => { items[c.n.id] = { ...c, x: x + (cw - c.w) / 2, y }; y += c.h + GAPY; });
      H = Math.max(H, y - GAPY);
      x += cw + GAPX;
    });
    return { w: Math.max(0, x - GAPX), h: H, items, nodes };
  }
  function draw(parent, lay, ox, oy) {
    for (const it of Object.values(lay.items)) {
      for (const d of it.n.deps || []) {
        const from = lay.items[d];
        if (!from) continue;
        const x1 = ox + from.x + from.w, y1 = oy + from.y + Math.min(from.h, NH) / 2;
        const x2 = ox + it.x, y2 = oy + it.y + Math.min(it.h, NH) / 2;
        const mx = (x1 + x2) / 2;
        parent.appendChild(s('path', { class: 'edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}` }));
      }
    }
    for (const it of Object.values(lay.items)) {
      const n = it.n, X = ox + it.x, Y = oy + it.y;
      const what = n.kind === 'llm' ? `llm · ${n.agent || ''}` : n.kind === 'code' ? `code · ${n.code || ''}` : n.kind === 'call' ? `call → ${n.flow || ''}` : n.kind;
      const tip = `${n.id} (${n.kind})` + (n.model ? `\nmodel ${n.model}` : '') + (n.prompt_file ? `\nprompt ${n.prompt_file}` : '') + (n.deps && n.deps.length ? `\nafter ${n.deps.join(', ')}` : '');
      if (it.box) {
        const g = s('g', { class: 'group' });
        g.appendChild(s('title', {}, tip));
        g.appendChild(s('rect', { x: X, y: Y, width: it.w, height: it.h, rx: 8 }));
        g.appendChild(s('text', { x: X + 10, y: Y + 16, class: 'title' }, `${n.id}`));
        g.appendChild(s('text', { x: X + 14 + n.id.length * 7, y: Y + 16, class: 'kind' }, 'group'));
        parent.appendChild(g);
        draw(parent, it.box, X + PAD, Y + PAD + HEAD);
      } else {
        const g = s('g', { class: 'node ' + n.kind, tabindex: 0, role: 'img', 'aria-label': tip.replace(/\n/g, '; ') });
        g.appendChild(s('title', {}, tip));
        g.appendChild(s('rect', { x: X, y: Y, width: it.w, height: NH, rx: 6 }));
        g.appendChild(s('text', { x: X + 9, y: Y + 20, class: 'title' }, n.id));
        g.appendChild(s('text', { x: X + 9, y: Y + 37, class: 'kind' }, what.length > 26 ? what.slice(0, 25) + '…' : what));
        if (n.kind === 'call' && n.flow) {
          const a = s('a', { href: '#/flows/' + encodeURIComponent(n.flow) });
          a.appendChild(g);
          parent.appendChild(a);
        } else parent.appendChild(g);
      }
    }
  }
  const lay = layout(flow.nodes || []);
  const M = 14, bandH = 22;
  const tops = (flow.nodes || []).map(n => n.id);
  const usable = (ranges || []).filter(r => tops.includes(r.from || tops[0]) && tops.includes(r.to || tops[tops.length - 1]));
  const W = lay.w + 2 * M, H = lay.h + 2 * M + usable.length * (bandH + 6) + (usable.length ? 6 : 0);
  const el = s('svg', { class: 'flow', width: Math.max(W, 300), height: H, viewBox: `0 0 ${Math.max(W, 300)} ${H}`, role: 'group', 'aria-label': `graph of flow ${flow.id}` });
  const defs = s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, s('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8594a8' })));
  el.appendChild(defs);
  usable.forEach((r, i) => {
    const a = lay.items[r.from || tops[0]], b = lay.items[r.to || tops[tops.length - 1]];
    const x1 = M + Math.min(a.x, b.x), x2 = M + Math.max(a.x + a.w, b.x + b.w);
    const y = M + lay.h + 8 + i * (bandH + 6);
    const g = s('g', { class: 'range' });
    g.appendChild(s('title', {}, `range of experiment ${r.experiment}: ${r.from || 'start'} → ${r.to || 'end'}`));
    g.appendChild(s('rect', { x: x1, y, width: Math.max(80, x2 - x1), height: bandH, rx: 4 }));
    g.appendChild(s('text', { x: x1 + 6, y: y + 15 }, `${r.experiment}: ${r.from || 'start'} → ${r.to || 'end'}`));
    el.appendChild(g);
  });
  draw(el, lay, M, M);
  // Never shrunk to fit: a narrow screen scrolls the graph sideways (its text stays readable), and says so.
  return h('div', { class: 'flow-scroll', tabindex: 0, role: 'region', 'aria-label': `graph of flow ${flow.id}, scrolls sideways` }, el,
    h('p', { class: 'muted flow-hint' }, 'Scroll sideways to see the whole flow.'));
}
