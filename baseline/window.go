package baseline

import (
	"math"
	"time"
)

// outcome is one counted call as the windows store it: failBit, slowBit
// and, for a slow failure, both and slowFailBit, so that adding it to a sum
// takes no branch.
type outcome uint8

const (
	failBit outcome = 1 << iota
	slowBit
	slowFailBit
)

// outcomeOf encodes a counted call.
func outcomeOf(fail, slow bool) outcome {
	var o outcome
	if fail {
		o = failBit
	}
	if slow {
		o |= slowBit
		if fail {
			o |= slowFailBit
		}
	}
	return o
}

// windowCounts is the sum of a window: calls, failures, slow calls, slow
// failures.
type windowCounts struct{ n, f, s, sf uint64 }

func (w *windowCounts) add(o outcome) {
	w.n++
	w.f += uint64(o & failBit)
	w.s += uint64(o&slowBit) >> 1
	w.sf += uint64(o) >> 2
}

// remove subtracts the counted call o, which the sum holds.
func (w *windowCounts) remove(o outcome) {
	w.n--
	w.f -= uint64(o & failBit)
	w.s -= uint64(o&slowBit) >> 1
	w.sf -= uint64(o) >> 2
}

// subtract subtracts the sum c, which w holds.
func (w *windowCounts) subtract(c windowCounts) {
	w.n, w.f, w.s, w.sf = w.n-c.n, w.f-c.f, w.s-c.s, w.sf-c.sf
}

// countWindow is the last W outcomes in a plain circular array, one byte
// each, with running sums: add evicts the outcome W calls back before
// adding the new one.
type countWindow struct {
	ring []outcome
	next int  // the slot the next outcome goes to
	full bool // every slot holds an outcome of this window
	sum  windowCounts
}

func newCountWindow(size int) countWindow { return countWindow{ring: make([]outcome, size)} }

func (w *countWindow) add(o outcome) {
	if w.full {
		w.sum.remove(w.ring[w.next])
	}
	w.ring[w.next] = o
	w.sum.add(o)
	if w.next++; w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
}

func (w *countWindow) reset() {
	w.next, w.full, w.sum = 0, false, windowCounts{}
}

// timeWindow keeps one bucket per width (a second, or a fraction of one:
// core.Settings.BucketWidth) of the last B widths, and their total; the
// "seconds" below are widths. head is the latest second seen (a negative
// reading counts as second 0), so a clock that goes backwards neither
// records into the past nor brings an evicted second back (R14): an
// outcome counts in head, and the window holds the seconds head-B+1
// through head. The buckets are a ring: buckets[at] is head's, the one
// before it (circularly) head-1's, and so on; every bucket outside the
// window is zero. When head moves on, the buckets of the seconds it passes
// leave the total and are cleared, each once, so an outcome costs O(1)
// amortized and never more than O(B).
type timeWindow struct {
	buckets []windowCounts
	total   windowCounts  // the sum of buckets
	at      int           // head's bucket
	head    int64         // the latest second seen
	headEnd time.Duration // the first reading after head's second; MaxInt64 in the last second there is
	width   time.Duration // a second's length: the bucket width
}

// newTimeWindow is a window of seconds whole seconds in buckets of width,
// which divides a second.
func newTimeWindow(seconds int, width time.Duration) timeWindow {
	w := timeWindow{buckets: make([]windowCounts, seconds*int(time.Second/width)), width: width}
	w.headEnd = w.endOf(0)
	return w
}

// endOf is the first reading after second s, or math.MaxInt64 for the last
// whole second a reading can be in.
func (w *timeWindow) endOf(s int64) time.Duration {
	if s >= math.MaxInt64/int64(w.width) {
		return math.MaxInt64
	}
	return time.Duration(s+1) * w.width
}

// move makes the second of the reading now head if it is newer.
func (w *timeWindow) move(now time.Duration) {
	if now < w.headEnd { // head's second, an earlier one, or a negative reading
		return
	}
	s := int64(now / w.width)
	jump := s - w.head
	if jump <= 0 { // only in the last second a reading can be in
		return
	}
	if jump >= int64(len(w.buckets)) { // every second leaves: any bucket may be head's
		clear(w.buckets)
		w.total = windowCounts{}
	} else {
		for range jump {
			if w.at++; w.at == len(w.buckets) {
				w.at = 0
			}
			w.total.subtract(w.buckets[w.at])
			w.buckets[w.at] = windowCounts{}
		}
	}
	w.head, w.headEnd = s, w.endOf(s)
}

// addHead counts o in head's second and returns the window's counts: an
// outcome at the reading now is counted by move(now) (which the caller
// skips while now < headEnd: a call the inliner will not take) and then
// addHead, which inlines.
func (w *timeWindow) addHead(o outcome) windowCounts {
	w.buckets[w.at].add(o)
	w.total.add(o)
	return w.total
}

// sum is the window's counts at the reading now.
func (w *timeWindow) sum(now time.Duration) windowCounts {
	w.move(now)
	return w.total
}

// reset empties the window; head stays, so a clock that went backwards
// still records into it.
func (w *timeWindow) reset() {
	clear(w.buckets)
	w.total = windowCounts{}
}
