#!/usr/bin/env bash
# Makes sure PgBouncer (/usr/sbin/pgbouncer) is installed for the integration tests that put a
# pooler in front of the test cluster (test/helpers/pgbouncer.ts), installing Debian's
# `pgbouncer` package if it is missing, and prints the version found. Safe to run again and again.
set -euo pipefail

binary=/usr/sbin/pgbouncer

fail() { echo "ensure-pgbouncer: $*" >&2; exit 1; }

if [[ ! -x $binary ]]; then
  echo "ensure-pgbouncer: $binary not found; installing the pgbouncer package"
  command -v apt-get >/dev/null || fail "apt-get is not available; install PgBouncer with your package manager"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || fail "not root and no sudo; run as root: apt-get install -y pgbouncer"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update || fail "apt-get update failed"
  "${sudo[@]}" apt-get install -y --no-install-recommends pgbouncer || fail "apt-get install pgbouncer failed"
  [[ -x $binary ]] || fail "pgbouncer is installed but $binary is still not found"
fi

# As root the tests run PgBouncer as the `postgres` OS user (PgBouncer refuses root).
if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
  fail "running as root but there is no 'postgres' OS user to run PgBouncer as; create one: useradd --system postgres"
fi

echo "ensure-pgbouncer: $("$binary" --version | head -n 1) at $binary"
