#!/usr/bin/env bash
# A2A interop: the official a2a-go SDK against a real relay on loopback.
set -euo pipefail
cd "$(dirname "$0")" && go test -count=1 ./...
