// Package dropin holds the tests that replay the network's own clients'
// requests (the reference repository's SDK, MCP server, LangChain tools,
// browser extension and seed agents, SPEC §1 and decisions D17) against a
// relay and check what those clients read back. It has no code of its own.
package dropin
