#!/usr/bin/env bash
# Makes sure prometheus and promtool are on PATH, for the tests of ops/ (the
# alert rules' promtool tests and the end-to-end run against a real
# Prometheus). Where they are missing they are installed from Debian's
# `prometheus` package (which holds both) if we may install it; otherwise the
# script fails and says what to install, so that make test never passes
# with those tests skipped unseen.
#
# Only the binaries are needed: the package's recommended node exporter is
# left out. On a machine run by systemd the package also starts a
# prometheus service on :9090, which the tests do not use (they start their
# own, on a free loopback port).
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "prometheus.sh: prometheus or promtool is missing; installing Debian's prometheus package"
	apt-get update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
	prometheus --version 2>&1 | head -n 1
	exit 0
fi
echo "prometheus.sh: prometheus or promtool is missing and cannot be installed here (not root, or no apt-get):" >&2
echo "               install Debian/Ubuntu's prometheus package, or put both binaries on PATH, and run make test again" >&2
exit 1
