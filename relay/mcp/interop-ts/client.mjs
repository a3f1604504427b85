// The official MCP TypeScript SDK's client against a relay's /mcp: it
// lists the tools, requires the reference relay's names beside ours, and
// calls each reference tool, checking the answers' shapes. Usage:
// node client.mjs http://127.0.0.1:PORT/mcp
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.argv[2];
if (!url) throw new Error('usage: node client.mjs <relay>/mcp');
const client = new Client({ name: 'anp2-interop-ts', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

const fail = (msg) => { console.error('FAIL: ' + msg); process.exit(1); };
const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
for (const want of ['anp2_query', 'anp2_get_capabilities', 'anp2_get_agents', 'anp2_get_stats', 'anp2_get_balance', 'query_events', 'publish_event']) {
  if (!names.includes(want)) fail(`tool ${want} missing from ${names.join(', ')}`);
}
const query = tools.find((t) => t.name === 'anp2_query');
if (query.inputSchema.properties.limit.maximum !== 200) fail('anp2_query limit schema: ' + JSON.stringify(query.inputSchema));

const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) fail(`${name}: ${res.content[0].text}`);
  return JSON.parse(res.content[0].text);
};
const stats = await call('anp2_get_stats', {});
for (const k of ['total_events', 'unique_agents', 'profile_nodes', 'visitors_only', 'by_kind']) {
  if (!(k in stats)) fail(`anp2_get_stats lacks ${k}: ${JSON.stringify(stats)}`);
}
const q = await call('anp2_query', { kind: 1, limit: 500 });
if (!Array.isArray(q.events)) fail('anp2_query: ' + JSON.stringify(q));
const agents = await call('anp2_get_agents', {});
if (!Array.isArray(agents.agents)) fail('anp2_get_agents: ' + JSON.stringify(agents));
const caps = await call('anp2_get_capabilities', {});
if (!Array.isArray(caps.capabilities)) fail('anp2_get_capabilities: ' + JSON.stringify(caps));
const bal = await call('anp2_get_balance', { agent_id: '53f0e3e0485ccdf48ba1854908a8460e13fe0e078d9066ac65aa2b597c9d7916' });
if (typeof bal.balance !== 'number') fail('anp2_get_balance: ' + JSON.stringify(bal));
const bad = await client.callTool({ name: 'anp2_get_balance', arguments: { agent_id: 'xyz' } });
if (!bad.isError) fail('anp2_get_balance accepted a bad agent_id');
await client.close();
console.log(`ok: ${names.length} tools, reference tools answered (${stats.total_events} events)`);
