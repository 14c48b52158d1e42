#!/usr/bin/env bash
# Makes sure the machine has what `npm test` needs (npm's pretest runs this, in CI too): what
# every other scripts/ensure-*.sh beside this one installs, and the small tools below. Each
# ensure script answers `--missing` with the Debian packages it would install, one a line, and
# installs them when run without arguments; a new one is picked up here as it is added.
# When all is there it prints nothing and takes about 30 ms. As root it installs what is
# missing with apt-get (through the ensure scripts, then the small tools in one apt-get call).
# Otherwise, or with ENSURE_NO_INSTALL=1, it installs nothing and exits 1 with one line naming
# the command that would install it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$(basename "${BASH_SOURCE[0]}")

fail() { echo "ensure-test-tools: $*" >&2; exit 1; }

# Tools the tests run by name (openssl makes TLS certificates, tmux is a terminal for sync, kubectl
# renders deploy/kubernetes): the command, its Debian package, and a path also looked at, as the
# test does for kubectl (Debian 12's kubernetes-client is kubectl 1.20, which the test adapts to).
SMALL_TOOLS=('tmux tmux' 'openssl openssl' 'kubectl kubernetes-client /usr/bin/kubectl')

packages=()    # every Debian package missing, in the order found
to_run=()      # the ensure scripts that have something to install
small=()       # the packages of the small tools that are missing

# Fills the three arrays above from the ensure scripts' answers and the small tools' lookups.
find_missing() {
  packages=() to_run=() small=()
  local script answer tool package path
  for script in "$here"/ensure-*.sh; do
    [[ $(basename "$script") == "$self" ]] && continue
    answer=$(bash "$script" --missing </dev/null) || fail "scripts/$(basename "$script") --missing failed"
    [[ -z $answer ]] && continue
    [[ $answer =~ ^[a-z0-9][a-z0-9+.-]+([[:space:]]+[a-z0-9][a-z0-9+.-]+)*$ ]] ||
      fail "scripts/$(basename "$script") --missing printed other than Debian package names (does it take --missing?)"
    to_run+=("$script")
    for package in $answer; do packages+=("$package"); done
  done
  for tool in "${SMALL_TOOLS[@]}"; do
    read -r tool package path <<<"$tool"
    command -v "$tool" >/dev/null 2>&1 && continue
    [[ -n ${path:-} && -x $path ]] && continue
    small+=("$package")
    packages+=("$package")
  done
}

find_missing
[[ ${#packages[@]} -eq 0 ]] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  fail "the tests need these Debian packages, and there is no apt-get: ${packages[*]}; install their equivalents"
fi
if [[ $(id -u) -ne 0 || ${ENSURE_NO_INSTALL:-} == 1 ]]; then
  fail "missing ${packages[*]}; run: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${packages[*]}"
fi

echo "ensure-test-tools: installing ${packages[*]}"
for script in "${to_run[@]}"; do bash "$script" </dev/null; done
if [[ ${#small[@]} -gt 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${small[@]}" </dev/null || fail "apt-get install ${small[*]} failed"
fi
find_missing
[[ ${#packages[@]} -eq 0 ]] || fail "still missing after the install: ${packages[*]}"
