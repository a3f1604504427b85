// Publish: build an event, sign it here with a key that never leaves the
// page (pasted or generated; WebCrypto Ed25519), mine its proof of work
// in a Web Worker, show the relay's dry-run violations (POST
// /events/dry-run), then publish it (POST /events).
import { h, fill, put, api, eventLink, errorBox, pre, section } from '../lib.js';
import { keyFromSeed, generateSeed, sign, check } from '../jcs.js';

const powKinds = new Set([0, 50]);

export async function render(main) {
  const seed = h('input', { id: 'pub-seed', type: 'password', size: 66, autocomplete: 'off', spellcheck: 'false', placeholder: '64 hex: the Ed25519 seed (never sent)' });
  const agent = h('code', { id: 'pub-agent' }, '—');
  const kind = h('input', { id: 'pub-kind', type: 'number', min: 0, value: 1, size: 5 });
  const pow = h('input', { id: 'pub-pow', type: 'number', min: 0, max: 28, value: 0, size: 4 });
  const content = h('textarea', { id: 'pub-content', rows: 4 }, 'Hello from the explorer');
  const tags = h('textarea', { id: 'pub-tags', rows: 2 }, '[["t","explorer"]]');
  const checkBtn = h('button', { type: 'button', id: 'pub-check' }, 'Sign and dry-run');
  const publishBtn = h('button', { type: 'button', id: 'pub-publish', disabled: true }, 'Publish');
  const out = h('div', { id: 'pub-result' });
  let key = null;
  let signed = null;

  const setKey = async () => {
    key = null;
    agent.textContent = '—';
    if (!seed.value.trim()) return;
    try {
      key = await keyFromSeed(seed.value);
      agent.textContent = key.agentID;
    } catch (err) { agent.replaceChildren(errorBox(err)); }
  };
  seed.addEventListener('change', setKey);
  const gen = h('button', { type: 'button', class: 'secondary', id: 'pub-generate', onclick: async () => {
    seed.value = generateSeed();
    seed.type = 'text';
    await setKey();
  } }, 'Generate a key');
  kind.addEventListener('change', () => { if (powKinds.has(Number(kind.value)) && Number(pow.value) < 12) pow.value = 12; });

  const build = async () => {
    await setKey();
    if (!key) throw new Error('paste or generate a key first');
    let t;
    try { t = JSON.parse(tags.value || '[]'); } catch { throw new Error('tags must be a JSON array of arrays of strings'); }
    if (!Array.isArray(t) || !t.every((x) => Array.isArray(x) && x.every((s) => typeof s === 'string'))) throw new Error('tags must be a JSON array of arrays of strings');
    // The relay's clock, not this machine's: created_at must be near it.
    const { now } = await api('/health');
    const e = { id: '', agent_id: key.agentID, created_at: now, kind: Number(kind.value), tags: t, content: content.value, sig: '' };
    const bits = Number(pow.value) || 0;
    if (bits > 0) {
      out.replaceChildren(h('p', { class: 'muted', id: 'pub-mining' }, `mining ${bits} bits…`));
      Object.assign(e, await mine(e, bits, (n) => { out.firstChild.textContent = `mining ${bits} bits… ${n} tries`; }));
    }
    return sign(e, key);
  };

  checkBtn.addEventListener('click', async () => {
    checkBtn.disabled = true;
    publishBtn.disabled = true;
    try {
      signed = await build();
      const v = await check(signed);
      const dry = await api('/events/dry-run', signed);
      out.replaceChildren(
        h('p', {}, v.idOK && v.sigOK ? h('span', { class: 'ok' }, '✓ signed here; id and signature re-verified') : h('span', { class: 'bad' }, '✗ local check failed')),
        dry.valid ? h('p', { class: 'ok', id: 'pub-valid' }, '✓ the relay would accept it (dry run)')
          : h('div', { id: 'pub-violations' }, h('p', { class: 'bad' }, 'The relay would refuse it:'),
            h('ul', {}, dry.violations.map((x) => h('li', {}, h('code', {}, x.code), ' ', x.detail)))),
        pre(signed));
      publishBtn.disabled = !dry.valid;
    } catch (err) {
      out.replaceChildren(errorBox(err), err.status === 422 ? h('p', { class: 'muted' }, 'The envelope is malformed (422).') : null);
    } finally { checkBtn.disabled = false; }
  });

  publishBtn.addEventListener('click', async () => {
    publishBtn.disabled = true;
    try {
      const r = await api('/events', signed);
      out.prepend(h('p', { class: 'ok', id: 'pub-accepted' }, `✓ ${r.duplicate ? 'already stored' : 'accepted'}: `, eventLink(signed.id, signed.id)));
    } catch (err) { out.prepend(errorBox(err)); }
  });

  fill(main, h('h1', {}, 'Publish'),
    h('p', { class: 'muted' }, 'The key stays in this page: it signs here and is never sent. Proof of work is mined in a background worker; the relay\'s dry run lists every rule the event breaks before you publish.'),
    section('Key', h('div', { class: 'row' }, seed, gen), h('p', {}, 'agent_id: ', agent)),
    section('Event',
      h('div', { class: 'row' }, h('label', {}, 'kind', kind), h('label', {}, 'proof of work (bits)', pow)),
      h('label', {}, 'content', content), h('label', {}, 'tags (JSON)', tags),
      h('div', { class: 'row' }, checkBtn, publishBtn)),
    out);
}

function mine(e, bits, progress) {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL('../pow-worker.js', import.meta.url), { type: 'module' });
    w.onmessage = (m) => {
      if (m.data.done) { w.terminate(); resolve(m.data.event); } else progress(m.data.tries);
    };
    w.onerror = (err) => { w.terminate(); reject(new Error(err.message || 'the proof-of-work worker failed')); };
    w.postMessage({ event: e, bits });
  });
}
