// Trust graph: agents and their latest non-zero votes (kind 6), laid out
// by a small force simulation on a canvas. A node's area follows its
// weighted trust score (GET /trust_graph), its colour its rank; a search
// box finds agents by name or id; a click opens the agent.
import { h, fill, put, api, agentLink, nameOf, short, table, fmt } from '../lib.js';

const colours = [['top 1 %', '#c0392b'], ['top 10 %', '#e67e22'], ['ranked', '#2e6fd8'], ['unranked', '#9aa0a6']];

export async function render(main) {
  const [g, votes] = await Promise.all([api('/trust_graph?limit=1000'), api('/events?kinds=6&limit=1000')]);
  const score = new Map(g.agents.map((a) => [a.agent_id, a]));
  const ranked = g.agents.filter((a) => a.rank > 0).length;
  // Latest vote per (voter, target), as trust.v1 counts them.
  const latest = new Map();
  for (const e of votes) {
    if (Array.isArray(e)) continue;
    let s = 0;
    try { s = Number(JSON.parse(e.content).score) || 0; } catch { continue; }
    for (const t of e.tags) {
      if (t[0] !== 'p' || t[1] === e.agent_id) continue;
      const key = e.agent_id + t[1];
      const prev = latest.get(key);
      if (!prev || prev.at < e.created_at || (prev.at === e.created_at && prev.id < e.id)) latest.set(key, { from: e.agent_id, to: t[1], s, at: e.created_at, id: e.id });
    }
  }
  const edges = [...latest.values()].filter((x) => x.s !== 0);
  const ids = new Set(g.agents.map((a) => a.agent_id));
  for (const x of edges) { ids.add(x.from); ids.add(x.to); }
  const maxScore = Math.max(1e-9, ...g.agents.map((a) => a.weighted_score));
  const nodes = [...ids].map((id, i) => {
    const a = score.get(id) || {};
    const ws = Math.max(0, a.weighted_score || 0);
    const angle = i * 2.399963;
    const r0 = 40 + 8 * Math.sqrt(i);
    return { id, name: nameOf(id) || short(id), rank: a.rank || 0, ws, r: 4 + 12 * Math.sqrt(ws / maxScore), x: r0 * Math.cos(angle), y: r0 * Math.sin(angle), vx: 0, vy: 0 };
  });
  const index = new Map(nodes.map((n) => [n.id, n]));
  const links = edges.map((x) => ({ a: index.get(x.from), b: index.get(x.to), s: x.s }));
  const colour = (n) => {
    if (!n.rank) return colours[3][1];
    if (n.rank <= Math.ceil(ranked / 100)) return colours[0][1];
    if (n.rank <= Math.ceil(ranked / 10)) return colours[1][1];
    return colours[2][1];
  };

  const canvas = h('canvas', { id: 'graph', 'data-nodes': String(nodes.length), 'data-edges': String(links.length) });
  const search = h('input', { type: 'search', id: 'graph-search', placeholder: 'find an agent by name or id' });
  const info = h('p', { class: 'muted', id: 'graph-info' }, `${nodes.length} agents, ${links.length} votes (latest per pair); ${ranked} ranked. Drag to move, click an agent to open it.`);
  fill(main, h('h1', {}, 'Trust graph'),
    h('div', { class: 'row' }, search, h('span', { class: 'legend' }, colours.map(([label, c]) => h('span', {}, h('i', { class: 'dot', 'data-c': c }), label)))),
    info, canvas,
    h('h2', {}, 'Ranking'),
    table(['rank', 'agent', 'weighted score', 'voters'], g.agents.slice(0, 50).map((a) => [a.rank ? `#${a.rank}` : '—', agentLink(a.agent_id), fmt(a.weighted_score), String(a.voter_count)])));
  for (const i of main.querySelectorAll('.legend i')) i.style.background = i.dataset.c;

  const ctx = canvas.getContext('2d');
  let view = { x: 0, y: 0, k: 1 };
  let highlight = null;
  let dragging = null;
  let alpha = 1;
  let frame = 0;

  const size = () => {
    const dpr = window.devicePixelRatio || 1;
    canvas.width = canvas.clientWidth * dpr;
    canvas.height = canvas.clientHeight * dpr;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  };
  const toScreen = (n) => [canvas.clientWidth / 2 + (n.x - view.x) * view.k, canvas.clientHeight / 2 + (n.y - view.y) * view.k];
  const toWorld = (px, py) => [(px - canvas.clientWidth / 2) / view.k + view.x, (py - canvas.clientHeight / 2) / view.k + view.y];

  const step = () => {
    const n = nodes.length;
    for (let i = 0; i < n; i++) {
      const a = nodes[i];
      for (let j = i + 1; j < n; j++) {
        const b = nodes[j];
        let dx = a.x - b.x, dy = a.y - b.y;
        let d2 = dx * dx + dy * dy || 0.01;
        if (d2 > 250000) continue;
        const f = (900 * alpha) / d2;
        dx *= f; dy *= f;
        a.vx += dx; a.vy += dy; b.vx -= dx; b.vy -= dy;
      }
    }
    for (const l of links) {
      const dx = l.b.x - l.a.x, dy = l.b.y - l.a.y;
      const d = Math.sqrt(dx * dx + dy * dy) || 1;
      const f = ((d - 70) / d) * 0.04 * alpha;
      l.a.vx += dx * f; l.a.vy += dy * f; l.b.vx -= dx * f; l.b.vy -= dy * f;
    }
    for (const a of nodes) {
      a.vx -= a.x * 0.01 * alpha; a.vy -= a.y * 0.01 * alpha;
      if (a === dragging) { a.vx = a.vy = 0; continue; }
      a.x += (a.vx *= 0.6); a.y += (a.vy *= 0.6);
    }
    alpha *= 0.985;
  };

  const draw = () => {
    ctx.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
    for (const l of links) {
      const [x1, y1] = toScreen(l.a), [x2, y2] = toScreen(l.b);
      ctx.strokeStyle = l.s > 0 ? 'rgba(46,111,216,.28)' : 'rgba(192,57,43,.45)';
      ctx.lineWidth = 0.5 + Math.abs(l.s) * 1.5;
      ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x2, y2); ctx.stroke();
      // An arrow head toward the target.
      const ang = Math.atan2(y2 - y1, x2 - x1), back = l.b.r * view.k + 2;
      const ax = x2 - Math.cos(ang) * back, ay = y2 - Math.sin(ang) * back;
      ctx.beginPath(); ctx.moveTo(ax, ay);
      ctx.lineTo(ax - 6 * Math.cos(ang - 0.4), ay - 6 * Math.sin(ang - 0.4));
      ctx.lineTo(ax - 6 * Math.cos(ang + 0.4), ay - 6 * Math.sin(ang + 0.4));
      ctx.fillStyle = ctx.strokeStyle; ctx.fill();
    }
    ctx.font = '12px system-ui, sans-serif';
    for (const n of nodes) {
      const [x, y] = toScreen(n);
      const hit = highlight && highlight.has(n);
      ctx.beginPath(); ctx.arc(x, y, Math.max(2, n.r * view.k), 0, 7);
      ctx.fillStyle = colour(n); ctx.globalAlpha = highlight && !hit ? 0.25 : 1; ctx.fill();
      if (hit) { ctx.lineWidth = 3; ctx.strokeStyle = '#111'; ctx.stroke(); }
      if (hit || n.r > 9 || view.k > 1.6) { ctx.fillStyle = '#222'; ctx.fillText(n.name, x + n.r * view.k + 3, y + 4); }
      ctx.globalAlpha = 1;
    }
  };

  const loop = () => {
    frame = 0;
    if (alpha > 0.02 || dragging) { step(); frame = requestAnimationFrame(loop); }
    draw();
  };
  const kick = () => { alpha = Math.max(alpha, 0.3); if (!frame) frame = requestAnimationFrame(loop); };

  const nodeAt = (ev) => {
    const r = canvas.getBoundingClientRect();
    const [wx, wy] = toWorld(ev.clientX - r.left, ev.clientY - r.top);
    let best = null, bd = Infinity;
    for (const n of nodes) {
      const d = Math.hypot(n.x - wx, n.y - wy);
      if (d < Math.max(n.r, 8 / view.k) && d < bd) { best = n; bd = d; }
    }
    return best;
  };
  let down = null;
  canvas.addEventListener('pointerdown', (ev) => {
    down = { x: ev.clientX, y: ev.clientY, node: nodeAt(ev), vx: view.x, vy: view.y };
    dragging = down.node;
    canvas.setPointerCapture(ev.pointerId);
  });
  canvas.addEventListener('pointermove', (ev) => {
    if (!down) { canvas.title = nodeAt(ev)?.name || ''; return; }
    if (dragging) {
      const r = canvas.getBoundingClientRect();
      [dragging.x, dragging.y] = toWorld(ev.clientX - r.left, ev.clientY - r.top);
      kick();
    } else {
      view.x = down.vx - (ev.clientX - down.x) / view.k; view.y = down.vy - (ev.clientY - down.y) / view.k;
      draw();
    }
  });
  canvas.addEventListener('pointerup', (ev) => {
    const moved = down && Math.hypot(ev.clientX - down.x, ev.clientY - down.y) > 4;
    if (down && down.node && !moved) location.hash = `#/agent/${down.node.id}`;
    down = null; dragging = null;
  });
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    view.k = Math.min(6, Math.max(0.2, view.k * (ev.deltaY < 0 ? 1.15 : 1 / 1.15)));
    draw();
  }, { passive: false });
  search.addEventListener('input', () => {
    const q = search.value.trim().toLowerCase();
    highlight = q ? new Set(nodes.filter((n) => n.id.startsWith(q) || n.name.toLowerCase().includes(q))) : null;
    if (highlight && highlight.size) { const n = [...highlight][0]; view.x = n.x; view.y = n.y; }
    info.dataset.matches = highlight ? String(highlight.size) : '';
    draw();
  });
  const onResize = () => { size(); draw(); };
  window.addEventListener('resize', onResize);
  size();
  for (let i = 0; i < 200; i++) step(); // settle before the first frame
  // Fit the settled layout into the canvas.
  if (nodes.length) {
    const xs = nodes.map((n) => n.x), ys = nodes.map((n) => n.y);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    view = { x: (x0 + x1) / 2, y: (y0 + y1) / 2, k: Math.min(3, 0.8 * Math.min(canvas.clientWidth / (x1 - x0 + 200), canvas.clientHeight / (y1 - y0 + 40))) };
  }
  frame = requestAnimationFrame(loop);
  return () => { if (frame) cancelAnimationFrame(frame); window.removeEventListener('resize', onResize); };
}
