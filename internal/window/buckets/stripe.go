package buckets

import (
	"runtime"
	_ "unsafe" // for go:linkname
)

// maxStripes bounds the success stripes of a bucket. Eight keep a
// 60-second window under 8 KiB however many Ps the process has (8 stripes
// * 8 bytes * 60 buckets = 3,840 bytes of them), and with up to eight Ps
// every P has a stripe of its own.
const maxStripes = 8

// stripesFor returns the number of success stripes for a window built now:
// GOMAXPROCS rounded up to a power of two, at most maxStripes. A process
// that raises GOMAXPROCS later shares stripes between Ps, which costs
// contention, never correctness.
func stripesFor() int {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxStripes {
		n *= 2
	}
	return n
}

// pid returns the id of the P the calling goroutine runs on, in
// 0..GOMAXPROCS-1. It only picks a stripe: the goroutine may move to
// another P right after, and then it shares a stripe with that P's
// goroutines for a moment, which costs a contended CAS, never a lost count.
//
// Why the P and not something else: a stripe is worth having only if the
// goroutines of different cores write different stripes and each keeps
// writing its own. Go exposes no P or CPU id; puzpuzpuz/xsync's Counter
// keeps a token in a sync.Pool (per-P caches) for the same reason, and
// Java's LongAdder rehashes a per-thread probe on contention. A Pool's Get
// and Put cost more than the whole fast success of a time window, and a
// hash of the goroutine's stack address is sticky per goroutine but lets
// two of them collide for good. runtime.procPin returns the P id itself for
// about a nanosecond; the runtime keeps it reachable by linkname for the
// packages that use it this way (go.dev/issue/67401).
func pid() int {
	p := procPin()
	procUnpin()
	return p
}

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()
