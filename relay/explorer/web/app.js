// The explorer's router: hash routes (#/page/arg?query), one module per
// page. Each page's render(main, arg, query) fills main and may return a
// function that stops it (the live stream). When a page has shown its
// data it sets main.dataset.ready to its name (the browser tests wait on it).
import { h, errorBox, loadNames } from './lib.js';

const pages = {
  live: () => import('./pages/live.js'),
  event: () => import('./pages/event.js'),
  agent: () => import('./pages/agent.js'),
  tasks: () => import('./pages/tasks.js'),
  task: () => import('./pages/tasks.js'),
  graph: () => import('./pages/graph.js'),
  moderation: () => import('./pages/moderation.js'),
  network: () => import('./pages/network.js'),
  publish: () => import('./pages/publish.js'),
  search: () => import('./pages/search.js'),
  api: () => import('./pages/api.js'),
};

let stop = null;
let generation = 0;

export function parseHash(hash) {
  const [path, qs] = hash.replace(/^#\/?/, '').split('?');
  const [page, ...rest] = path.split('/');
  return { page: page || 'live', arg: decodeURIComponent(rest.join('/')), query: new URLSearchParams(qs || '') };
}

async function route() {
  const hash = location.hash;
  const { page, arg, query } = parseHash(hash);
  const gen = ++generation;
  if (stop) { try { stop(); } catch { /* already stopped */ } stop = null; }
  const main = document.getElementById('app');
  delete main.dataset.ready;
  main.dataset.page = page;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === `#/${page === 'task' ? 'tasks' : page}`);
  }
  const load = pages[page];
  if (!load) {
    main.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, `No page “${page}”.`));
    return;
  }
  main.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    await loadNames();
    const mod = await load();
    if (gen !== generation) return;
    const render = page === 'task' ? mod.renderTask : mod.render;
    const s = await render(main, arg, query, () => gen !== generation);
    // A page that sent the reader elsewhere (search) is not ready.
    if (gen !== generation || location.hash !== hash) { if (typeof s === 'function') s(); return; }
    stop = typeof s === 'function' ? s : null;
    if (!main.dataset.ready) main.dataset.ready = page;
  } catch (err) {
    if (gen !== generation) return;
    main.replaceChildren(h('h1', {}, 'Error'), errorBox(err));
    main.dataset.ready = 'error';
  }
}

document.getElementById('search').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const q = ev.target.q.value.trim();
  if (q) location.hash = `#/search?q=${encodeURIComponent(q)}`;
});

window.addEventListener('hashchange', route);
if (!location.hash) history.replaceState(null, '', '#/live');
route();
