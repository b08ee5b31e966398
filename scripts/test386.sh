#!/usr/bin/env bash
# Runs the test suite as GOARCH=386, where go.uber.org/atomic's 64-bit words
# are not auto-aligned and a misaligned one panics ("unaligned 64-bit atomic
# operation"). Many x86-64 kernels (this project's CI among them) cannot run
# 32-bit binaries; there the tests run under qemu-user, installed from
# Debian's packages when it is missing and we may install it.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
GOARCH=386 $go test -c -o "$probe/ring.test" ./internal/window/atomicring/
if "$probe/ring.test" -test.run '^$' >/dev/null 2>&1; then
	exec env GOARCH=386 $go test -count=1 -short "$@" ./...
fi
if ! command -v qemu-i386-static >/dev/null && ! command -v qemu-i386 >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "test386: this kernel cannot run 386 binaries; installing qemu-user-static to run them"
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >/dev/null
	else
		echo "test386: this kernel cannot run 386 binaries and qemu-i386 is missing:" >&2
		echo "         install qemu-user-static (Debian/Ubuntu) and run make test again" >&2
		exit 1
	fi
fi
qemu=$(command -v qemu-i386-static || command -v qemu-i386)
# Go's asynchronous preemption signals crash the runtime under qemu-user;
# cooperative preemption is enough for these tests. Even so, qemu-user's
# signal emulation now and then kills a Go test binary ("morestack on
# gsignal", "qemu: uncaught target signal"): such a crash of the emulator is
# retried, twice at most. A misaligned atomic ("unaligned 64-bit atomic
# operation") or any test failure is never retried.
status=0
for pkg in $(GOARCH=386 $go list ./...); do
	for try in 1 2 3; do
		if out=$(env GOARCH=386 GODEBUG=asyncpreemptoff=1 $go test -count=1 -short -exec "$qemu" "$@" "$pkg" 2>&1); then
			echo "$out" | tail -n 1
			break
		fi
		if [ "$try" -lt 3 ] && ! grep -q 'unaligned 64-bit atomic' <<<"$out" &&
			grep -qE 'qemu: uncaught target signal|morestack on gsignal|fatal error: schedule: holding locks' <<<"$out"; then
			echo "test386: $pkg: the emulator crashed (try $try); running it again"
			continue
		fi
		echo "$out"
		status=1
		break
	done
done
exit $status
