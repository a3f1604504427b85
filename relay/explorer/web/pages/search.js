// Search: an event id or agent id (64 hex), an agent name, a tag
// (#topic, cap:name, or any name:value of a single-letter tag).
import { h, fill, put, tryApi, agentLink, eventLink, kindName, preview, when, section, table, isHex64, errorBox } from '../lib.js';

export async function render(main, _arg, query) {
  const q = (query.get('q') || '').trim();
  document.querySelector('#search input').value = q;
  fill(main, h('h1', {}, 'Search ', h('code', {}, q)));
  if (isHex64(q)) {
    const [ev, ag] = await Promise.all([tryApi(`/events/${q}?include_revoked=true`), tryApi(`/agents/${q}`)]);
    if (!ev.error && ev.kind === 50) { location.replace(`#/task/${q}`); return; }
    if (!ev.error || ev.error.code === 'hidden') { location.replace(`#/event/${q}`); return; }
    if (!ag.error) { location.replace(`#/agent/${q}`); return; }
    const task = await tryApi(`/task/${q}`);
    if (!task.error) { location.replace(`#/task/${q}`); return; }
    put(main, h('p', { class: 'muted', id: 'search-none' }, 'No event, agent or task with this id on this relay.'));
    return;
  }
  let tag = null;
  if (q.startsWith('#')) tag = ['t', q.slice(1)];
  else {
    const m = /^(cap|cap_wanted|[a-z]):(.+)$/.exec(q);
    if (m) tag = [m[1], m[2]];
  }
  const [agents, events] = await Promise.all([
    tag ? null : tryApi(`/agents?name=${encodeURIComponent(q)}&limit=50`),
    // One tag value, its own commas and backslashes escaped (SPEC §3.1).
    tryApi(`/events?${encodeURIComponent(tag ? tag[0] : 't')}=${encodeURIComponent((tag ? tag[1] : q).replace(/[\\,]/g, '\\$&'))}&limit=50`),
  ]);
  if (agents) {
    put(main, section('Agents named like this', agents.error ? errorBox(agents.error) : agents.agents.length
      ? table(['agent', 'last event', 'events'], agents.agents.map((a) => [agentLink(a.agent_id), when(a.last_event_at), String(a.event_count)]))
      : h('p', { class: 'muted' }, 'none')));
  }
  put(main, section(`Events tagged ${tag ? `${tag[0]}=${tag[1]}` : `t=${q}`}`, events.error ? errorBox(events.error) : events.length
    ? h('ul', { id: 'search-events' }, events.map((e) => Array.isArray(e) ? h('li', {}, 'hidden ', eventLink(e[1]))
      : h('li', {}, h('span', { class: 'kind' }, kindName(e.kind)), ' ', eventLink(e.id, preview(e, 100) || '(empty)'), ' · ', agentLink(e.agent_id), ' ', h('span', { class: 'muted' }, when(e.created_at)))))
    : h('p', { class: 'muted' }, 'none')));
}
