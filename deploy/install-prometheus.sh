#!/bin/sh
# Install Prometheus and promtool from the distribution's package when absent (idempotent, quiet).
#
# Used by .ci/run before the tests in tests/deploy/. The tests start their own Prometheus on
# 127.0.0.1 with a temporary storage directory, so the package's own service must not run: on
# Debian/Ubuntu the package would start `prometheus.service` (listening on 0.0.0.0:9090); this
# script prevents that with a temporary policy-rc.d and stops the service if it is running anyway.
set -eu

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-prometheus.sh: prometheus/promtool absent and apt-get unavailable; install them from" \
        "https://prometheus.io/download/ and put them on PATH" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

# Keep the package's service from starting (exit 101 = "action forbidden" to invoke-rc.d).
POLICY=/usr/sbin/policy-rc.d
CREATED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod +x "$POLICY"
    CREATED_POLICY=1
fi
cleanup() {
    if [ "$CREATED_POLICY" -eq 1 ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null

# Belt and braces: if a service manager started it anyway, stop and disable it.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1
