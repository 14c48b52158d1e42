#!/usr/bin/env bash
# Makes sure the `prometheus` server and `promtool` are installed for the integration tests
# (test/helpers/prometheus.ts), installing Debian's `prometheus` package if either is missing,
# and prints the versions found. Looks on PATH, then in /usr/bin, like the test helper does.
# Safe to run again and again. `--missing` prints the package it would install (nothing when
# all is there) and installs nothing: scripts/ensure-test-tools.sh asks every ensure-*.sh this way.
#
# The package's postinst would start a system Prometheus service (on :9090) where it can. The
# tests start their own servers, so the install runs with a policy-rc.d that forbids service
# starts (whatever policy-rc.d was there before is put back afterwards), and any Prometheus
# that appeared during the install anyway is stopped by pid afterwards.
set -euo pipefail

fail() { echo "ensure-prometheus: $*" >&2; exit 1; }

find_bin() {
  local path
  if path=$(command -v "$1" 2>/dev/null) && [[ -x "$path" ]]; then echo "$path"; return 0; fi
  if [[ -x "/usr/bin/$1" ]]; then echo "/usr/bin/$1"; return 0; fi
  return 1
}

# Pids of running processes named exactly "prometheus", one a line.
prometheus_pids() { pgrep -x prometheus || true; }

if [[ ${1:-} == --missing ]]; then
  { find_bin prometheus && find_bin promtool; } >/dev/null || echo prometheus
  exit 0
fi

if ! find_bin prometheus >/dev/null || ! find_bin promtool >/dev/null; then
  echo "ensure-prometheus: prometheus or promtool not found; installing the prometheus package"
  command -v apt-get >/dev/null || fail "apt-get is not available; install prometheus and promtool with your package manager"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || fail "not root and no sudo; run as root: apt-get install -y --no-install-recommends prometheus"
    sudo=(sudo)
  fi

  before=$(prometheus_pids)
  # Exit 101 = "action forbidden" for invoke-rc.d/deb-systemd-invoke: the postinst starts no
  # service. When it may start one, Debian's init script starts Prometheus and then reports
  # "restart failed", which fails the whole install. Any existing policy-rc.d is put back after.
  policy=/usr/sbin/policy-rc.d
  saved_policy=""
  if [[ -e $policy ]]; then
    saved_policy=$(mktemp)
    "${sudo[@]}" cp -p "$policy" "$saved_policy"
  fi
  restore_policy() {
    if [[ -n $saved_policy ]]; then
      "${sudo[@]}" cp -p "$saved_policy" "$policy" && rm -f "$saved_policy"
    else
      "${sudo[@]}" rm -f "$policy"
    fi
  }
  trap restore_policy EXIT
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod 755 "$policy"

  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update || fail "apt-get update failed"
  # </dev/null: no maintainer script can wait for input. `dpkg --configure -a` first finishes a
  # half-configured prometheus left by an earlier install whose postinst failed.
  "${sudo[@]}" dpkg --configure -a </dev/null || fail "dpkg --configure -a failed"
  "${sudo[@]}" apt-get install -y --no-install-recommends prometheus </dev/null || fail "apt-get install prometheus failed"
  restore_policy
  trap - EXIT

  # Stop any Prometheus the package started anyway (e.g. a real systemd), and keep it from starting at boot.
  started=()
  for pid in $(prometheus_pids); do
    grep -qx "$pid" <<<"$before" || started+=("$pid")
  done
  if [[ ${#started[@]} -gt 0 ]]; then
    echo "ensure-prometheus: the package started Prometheus (pids ${started[*]}); stopping it"
    if command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
      "${sudo[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    fi
    "${sudo[@]}" kill -TERM "${started[@]}" 2>/dev/null || true
    for _ in $(seq 1 50); do
      alive=()
      for pid in "${started[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
      [[ ${#alive[@]} -eq 0 ]] && break
      sleep 0.1
    done
    if [[ ${#alive[@]} -gt 0 ]]; then "${sudo[@]}" kill -KILL "${alive[@]}" 2>/dev/null || true; fi
  fi
  pgrep -a -x prometheus || echo "ensure-prometheus: no Prometheus left running after the install"
fi

prometheus=$(find_bin prometheus) || fail "the prometheus package is installed but the prometheus binary is still not found"
promtool=$(find_bin promtool) || fail "the prometheus package is installed but promtool is still not found"
echo "ensure-prometheus: $("$prometheus" --version 2>&1 | head -n1) ($prometheus)"
echo "ensure-prometheus: $("$promtool" --version 2>&1 | head -n1) ($promtool)"
