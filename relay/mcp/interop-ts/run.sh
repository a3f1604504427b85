#!/usr/bin/env bash
# The official MCP TypeScript SDK (@modelcontextprotocol/sdk, from npm)
# against a real `anp2 serve` process: lists the tools and calls the
# reference relay's (SPEC §15). Needs node and npm, and the npm registry
# for the install; without node or npm it skips with a message. Not part
# of `go test` (it installs from the network); .ci/run may call it.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "mcp interop-ts: no node/npm: skipped" >&2
	exit 0
fi
work=$(mktemp -d)
pid=
# The relay writes its state and index files as it stops: wait for it to
# exit before removing the directory it writes them in.
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
(cd ../../.. && go build -o "$work/anp2" ./cmd/anp2)
# Installed in the scratch directory, so no node_modules lands in the tree.
cp package.json package-lock.json client.mjs "$work/"
(cd "$work" && npm ci --no-audit --no-fund --silent >/dev/null)
"$work/anp2" serve --addr 127.0.0.1:0 --db "$work/relay.db" 2>"$work/log" &
pid=$!
addr=
for _ in $(seq 1 300); do
	addr=$(grep -oE 'relay listening"? addr=[^ ]+' "$work/log" | head -1 | sed -E 's/.*addr=//') || true
	[ -n "$addr" ] && break
	sleep 0.1
done
[ -n "$addr" ] || { echo "mcp interop-ts: the relay did not start" >&2; cat "$work/log" >&2; exit 1; }
node "$work/client.mjs" "http://$addr/mcp"
