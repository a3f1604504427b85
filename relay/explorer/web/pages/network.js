// Network: this relay and its peers, mirror status, the /state digest and
// each view's part, and the routes the capability modules add (branches,
// governance, discovery, funding), and the transparency-log alarms of
// its witness (SPEC §21.5). Each section asks its own route and says so
// when the relay does not serve it.
import { h, fill, put, tryApi, agentLink, eventLink, when, section, kv, table, errorBox, pre, fmt } from '../lib.js';

export async function render(main) {
  const [health, stats, relays, st, branches, checkpoints, rollbacks, sovereign, phase, pips, schemas, beacons, capacity, caps, rooms, alarms] = await Promise.all(
    ['/health', '/stats', '/relays', '/state', '/branches', '/checkpoints', '/rollbacks', '/sovereign/state', '/phase', '/pips',
      '/schemas', '/beacons', '/capacity', '/capabilities', '/rooms', `/events?kinds=${KIND_TLOG_ALARM}&limit=50`].map((p) => tryApi(p)));
  const or = (d, f) => (d && d.error ? errorBox(d.error) : f(d));
  const alarmed = relays.error ? [] : [...(relays.relays || []), ...(relays.peers || [])].filter((r) => r.tlog_alarm);
  fill(main, h('h1', {}, 'Network'),
    alarmed.length ? h('p', { class: 'error', id: 'tlog-alarm-banner' }, `⚠ This relay's witness holds transparency-log alarms against ${alarmed.length} `
      + `relay${alarmed.length === 1 ? '' : 's'} or peer${alarmed.length === 1 ? '' : 's'}: two checkpoints signed by one log's key that cannot both be true (see "Transparency-log alarms" below).`) : null,
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
      table(['relay', 'url', 'preferred branch', 'announced', 'transparency log'], (x.relays || []).map((r) => [agentLink(r.agent_id), r.url, r.preferred_branch || 'main', when(r.announced_at), tlogCell(r)])),
      h('h3', {}, 'Mirror status'),
      (x.peers || []).length ? table(['peer', 'direction', 'state', 'last contact', 'received', 'accepted', 'pushed', 'last error', 'transparency log'], x.peers.map((p) =>
        [p.peer, p.direction, p.state, when(p.last_contact_at), String(p.received), String(p.accepted), String(p.pushed), p.last_error || '', tlogCell(p)])) : h('p', { class: 'muted' }, 'no peers configured')])),
    section('Transparency-log alarms (kind 24, SPEC §21.5)', alarms.error ? errorBox(alarms.error) : alarmList(alarms, relays)),
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

// KIND_TLOG_ALARM is a witness's report of two signed checkpoints of one
// log that cannot both be true (SPEC §21.5).
const KIND_TLOG_ALARM = 24;

// tlogCell marks a relay or peer this relay's witness caught in an alarm.
function tlogCell(r) {
  if (!r.tlog_alarm) return '';
  const n = r.tlog_alarms || 0;
  return h('span', { class: 'pill bad', 'data-tlog-alarms': String(n) }, `⚠ ${n} alarm${n === 1 ? '' : 's'}`);
}

// alarmList shows the kind 24 events: who reported each (anyone may
// publish a kind 24; only a relay's own report is its witness's word),
// the log, why, and the two signed checkpoints as evidence. Every field
// is shown as text.
function alarmList(events, relays) {
  const list = (Array.isArray(events) ? events : []).filter((e) => !Array.isArray(e));
  if (!list.length) return h('p', { class: 'muted' }, 'none: no witness has reported an inconsistent checkpoint to this relay');
  const known = new Map(((relays && !relays.error && relays.relays) || []).map((r) => [r.agent_id, r]));
  const self = relays && !relays.error && relays.self ? relays.self.agent_id : '';
  return h('ul', { id: 'tlog-alarms' }, list.map((e) => {
    let c = {};
    try { c = JSON.parse(e.content); } catch { /* shown raw below */ }
    if (!c || typeof c !== 'object' || Array.isArray(c)) c = {};
    const str = (v) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));
    const r = known.get(e.agent_id);
    const bySelf = e.agent_id === self;
    const by = bySelf ? 'this relay\'s witness' : r ? `the relay at ${r.url} (${r.standing})` : null;
    return h('li', { 'data-alarm-signer': bySelf ? 'self' : r ? 'relay' : 'unknown' },
      h('p', {}, h('span', { class: 'bad' }, '⚠ '), h('code', {}, str(c.origin) || '(no origin)'), ' ', h('span', { class: 'muted' }, when(e.created_at)), ' ', eventLink(e.id)),
      kv([
        ['reported by', [agentLink(e.agent_id), ' ', by ? h('span', { class: 'ok' }, by)
          : h('span', { class: 'warn' }, 'an agent that announces no relay here: anyone may publish a kind 24; only a relay\'s own report is its witness\'s word')]],
        ['detail', str(c.detail)],
      ]),
      h('details', {}, h('summary', {}, 'Evidence: the checkpoint the witness had verified, and the one it refused (signed notes; check them with the log\'s key)'),
        h('h3', {}, 'verified (old)'), pre(str(c.old)), h('h3', {}, 'refused (new)'), pre(str(c.new)),
        c.origin === undefined ? [h('h3', {}, 'content'), pre(e.content)] : null));
  }));
}
