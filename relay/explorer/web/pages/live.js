// Live: GET /stream (SPEC §7) with its filters, pausable. It opens with
// the newest stored events that match (GET /events, limit 50), read after
// taking the log's end from /health, then streams from that end: what was
// stored after it comes through the stream, and an event both answered by
// the query and replayed by the stream is shown once (by id). Pausing closes
// the EventSource and keeps the last log sequence seen; resuming reopens
// it with after=<that seq>, so the relay replays what was missed. Rows
// are added once per animation frame and the list is capped, so a fast
// stream (hundreds of events a second) never blocks the page.
import { h, fill, put, api, agentLink, eventLink, kindName, preview, when, errorBox } from '../lib.js';

const fields = ['kinds', 'authors', 't', 'e', 'p', 'cap', 'filter', 'since', 'branch'];
const maxRows = 300;
const recentRows = 50;

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
    h('p', { class: 'muted' }, `The newest ${recentRows} stored events, then events as the relay stores them (GET /stream). Filters are those of /stream; pausing keeps your place and resuming replays what you missed.`),
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

  // The newest stored events that match, shown before the stream opens;
  // they are newest first by created_at, as GET /events answers.
  const loadRecent = async () => {
    const { query: q, check } = storedQuery(params);
    if (!q) return;
    let evs;
    try { evs = await api(`/events?${q}`); } catch { return; } // the stream's own check shows a bad filter
    if (!Array.isArray(evs)) evs = evs.events || [];
    const frag = document.createDocumentFragment();
    for (const e of evs.filter(check).slice(0, recentRows)) {
      if (seen.has(e.id)) continue;
      seen.add(e.id);
      const r = row(e);
      r.dataset.stored = '1';
      frag.append(r);
    }
    list.append(frag);
  };

  const open = async () => {
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

  // Without a resume point the stream starts live, and its first id:
  // comes in a comment a page cannot read: take the log's end first, so
  // that the stored query and the stream meet there without a gap, and a
  // pause before the first event still resumes from it.
  try { lastSeq = (await api('/health')).max_seq || 0; } catch { /* resume from live */ }
  await loadRecent();
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

// storedQuery turns the page's /stream filters into a GET /events query
// for the newest events, and a check for the conditions GET /events cannot
// express. Each filter= clause (an AND condition, SPEC §7) becomes that
// axis's list parameter when the list is still free; the clause's value
// keeps its escapes (\, and \\), which §3.1's lists read the same way.
// Every clause is also checked on the answer, so a repeated axis narrows
// it as on the stream (then the query asks for GET /events' maximum, 1000,
// of which the newest 50 that pass are kept). No query for an unknown axis.
export function storedQuery(params) {
  const q = new URLSearchParams();
  for (const [k, v] of params) if (k !== 'filter') q.set(k, v);
  const axisParam = { kind: 'kinds', author: 'authors', id: 'ids', e: 'e', p: 'p', t: 't', cap: 'cap' };
  const clauses = splitClauses(params.get('filter') || '');
  let narrowed = false; // a clause left to the check: ask for more, keep 50
  for (const c of clauses) {
    const name = axisParam[c.axis];
    if (!name) return { query: '', check: () => false }; // the stream refuses it and says why
    if (!q.has(name)) q.set(name, c.raw);
    else narrowed = true;
  }
  q.set('limit', String(narrowed ? 1000 : recentRows));
  const check = (e) => clauses.every((c) => {
    switch (c.axis) {
      case 'kind': return String(e.kind) === c.value;
      case 'author': return e.agent_id === c.value;
      case 'id': return e.id === c.value;
      default: return (e.tags || []).some((t) => t[0] === c.axis && t[1] === c.value);
    }
  });
  return { query: q.toString(), check };
}

// splitClauses splits a filter= value at its unescaped commas into
// {axis, raw (escapes kept), value (unescaped)}.
function splitClauses(s) {
  const out = [];
  let raw = '';
  let value = '';
  const push = () => {
    if (!raw) return;
    const i = raw.indexOf(':');
    const j = value.indexOf(':');
    out.push({ axis: raw.slice(0, i), raw: raw.slice(i + 1), value: value.slice(j + 1) });
    raw = '';
    value = '';
  };
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (ch === '\\' && (s[i + 1] === ',' || s[i + 1] === '\\')) {
      raw += ch + s[i + 1];
      value += s[i + 1];
      i++;
    } else if (ch === ',') push();
    else { raw += ch; value += ch; }
  }
  push();
  return out;
}
