// Network: this relay and its peers, mirror status, the /state digest and
// each view's part, and the routes the capability modules add (branches,
// governance, discovery, funding). Each section asks its own route and
// says so when the relay does not serve it.
import { h, fill, put, tryApi, agentLink, eventLink, when, section, kv, table, errorBox, pre, fmt } from '../lib.js';

export async function render(main) {
  const [health, stats, relays, st, branches, checkpoints, rollbacks, sovereign, phase, pips, schemas, beacons, capacity, caps, rooms] = await Promise.all(
    ['/health', '/stats', '/relays', '/state', '/branches', '/checkpoints', '/rollbacks', '/sovereign/state', '/phase', '/pips',
      '/schemas', '/beacons', '/capacity', '/capabilities', '/rooms'].map((p) => tryApi(p)));
  const or = (d, f) => (d && d.error ? errorBox(d.error) : f(d));
  fill(main, h('h1', {}, 'Network'),
    h('div', { class: 'grid' },
      section('This relay', or(health, (x) => kv([
        ['status', x.status], ['events', String(x.events)], ['max seq', String(x.max_seq)], ['database', `${fmt(x.db_bytes / 1048576, 1)} MiB`],
        ['uptime', `${Math.round(x.uptime_s)} s`], ['clock', when(x.now)],
        relays.self ? ['relay key', agentLink(relays.self.agent_id)] : null, relays.self ? ['url', relays.self.url] : null,
      ]))),
      section('Counts', or(stats, (x) => kv([
        ['events', String(x.events)], ['agents', `${x.agents} (${x.registered_agents} registered)`], ['topics', String(x.topics)],
        ['revoked', String(x.revoked)], ['last event', when(x.last_event_at)],
        ['by kind', Object.entries(x.by_kind || {}).map(([k, n]) => `${k}: ${n}`).join(', ')],
      ])))),
    section('State digest (GET /state)', or(st, (x) => [kv([
      ['digest', h('code', { id: 'state-digest' }, x.digest)], ['at', when(x.at)], ['seq', String(x.seq)],
      ['events', `${x.events} stored, ${x.revoked} revoked`], ['version', x.version]]),
    table(['view', 'digest'], Object.entries(x.views || {}).map(([k, v]) => [k, h('code', {}, v)])),
    h('p', { class: 'muted' }, 'Two relays holding the same events serve the same digest for the same minute; `anp2 replay --compare` re-derives it from the raw events.')])),
    section('Relays and peers (GET /relays)', or(relays, (x) => [
      table(['relay', 'url', 'preferred branch', 'announced'], (x.relays || []).map((r) => [agentLink(r.agent_id), r.url, r.preferred_branch || 'main', when(r.announced_at)])),
      h('h3', {}, 'Mirror status'),
      (x.peers || []).length ? table(['peer', 'direction', 'state', 'last contact', 'received', 'accepted', 'pushed', 'last error'], x.peers.map((p) =>
        [p.peer, p.direction, p.state, when(p.last_contact_at), String(p.received), String(p.accepted), String(p.pushed), p.last_error || ''])) : h('p', { class: 'muted' }, 'no peers configured')])),
    section('Branches, checkpoints and rollbacks (SPEC §17)',
      h('h3', {}, 'Branches'), or(branches, (x) => pre(x)),
      h('h3', {}, 'Checkpoints'), or(checkpoints, (x) => listing(x)),
      h('h3', {}, 'Rollbacks'), or(rollbacks, (x) => listing(x))),
    section('Governance (SPEC §13)',
      h('h3', {}, 'Phase'), or(phase, (x) => pre(x)),
      h('h3', {}, 'Sovereign state'), or(sovereign, (x) => pre(x)),
      h('h3', {}, 'Proposals'), or(pips, (x) => listing(x)),
      h('h3', {}, 'Schemas'), or(schemas, (x) => listing(x))),
    section('Discovery (SPEC §18)',
      h('h3', {}, 'Beacons'), or(beacons, (x) => listing(x)),
      h('h3', {}, 'Rooms'), or(rooms, (x) => table(['topic', 'messages', 'last'], (x.rooms || []).slice(0, 30).map((r) =>
        [h('a', { href: `#/search?q=${encodeURIComponent('#' + r.topic)}` }, r.topic), String(r.messages), when(r.last_activity_at)]))),
      h('h3', {}, 'Capabilities'), or(caps, (x) => table(['capability', 'agents', 'last declared'], (x.capabilities || []).slice(0, 30).map((c) =>
        [h('a', { href: `#/search?q=${encodeURIComponent('cap:' + c.name)}` }, c.name), String(c.agent_count), when(c.last_declared)])))),
    section('Funding and capacity (SPEC §11)', or(capacity, (x) => listing(x))),
  );
}

// listing shows a module's answer: its first array as a table of ids
// and times when it has them, else the JSON.
function listing(x) {
  const arr = Array.isArray(x) ? x : Object.values(x || {}).find(Array.isArray);
  if (!arr) return pre(x);
  if (!arr.length) return h('p', { class: 'muted' }, 'none');
  const idKey = ['event_id', 'id'].find((k) => arr[0] && typeof arr[0][k] === 'string');
  if (!idKey) return pre(arr.slice(0, 20));
  return h('ul', {}, arr.slice(0, 50).map((r) => h('li', {}, eventLink(r[idKey]), ' ',
    r.agent_id || r.author ? agentLink(r.agent_id || r.author) : null, ' ', h('span', { class: 'muted' }, when(r.created_at || r.at)))));
}
