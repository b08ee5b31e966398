#!/usr/bin/env bash
# Makes sure redis-server is on PATH, for the tests of fleet/ (which start
# their own on a free loopback port). Where it is missing it is installed
# from Debian's redis-server package if we may install it; otherwise the
# script fails and says what to install, so that make test never passes
# with those tests skipped unseen.
#
# On a machine run by systemd the package also starts a redis-server
# service on :6379, which the tests do not use.
set -euo pipefail
if command -v redis-server >/dev/null; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "redis.sh: redis-server is missing; installing Debian's redis-server package"
	apt-get update -qq >/dev/null &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
	redis-server --version
	exit 0
fi
echo "redis.sh: redis-server is missing and cannot be installed here (not root, or no apt-get):" >&2
echo "          install Debian/Ubuntu's redis-server package, or put redis-server on PATH, and run make test again" >&2
exit 1
