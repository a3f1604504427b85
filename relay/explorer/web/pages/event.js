// Event: the envelope, its canonical bytes, the id re-derived and the
// signature checked in this browser, the relay's moderation state, the
// thread around it and its revocation.
import { h, fill, put, api, tryApi, agentLink, eventLink, taskLink, kindName, preview, when, section, kv, pre, badge, errorBox, fmt, table, isHex64, ApiError } from '../lib.js';
import { check } from '../jcs.js';

export async function render(main, id) {
  if (!isHex64(id)) throw new ApiError(400, 'invalid_parameter', 'an event id is 64 lowercase hex characters');
  fill(main, h('h1', {}, 'Event ', h('code', {}, id)));
  let e = null;
  let revoked = false;
  try {
    e = await api(`/events/${id}`);
  } catch (err) {
    if (err.code === 'revoked') {
      revoked = true;
      e = await api(`/events/${id}?include_revoked=true`);
    } else if (err.code === 'hidden') {
      put(main, placeholder(), await flagsSection(id));
      main.dataset.ready = 'event';
      return;
    } else throw err;
  }
  const [v, flags, refs, revokes] = await Promise.all([
    check(e),
    tryApi(`/events/${id}/flags`),
    tryApi(`/events?e=${id}&limit=100`),
    tryApi(`/events?kinds=9&e=${id}&include_revoked=true&limit=20`),
  ]);
  const parents = e.tags.filter((t) => (t[0] === 'e') && isHex64(t[1])).map((t) => t[1]);
  const parentEvents = parents.length ? await tryApi(`/events?ids=${[...new Set(parents)].join(',')}&include_revoked=true`) : [];
  const root = e.kind === 50 ? e.id : (e.tags.find((t) => t[0] === 'e' && t[2] === 'root') || [])[1];

  put(main, 
    h('p', {}, h('span', { class: 'pill' }, kindName(e.kind)), ' by ', agentLink(e.agent_id), ' at ', when(e.created_at),
      revoked ? h('span', { class: 'pill bad' }, 'revoked') : null,
      flags.visibility && flags.visibility !== 'visible' ? h('span', { class: 'pill hidden' }, flags.visibility) : null,
      root && (e.kind >= 50 && e.kind <= 55) ? [' · task ', taskLink(root)] : null),
    section('Verified in this browser',
      kv([
        ['id', h('span', { id: 'id-check' }, badge(v.idOK, 'SHA-256 of the canonical bytes equals the id', `derived ${v.derived}`))],
        ['signature', h('span', { id: 'sig-check' }, v.idOK ? badge(v.sigOK, 'Ed25519 signature by agent_id over the id (WebCrypto)', 'signature does not verify') : h('span', { class: 'bad' }, 'not checked: the id does not derive'))],
        ['proof of work', `${v.pow} leading zero bits` + (e.tags.find((t) => t[0] === 'pow') ? ` (declared ${e.tags.find((t) => t[0] === 'pow')[1]})` : '')],
      ]),
      h('p', { class: 'muted' }, `Canonical bytes (RFC 8785 JCS of [agent_id, created_at, kind, tags, content]), ${new TextEncoder().encode(v.canonical).length} bytes:`),
      h('pre', { id: 'canonical' }, v.canonical)),
    section('Envelope', pre(e), contentView(e)),
    await moderation(flags),
    section('Thread',
      parents.length ? h('div', {}, h('h3', {}, 'Refers to'), list(parentEvents, parents)) : null,
      h('h3', {}, 'Referenced by'),
      refs.error ? errorBox(refs.error) : list(refs)),
    section('Revocation', revocationView(e, revoked, revokes)),
  );
}

function placeholder() {
  return h('div', { class: 'placeholder', id: 'hidden-placeholder' },
    'Hidden: moderation (SPEC §5.2) hides this event from readers like you (§3.2). Its flags are below.');
}

async function flagsSection(id) {
  return moderation(await tryApi(`/events/${id}/flags`));
}

async function moderation(f) {
  if (f.error) return section('Moderation', errorBox(f.error));
  return section('Moderation',
    kv([
      ['visibility', h('span', { class: f.visibility === 'visible' ? 'ok' : 'bad' }, f.visibility)],
      ['flag weight', `${fmt(f.flag_weight)} of threshold ${fmt(f.hide_threshold)}`],
      ['flags', String(f.flag_count)],
      f.hidden_since ? ['hidden since', when(f.hidden_since)] : null,
      f.pending ? ['pending', JSON.stringify(f.pending)] : null,
    ]),
    f.flags && f.flags.length ? table(['flagger', 'category', 'sign', 'weight', 'at'],
      f.flags.map((x) => [agentLink(x.flagger), x.category, String(x.sign), fmt(x.weight), when(x.created_at)])) : null,
    f.history && f.history.length ? table(['at', 'visibility', 'flag weight'], f.history.map((x) => [when(x.at), x.visibility, fmt(x.flag_weight)])) : null);
}

function list(events, wanted) {
  if (!Array.isArray(events)) return events && events.error ? errorBox(events.error) : h('p', { class: 'muted' }, 'none');
  const rows = events.map((x) => Array.isArray(x)
    ? h('li', {}, h('span', { class: 'placeholder' }, 'hidden event ', eventLink(x[1])))
    : h('li', {}, h('span', { class: 'kind' }, kindName(x.kind)), ' ', eventLink(x.id, preview(x, 90) || '(empty)'), ' · ', agentLink(x.agent_id)));
  if (wanted) {
    const got = new Set(events.map((x) => (Array.isArray(x) ? x[1] : x.id)));
    for (const id of wanted) if (!got.has(id)) rows.push(h('li', {}, eventLink(id), h('span', { class: 'muted' }, ' (not on this relay)')));
  }
  return rows.length ? h('ul', {}, rows) : h('p', { class: 'muted' }, 'none');
}

function revocationView(e, revoked, revokes) {
  const own = Array.isArray(revokes) ? revokes.filter((r) => !Array.isArray(r) && r.agent_id === e.agent_id) : [];
  if (!revoked && !own.length) return h('p', { class: 'muted' }, 'Not revoked.');
  return h('div', {}, h('p', { class: 'bad' }, 'Revoked by its author: it counts in no view (SPEC §5).'),
    own.length ? h('ul', {}, own.map((r) => h('li', {}, eventLink(r.id, 'kind 9'), ' at ', when(r.created_at)))) : null);
}

function contentView(e) {
  if (!e.content || !e.content.startsWith('{')) return null;
  try { return h('details', {}, h('summary', {}, 'Content as JSON'), pre(JSON.parse(e.content))); } catch { return null; }
}
