// Moderation: the events the relay hides now (SPEC §5.2), with their
// flags, each flag's weight and the threshold. Their content is shown
// only when the relay serves it to this reader; an anonymous reader gets
// the placeholder the API gives (§3.2).
import { h, fill, put, api, tryApi, agentLink, eventLink, when, section, kv, table, fmt, errorBox } from '../lib.js';

export async function render(main) {
  const m = await api('/explorer/api/moderation');
  const flagged = await Promise.all(m.hidden.map(async (x) => [x, await tryApi(`/events/${x.event_id}/flags`), await tryApi(`/events/${x.event_id}`)]));
  fill(main, h('h1', {}, 'Moderation'),
    section('Rule', kv([
      ['hide threshold', h('span', { id: 'hide-threshold' }, `${fmt(m.hide_threshold)} = max(3, 0.001 × ${m.active_agents} active agents)`)],
      ['hidden now', h('span', { id: 'hidden-count' }, String(m.count))],
      ['evaluated at', when(m.at)],
    ]), h('p', { class: 'muted' }, 'A flag weighs clamp(1 + weighted trust of the flagger, 0, 10); an event is hidden while the summed weight reaches the threshold (with a 1 h debounce between transitions).')),
    m.count === 0 ? h('p', { class: 'muted' }, 'No event is hidden.') : null,
    h('div', { id: 'hidden-list' }, flagged.map(([x, f, e]) => section(h('span', {}, 'Hidden ', eventLink(x.event_id), ' by ', agentLink(x.author)),
      kv([
        ['flag weight', `${fmt(x.flag_weight)} ≥ ${fmt(m.hide_threshold)}`],
        ['flags', String(x.flag_count)],
        ['hidden since', when(x.hidden_since)],
      ]),
      e.error ? h('div', { class: 'placeholder' }, `["hidden", "${x.event_id}"] — ${e.error.code === 'hidden' ? 'the relay does not show this event to you (§3.2)' : e.error.message}`)
        : h('pre', {}, e.content),
      f.error ? errorBox(f.error) : table(['flagger', 'category', 'reason', 'sign', 'weight', 'at'],
        f.flags.map((fl) => [agentLink(fl.flagger), fl.category, fl.reason || '', String(fl.sign), fmt(fl.weight), when(fl.created_at)]))))));
}
