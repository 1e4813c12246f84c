#!/usr/bin/env bash
# The end-to-end tests (test/e2e/): installs their tools if missing (e2e/install.sh), then runs
# them against the compiled tests in out/ (npm run compile first).  Screenshots and the
# code-server log land in vscode-client/e2e-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./e2e/install.sh
# shellcheck source=/dev/null
source .e2e-tools/env.sh
status=0
npx mocha --config .mocharc.e2e.json || status=$?
echo "e2e: $(( $(date +%s) - start )) s in all (tools, packaging, tests); screenshots in vscode-client/e2e-artifacts/"
exit "$status"
