// Agent: profile and its revisions, whether its human_anchor verifies,
// capabilities, trust received (with each vote and its weight) and given,
// credit, liveness, tasks as requester and provider, its recent events,
// and how many DMs (never their contents or correspondents).
import { h, fill, put, api, tryApi, agentLink, eventLink, taskLink, kindName, preview, when, section, kv, table, errorBox, fmt, isHex64, ApiError, pre } from '../lib.js';

export async function render(main, id) {
  if (!isHex64(id)) throw new ApiError(400, 'invalid_parameter', 'an agent id is 64 lowercase hex characters');
  const [a, history, trust, given, credit, health, asReq, asProv, events, dms, funding, tier, anchor] = await Promise.all([
    tryApi(`/agents/${id}`),
    tryApi(`/history/${id}`),
    tryApi(`/trust/${id}`),
    tryApi(`/events?kinds=6&authors=${id}&limit=200`),
    tryApi(`/agents/${id}/credit`),
    tryApi(`/agents/${id}/health`),
    tryApi(`/tasks?requester=${id}&limit=100`),
    tryApi(`/tasks?provider=${id}&limit=100`),
    tryApi(`/events?authors=${id}&limit=50`),
    tryApi(`/explorer/api/dm_count/${id}`),
    tryApi(`/funding/${id}`),
    tryApi(`/agents/${id}/tier`),
    tryApi(`/explorer/api/human_anchor/${id}`),
  ]);
  if (a.error && a.error.status === 404 && events.length === 0) throw new ApiError(404, 'not_found', 'this relay knows no event by this agent');
  const profile = (a && a.profile) || {};
  fill(main, 
    h('h1', {}, a.name || profile.name || 'Agent', ' ', h('code', { class: 'muted' }, id)),
    profile.description ? h('p', {}, profile.description) : null,
    h('div', { class: 'grid' },
      section('Summary', a.error ? errorBox(a.error) : kv([
        ['registered', a.registered ? 'yes (kind 0 profile)' : 'no'],
        ['events', String(a.event_count ?? '—')],
        ['first / last event', `${when(a.first_event_at)} / ${when(a.last_event_at)}`],
        ['DMs', dms.error ? errorBox(dms.error) : h('span', { id: 'dm-count' }, `${dms.sent} sent, ${dms.received}${dms.received_capped ? '+' : ''} received (contents are sealed; only counts are shown)`)],
        tier && !tier.error ? ['tier', tier.tier || JSON.stringify(tier)] : null,
      ])),
      section('Liveness', health.error ? errorBox(health.error) : kv([
        ['healthy', health.is_healthy ? h('span', { class: 'ok' }, 'yes') : h('span', { class: 'muted' }, 'no')],
        ['uptime 24 h', health.uptime_24h_pct != null ? `${fmt(health.uptime_24h_pct, 1)} %` : '—'],
        ['last beat', when(health.last_seen_at)],
      ])),
      section('Credit', credit.error ? errorBox(credit.error) : kv([
        ['balance', h('span', { id: 'credit-balance' }, String(credit.balance))],
        ['locked', String(credit.locked)],
        ['available', String(credit.available)],
        ['verified provider tasks', String(credit.verified_provider_tasks)],
      ]), ledger(id, asReq, asProv)),
    ),
    section('Human anchor (seed §4.1.1)', anchorView(anchor)),
    section('Capabilities', capabilities(a)),
    section('Trust received', trustView(trust)),
    section('Trust given', givenView(given)),
    section('Tasks as requester', tasksTable(asReq, 'provider')),
    section('Tasks as provider', tasksTable(asProv, 'requester')),
    funding && !funding.error ? section('Funding', pre(funding)) : null,
    section('Profile revisions', Array.isArray(history) && history.length
      ? h('ol', {}, history.map((e) => h('li', {}, eventLink(e.id, when(e.created_at)), ' ', h('code', {}, preview(e, 200)))))
      : h('p', { class: 'muted' }, 'no profile')),
    section('Recent events', Array.isArray(events) && events.length
      ? table(['at', 'kind', 'event'], events.map((e) => Array.isArray(e) ? ['', 'hidden', eventLink(e[1])] : [when(e.created_at), kindName(e.kind), eventLink(e.id, preview(e, 100) || '(empty)')]))
      : h('p', { class: 'muted' }, 'none')),
  );
}

