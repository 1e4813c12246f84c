#!/usr/bin/env bash
# `make test-vscode`: npm ci, compile, lint and the unit tests, then the end-to-end tests.  The
# end-to-end tools (e2e/install.sh: Node 24, code-server, chromium) install in the background
# meanwhile, so a fresh machine waits for the slower of the two, not for both.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p e2e-artifacts .e2e-tools
# In a process group of its own, so that a failure below stops it with its npm and compilers.
setsid ./e2e/install.sh >e2e-artifacts/install.log 2>&1 &
installer=$!
trap 'kill -- "-$installer" 2>/dev/null || true' EXIT
npm ci --no-audit --no-fund
npm run compile
npm run lint
npm test
if ! wait "$installer"; then
  cat e2e-artifacts/install.log
  echo "e2e: installing the tools failed (log above, also in vscode-client/e2e-artifacts/install.log)" >&2
  exit 1
fi
trap - EXIT
cat e2e-artifacts/install.log
./e2e/run.sh
