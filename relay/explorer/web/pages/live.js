// Live: GET /stream (SPEC §7) with its filters, pausable. Pausing closes
// the EventSource and keeps the last log sequence seen; resuming reopens
// it with after=<that seq>, so the relay replays what was missed. Rows
// are added once per animation frame and the list is capped, so a fast
// stream (hundreds of events a second) never blocks the page.
import { h, fill, put, api, agentLink, eventLink, kindName, preview, when, errorBox } from '../lib.js';

const fields = ['kinds', 'authors', 't', 'e', 'p', 'cap', 'filter', 'since', 'branch'];
const maxRows = 300;

export async function render(main, _arg, query) {
  const params = new URLSearchParams();
  for (const f of fields) if (query.get(f)) params.set(f, query.get(f));
  const form = h('form', { class: 'filters', id: 'live-filters' },
    fields.map((f) => h('label', {}, f, h('input', { name: f, value: params.get(f) || '', size: f === 'filter' ? 22 : 9 }))),
    h('button', { type: 'submit' }, 'Apply'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const f of fields) if (form[f].value.trim()) q.set(f, form[f].value.trim());
    location.hash = `#/live${q.toString() ? '?' + q : ''}`;
  });
  const status = h('span', { class: 'status muted', id: 'live-status' }, 'connecting…');
  const rate = h('span', { class: 'status muted', id: 'live-rate' }, '');
  const pause = h('button', { type: 'button', id: 'live-pause' }, 'Pause');
  const list = h('ol', { class: 'feed', id: 'live-feed' });
  fill(main, h('h1', {}, 'Live'),
    h('p', { class: 'muted' }, 'Events as the relay stores them (GET /stream). Filters are those of /stream; pausing keeps your place and resuming replays what you missed.'),
    h('details', { open: [...params].length > 0 || window.innerWidth > 600 }, h('summary', {}, 'Filters'), form),
    h('div', { class: 'row' }, pause, status, rate), list);

  let es = null;
  let lastSeq = 0; // the last log sequence seen (resume point)
  let received = 0;
  const seen = new Set();
  let queue = [];
  let frame = 0;

  const flush = () => {
    frame = 0;
    const batch = queue;
    queue = [];
    const frag = document.createDocumentFragment();
    for (let i = batch.length - 1; i >= Math.max(0, batch.length - maxRows); i--) frag.append(row(batch[i]));
    list.prepend(frag);
    while (list.childElementCount > maxRows) list.lastElementChild.remove();
    list.dataset.count = String(received);
  };

  const open = async () => {
    if (!lastSeq) {
      // Without a resume point the stream starts live, and its first id:
      // comes in a comment a page cannot read: take the log's end now so
      // that a pause before the first event still resumes without a gap.
      try { lastSeq = (await api('/health')).max_seq || 0; } catch { /* resume from live */ }
    }
    const q = new URLSearchParams(params);
    if (lastSeq) q.set('after', String(lastSeq));
    es = new EventSource(`/stream?${q}`);
    es.onopen = () => { status.textContent = `live${lastSeq ? ` after #${lastSeq}` : ''}`; status.className = 'status ok'; };
    es.onerror = () => {
      status.textContent = 'reconnecting…';
      status.className = 'status warn';
      if (es && es.readyState === EventSource.CLOSED) checkFilter();
    };
    es.onmessage = (m) => {
      if (m.lastEventId) lastSeq = Number(m.lastEventId);
      let e;
      try { e = JSON.parse(m.data); } catch { return; }
      if (seen.has(e.id)) return;
      if (seen.size > 20000) seen.clear(); // duplicates can only come at a reconnection
      seen.add(e.id);
      received++;
      queue.push(e);
      if (!frame) frame = requestAnimationFrame(flush);
    };
  };

  // A filter the relay refuses closes the stream: ask again as JSON to
  // show why.
  const checkFilter = async () => {
    const r = await fetch(`/stream?${params}`, { headers: { Accept: 'application/json' } });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      status.replaceChildren(errorBox({ code: body.code, message: body.detail || r.statusText }));
    } else r.body?.cancel();
  };

  const close = () => { if (es) { es.close(); es = null; } };

  pause.addEventListener('click', () => {
    if (es) {
      close();
      pause.textContent = 'Resume';
      status.textContent = `paused at #${lastSeq}`;
      status.className = 'status muted';
    } else {
      pause.textContent = 'Pause';
      open();
    }
  });

  let last = 0;
  const timer = setInterval(() => {
    rate.textContent = `${received} events · ${received - last}/s`;
    last = received;
  }, 1000);

  await open();
  return () => { close(); clearInterval(timer); if (frame) cancelAnimationFrame(frame); };
}

function row(e) {
  return h('li', { 'data-id': e.id },
    h('span', { class: 'mono muted' }, when(e.created_at).slice(11, 19)),
    h('span', { class: 'kind' }, kindName(e.kind)),
    h('span', { class: 'text' }, eventLink(e.id, preview(e) || '(empty)')),
    h('span', { class: 'who' }, agentLink(e.agent_id)));
}
