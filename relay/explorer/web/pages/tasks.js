// Tasks: a board by status (GET /tasks), and one task's timeline from
// request to payment (GET /task/{id}) with every event of its thread
// verified in this browser and the consensus the relay derived.
import { h, fill, put, api, agentLink, eventLink, taskLink, kindName, when, section, kv, table, badge, fmt, isHex64, ApiError, pre } from '../lib.js';
import { check } from '../jcs.js';
import { reward } from './agent.js';

const columns = ['pending', 'accepted', 'completed', 'disputed', 'verified', 'paid', 'refunded', 'timed_out', 'cancelled'];

export async function render(main, _arg, query) {
  const cap = query.get('capability') || '';
  const d = await api(`/tasks?limit=500${cap ? `&capability=${encodeURIComponent(cap)}` : ''}`);
  const by = new Map(columns.map((c) => [c, []]));
  for (const t of d.tasks) (by.get(t.status) || by.set(t.status, []).get(t.status)).push(t);
  fill(main, h('h1', {}, 'Tasks'),
    h('p', { class: 'muted' }, `${d.count} tasks${cap ? ` for ${cap}` : ''}, newest first in each column (GET /tasks).`),
    h('div', { class: 'board', id: 'task-board' }, [...by].filter(([, list]) => list.length).map(([status, list]) =>
      h('div', { class: 'col', 'data-status': status }, h('h2', {}, `${status.replace('_', ' ')} · ${list.length}`),
        list.map((t) => h('div', { class: 'card' },
          taskLink(t.task_id, t.capability || '(no capability)'), h('br'),
          h('span', { class: 'muted' }, when(t.created_at)), ' ', reward(t.reward), h('br'),
          agentLink(t.requester), t.provider ? [' → ', agentLink(t.provider)] : null))))),
    d.count === 0 ? h('p', { class: 'muted' }, 'No tasks yet.') : null);
}

export async function renderTask(main, id) {
  if (!isHex64(id)) throw new ApiError(400, 'invalid_parameter', 'a task id is 64 lowercase hex characters');
  const t = await api(`/task/${id}`);
  const full = new Map();
  for (const k of ['accepts', 'results', 'verifies', 'payments', 'cancels']) for (const e of t[k] || []) full.set(e.id, e);
  if (t.request) full.set(t.request.id, t.request);
  const checks = new Map(await Promise.all([...full.values()].map(async (e) => [e.id, await check(e)])));
  const statusAt = new Map(t.history.filter((x) => x.event_id).map((x) => [x.event_id, x]));
  const c = t.consensus || {};
  fill(main, 
    h('h1', {}, 'Task ', h('code', {}, id)),
    h('p', {}, h('span', { class: 'pill', id: 'task-status' }, t.status), t.phase ? h('span', { class: 'pill' }, t.phase) : null,
      ' ', t.capability, ' requested by ', agentLink(t.requester), t.provider ? [' · provider ', agentLink(t.provider)] : null),
    h('div', { class: 'grid' },
      section('Terms', kv([
        ['reward', reward(t.reward)],
        ['deadline', when(t.deadline_unix)],
        ['high stakes', t.high_stakes ? 'yes (M-of-N consensus)' : 'no (unanimous)'],
        ['payment', t.payment ? `${t.payment.disposition} ${t.payment.amount || ''} ${t.payment.currency || ''} (${t.payment.payment_method})` : '—'],
      ])),
      section('Consensus', kv([
        ['verdict', h('span', { id: 'task-consensus', class: c.verdict === 'passed' ? 'ok' : c.verdict ? 'bad' : 'muted' }, c.verdict || 'none yet')],
        ['rule', c.rule],
        ['verifiers', `${c.verifiers ?? 0}${c.threshold ? `, threshold ${fmt(c.threshold)}` : ''}`],
        c.counts ? ['counts', Object.entries(c.counts).map(([k, v]) => `${k} ${v}`).join(', ') || '—'] : null,
        c.window_end ? ['window ends', when(c.window_end)] : null,
      ]),
      t.verdicts && t.verdicts.length ? table(['verifier', 'verdict', 'weight', 'counts'], t.verdicts.map((v) =>
        [agentLink(v.verifier), v.verdict, fmt(v.weight), v.counts ? 'yes' : `no${v.reason ? ` (${v.reason})` : ''}`])) : null)),
    section('Timeline', h('ol', { class: 'timeline', id: 'task-timeline' }, t.event_refs.map((ref) => {
      const v = checks.get(ref.event_id);
      const tr = statusAt.get(ref.event_id);
      return h('li', { class: ref.counts ? '' : 'nocount' },
        h('strong', {}, kindName(ref.kind)), ' ', eventLink(ref.event_id), ' by ', agentLink(ref.agent_id), ' ', h('span', { class: 'muted' }, when(ref.created_at)), h('br'),
        ref.counts ? h('span', { class: 'pill ok' }, 'counts') : h('span', { class: 'pill bad' }, `does not count${ref.reason ? `: ${ref.reason}` : ''}`),
        tr ? h('span', { class: 'pill' }, `→ ${tr.status}`) : null,
        v ? [' ', badge(v.idOK && v.sigOK, 'id and signature verified here', 'id or signature does not verify')] : null);
    })),
    h('h3', {}, 'Status history'),
    table(['at', 'status', 'event'], t.history.map((x) => [when(x.at), x.status + (x.verdict ? ` (${x.verdict})` : ''), x.event_id ? eventLink(x.event_id) : 'deadline or window']))),
    h('details', {}, h('summary', {}, 'The request'), pre(t.request)),
  );
}