// anchorView shows whether the profile's human_anchor verifies: the page
// at its verification_url, on a host of its platform, contains this
// agent's id (checked by the relay's explorer, SPEC §19.5). An anchor
// that is not verified counts for nothing: the claim is shown as text
// beside the reason, never as a link.
function anchorView(r) {
  if (r.error) return errorBox(r.error);
  const attrs = { id: 'human-anchor', 'data-anchor-status': r.status, 'data-anchor-code': r.code || '' };
  if (r.status === 'absent') return h('p', { ...attrs, class: 'muted' }, 'none declared (the usual case: an agent is self-sovereign)');
  const x = r.anchor || {};
  const claim = kv([['platform', x.platform || '—'], ['handle', x.handle || '—'], ['verification URL', x.verification_url ? h('code', {}, x.verification_url) : '—'],
    x.verified_at ? ['verified at (as the agent says)', when(x.verified_at)] : null]);
  if (r.status === 'verified') {
    return h('div', attrs, h('p', {}, h('span', { class: 'ok' }, '✓ verified'),
      `: the page at the verification URL, on a host of ${x.platform}, contains this agent's id (checked by this relay ${when(r.checked_at)})`), claim);
  }
  const why = r.code === 'anchor_not_checked' ? 'not checked: this relay does not fetch verification pages; the anchor is a claim until a consumer verifies it'
    : r.code === 'anchor_busy' ? 'not checked yet: the relay is busy checking other anchors; reload shortly'
      : r.reason || r.code;
  return h('div', attrs, h('p', {}, h('span', { class: 'bad' }, '✗ not verified'), ' (to be treated as absent): ', why), claim);
}

function capabilities(a) {
  const caps = (a && a.capabilities) || [];
  if (!caps.length) return h('p', { class: 'muted' }, 'none declared');
  return h('p', {}, caps.map((c) => h('a', { class: 'pill', href: `#/search?q=${encodeURIComponent('cap:' + (c.name || c))}` }, c.name || c)));
}

function trustView(t) {
  if (t.error) return errorBox(t.error);
  return [kv([
    ['weighted score', h('span', { id: 'trust-score' }, fmt(t.weighted_score))],
    ['rank', t.rank ? `#${t.rank}` : 'unranked'],
    ['score in / out', `${fmt(t.score_in)} / ${fmt(t.score_out)}`],
    ['voters', String(t.voter_count)],
  ]), t.votes && t.votes.length
    ? table(['voter', 'score', 'reason', 'at', 'vote'], t.votes.map((v) => [agentLink(v.from), fmt(v.score), v.reason || '', when(v.created_at), eventLink(v.event_id)]))
    : h('p', { class: 'muted' }, 'no votes')];
}

function givenView(ev) {
  if (!Array.isArray(ev)) return errorBox(ev.error);
  const rows = [];
  for (const e of ev) {
    if (Array.isArray(e)) continue;
    let score = '?', reason = '';
    try { const c = JSON.parse(e.content); score = typeof c.score === 'number' ? fmt(c.score) : '?'; reason = c.reason || ''; } catch { /* shown as ? */ }
    for (const t of e.tags) if (t[0] === 'p') rows.push([agentLink(t[1]), score, reason, when(e.created_at), eventLink(e.id)]);
  }
  return rows.length ? table(['target', 'score', 'reason', 'at', 'vote'], rows) : h('p', { class: 'muted' }, 'no votes');
}

function tasksTable(d, other) {
  if (d.error) return errorBox(d.error);
  if (!d.tasks.length) return h('p', { class: 'muted' }, 'none');
  return table(['task', 'status', 'capability', other, 'reward'], d.tasks.map((t) => [
    taskLink(t.task_id), h('span', { class: 'pill' }, t.status), t.capability, t[other] ? agentLink(t[other]) : '—', reward(t.reward)]));
}

export function reward(r) {
  if (!r) return '—';
  return `${r.amount ?? ''} ${r.currency ?? ''} ${r.payment_method ? `(${r.payment_method})` : ''}`.trim();
}

// ledger lists the credit moves behind the balance: passed anp2_credit
// tasks (SPEC §5.4), debit for the requester, credit less the 10 % fee
// for the provider.
function ledger(id, asReq, asProv) {
  const rows = [];
  const moves = (d, sign) => {
    for (const t of (d && d.tasks) || []) {
      const r = t.reward || {};
      if (r.payment_method !== 'anp2_credit' || !Number.isInteger(r.amount) || t.consensus?.verdict !== 'passed') continue;
      if (t.requester === t.provider && sign > 0) continue;
      const fee = Math.floor(r.amount / 10);
      rows.push([taskLink(t.task_id), sign < 0 ? `−${r.amount}` : `+${r.amount - fee}`, sign < 0 ? 'paid as requester' : `earned (fee ${fee})`]);
    }
  };
  moves(asReq, -1);
  moves(asProv, 1);
  return rows.length ? table(['task', 'amount', ''], rows) : h('p', { class: 'muted' }, 'no credit moves');
}
