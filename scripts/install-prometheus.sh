#!/usr/bin/env bash
# Install the Debian Prometheus, Alertmanager and Pushgateway packages that the ops tests run
# (tests/ops/: promtool rule tests, the dashboard and alert end-to-end tests;
# tests/evaluation/test_pushgateway_e2e.py). Idempotent: does nothing when prometheus, promtool,
# prometheus-alertmanager and prometheus-pushgateway are already on PATH. Needs root (or sudo) and a Debian/Ubuntu apt. CI calls it.
set -euo pipefail

missing=()
for bin in prometheus promtool prometheus-alertmanager prometheus-pushgateway; do
    command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-prometheus: already installed: $(prometheus --version 2>&1 | head -n1)"
    exit 0
fi
echo "install-prometheus: missing ${missing[*]}; installing from apt"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends prometheus prometheus-alertmanager prometheus-pushgateway

# The Debian packages start system services where an init system runs (not in
# containers/CI); the tests start their own instances on loopback ports, so stop
# the services if they were started to keep ports 9090/9093/9091 free.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl stop prometheus prometheus-alertmanager prometheus-pushgateway 2>/dev/null || true
fi

for bin in prometheus promtool prometheus-alertmanager prometheus-pushgateway; do
    command -v "$bin" >/dev/null 2>&1 || { echo "install-prometheus: $bin still missing" >&2; exit 1; }
done
echo "install-prometheus: installed $(prometheus --version 2>&1 | head -n1)"
