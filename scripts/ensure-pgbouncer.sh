#!/usr/bin/env bash
# Makes sure PgBouncer is installed for the integration tests that put it between the exporter
# and PostgreSQL (they start their own, on a free port), installing Debian's `pgbouncer` package
# if it is missing, and prints the version found. Looks on PATH, then at /usr/sbin/pgbouncer
# (where Debian puts it, off a normal user's PATH). Safe to run again and again. `--missing`
# prints the package it would install (nothing when all is there) and installs nothing:
# scripts/ensure-test-tools.sh asks every ensure-*.sh this way.
#
# The package's postinst would start a system PgBouncer on :6432 where it can; as in
# scripts/ensure-prometheus.sh, a policy-rc.d forbids service starts during the install and
# whatever policy-rc.d was there before is put back afterwards.
set -euo pipefail

fail() { echo "ensure-pgbouncer: $*" >&2; exit 1; }

find_bin() {
  local path
  if path=$(command -v pgbouncer 2>/dev/null) && [[ -x "$path" ]]; then echo "$path"; return 0; fi
  if [[ -x /usr/sbin/pgbouncer ]]; then echo /usr/sbin/pgbouncer; return 0; fi
  return 1
}

if [[ ${1:-} == --missing ]]; then find_bin >/dev/null || echo pgbouncer; exit 0; fi

if ! find_bin >/dev/null; then
  echo "ensure-pgbouncer: pgbouncer not found; installing the pgbouncer package"
  command -v apt-get >/dev/null || fail "apt-get is not available; install pgbouncer with your package manager"
  [[ $(id -u) -eq 0 ]] || fail "not root; run: sudo apt-get install -y --no-install-recommends pgbouncer"

  # Exit 101 = "action forbidden" for invoke-rc.d/deb-systemd-invoke: the postinst starts no service.
  policy=/usr/sbin/policy-rc.d
  saved_policy=""
  if [[ -e $policy ]]; then
    saved_policy=$(mktemp)
    cp -p "$policy" "$saved_policy"
  fi
  restore_policy() {
    if [[ -n $saved_policy ]]; then cp -p "$saved_policy" "$policy" && rm -f "$saved_policy"; else rm -f "$policy"; fi
  }
  trap restore_policy EXIT
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"

  export DEBIAN_FRONTEND=noninteractive
  apt-get update || fail "apt-get update failed"
  apt-get install -y --no-install-recommends pgbouncer </dev/null || fail "apt-get install pgbouncer failed"
fi

# As root the tests run PgBouncer as the `postgres` OS user (PgBouncer refuses root).
if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
  fail "running as root but there is no 'postgres' OS user to run PgBouncer as; create one: useradd --system postgres"
fi

bin=$(find_bin) || fail "the pgbouncer package is installed but /usr/sbin/pgbouncer is still not found"
echo "ensure-pgbouncer: $("$bin" --version 2>&1 | head -n1) ($bin)"
