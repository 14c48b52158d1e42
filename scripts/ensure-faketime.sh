#!/usr/bin/env bash
# Makes sure libfaketime is installed for the integration test that runs `sync` with a clock off
# the API's (test/integration/clock-skew.test.ts runs the child under `faketime`), installing
# Debian's `faketime` package (which brings `libfaketime`) if it is missing, and prints the
# version found. Safe to run again and again. `--missing` prints the package it would install
# (nothing when all is there) and installs nothing: scripts/ensure-test-tools.sh asks every
# ensure-*.sh this way.
set -euo pipefail

fail() { echo "ensure-faketime: $*" >&2; exit 1; }

find_bin() {
  local path
  if path=$(command -v faketime 2>/dev/null) && [[ -x "$path" ]]; then echo "$path"; return 0; fi
  if [[ -x /usr/bin/faketime ]]; then echo /usr/bin/faketime; return 0; fi
  return 1
}

if [[ ${1:-} == --missing ]]; then find_bin >/dev/null || echo faketime; exit 0; fi

if ! find_bin >/dev/null; then
  echo "ensure-faketime: faketime not found; installing the faketime package"
  command -v apt-get >/dev/null || fail "apt-get is not available; install libfaketime with your package manager"
  [[ $(id -u) -eq 0 ]] || fail "not root; run: sudo apt-get install -y --no-install-recommends faketime"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update || fail "apt-get update failed"
  apt-get install -y --no-install-recommends faketime </dev/null || fail "apt-get install faketime failed"
fi

bin=$(find_bin) || fail "the faketime package is installed but faketime is still not found"
echo "ensure-faketime: $("$bin" --version 2>&1 | grep -m1 .) ($bin)"
