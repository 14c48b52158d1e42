#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries (initdb, pg_ctl, postgres) are installed for the
# integration tests, installing Debian's `postgresql` package if they are missing, and prints
# the version found. Searches where test/helpers/postgres.ts does: `pg_config --bindir`, then
# the highest /usr/lib/postgresql/<version>/bin, then PATH. Safe to run again and again.
# `--missing` prints the package it would install (nothing when all is there) and installs
# nothing: scripts/ensure-test-tools.sh asks every ensure-*.sh this way.
set -euo pipefail

has_server() { [[ -x "$1/initdb" && -x "$1/pg_ctl" && -x "$1/postgres" ]]; }

find_bindir() {
  local dir
  if dir=$(pg_config --bindir 2>/dev/null) && has_server "$dir"; then echo "$dir"; return 0; fi
  if [[ -d /usr/lib/postgresql ]]; then
    for dir in $(ls /usr/lib/postgresql | grep -E '^[0-9]+(\.[0-9]+)?$' | sort -rV); do
      if has_server "/usr/lib/postgresql/$dir/bin"; then echo "/usr/lib/postgresql/$dir/bin"; return 0; fi
    done
  fi
  if dir=$(command -v initdb 2>/dev/null) && has_server "$(dirname "$dir")"; then dirname "$dir"; return 0; fi
  return 1
}

fail() { echo "ensure-postgres: $*" >&2; exit 1; }

if [[ ${1:-} == --missing ]]; then find_bindir >/dev/null || echo postgresql; exit 0; fi

if ! bindir=$(find_bindir); then
  echo "ensure-postgres: no PostgreSQL server binaries found; installing the postgresql package"
  command -v apt-get >/dev/null || fail "apt-get is not available; install the PostgreSQL server (initdb, pg_ctl, postgres) with your package manager"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || fail "not root and no sudo; run as root: apt-get install -y postgresql"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update || fail "apt-get update failed"
  "${sudo[@]}" apt-get install -y --no-install-recommends postgresql || fail "apt-get install postgresql failed"
  bindir=$(find_bindir) || fail "postgresql is installed but initdb/pg_ctl/postgres are still not found"
fi

# As root the tests run the server as the `postgres` OS user (PostgreSQL refuses root).
if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
  fail "running as root but there is no 'postgres' OS user to run the server as; create one: useradd --system postgres"
fi

echo "ensure-postgres: $("$bindir/postgres" --version) in $bindir"
