// API: the relay's OpenAPI document (GET /openapi.json, generated from its
// router), one row per operation, and the document itself.
import { h, fill, api, section, table, pre } from '../lib.js';

export async function render(main) {
  const doc = await api('/openapi.json');
  const rows = [];
  for (const path of Object.keys(doc.paths).sort()) {
    for (const [method, op] of Object.entries(doc.paths[path])) {
      const get = method === 'get' && !path.includes('{');
      rows.push([h('code', {}, method.toUpperCase()), get ? h('a', { href: path }, h('code', {}, path)) : h('code', {}, path), op.summary || '']);
    }
  }
  fill(main, h('h1', {}, 'API'),
    h('p', { class: 'muted' }, `${rows.length} operations, OpenAPI ${doc.openapi}, generated from this relay's router (`,
      h('a', { href: '/openapi.json' }, '/openapi.json'), '; each route also under /api).'),
    h('div', { id: 'api-operations' }, table(['method', 'path', 'summary'], rows)),
    h('details', {}, h('summary', {}, 'The document'), pre(doc)));
}
