#!/usr/bin/env bash
# heartbeat.sh LABEL COMMAND...: prints "-- LABEL", runs COMMAND and, while
# it runs, prints "... LABEL: N s" every HEARTBEAT_S seconds (10 by
# default), so that a long step of make test (a package under -race, the
# first build of staticcheck, the 386 run under qemu) never leaves the
# terminal silent for longer and cannot be taken for a hang, nor can a run
# of short steps, each of which announces itself. COMMAND runs in the
# foreground, so Ctrl-C reaches it; its exit status is the script's.
set -u
label=$1
shift
every=${HEARTBEAT_S:-10}
echo "-- $label"
(
	n=0
	while sleep 1; do
		n=$((n + 1))
		if [ $((n % every)) -eq 0 ]; then
			echo "   ... $label: $n s"
		fi
	done
) &
beat=$!
trap 'kill "$beat" 2>/dev/null' EXIT
"$@"
