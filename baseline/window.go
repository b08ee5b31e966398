package baseline

import "time"

// windowCounts is the sum of a window: calls, failures, slow calls, slow
// failures.
type windowCounts struct{ n, f, s, sf uint64 }

func (w *windowCounts) add(fail, slow bool, sign int) {
	d := uint64(sign) // sign is +1 or -1; unsigned wrap-around makes -1 subtract
	w.n += d
	if fail {
		w.f += d
	}
	if slow {
		w.s += d
	}
	if fail && slow {
		w.sf += d
	}
}

// countWindow is the last W outcomes in a plain circular array, with running
// sums: add evicts the outcome W calls back before adding the new one.
type countWindow struct {
	fail, slow []bool
	next, len  int
	sum        windowCounts
}

func newCountWindow(size int) countWindow {
	return countWindow{fail: make([]bool, size), slow: make([]bool, size)}
}

func (w *countWindow) add(fail, slow bool) {
	if w.len == len(w.fail) {
		w.sum.add(w.fail[w.next], w.slow[w.next], -1)
	} else {
		w.len++
	}
	w.fail[w.next], w.slow[w.next] = fail, slow
	w.sum.add(fail, slow, +1)
	w.next = (w.next + 1) % len(w.fail)
}

func (w *countWindow) reset() {
	w.next, w.len, w.sum = 0, 0, windowCounts{}
}

// timeWindow keeps one bucket per second of the last B seconds. head is the
// latest second seen, so a clock that goes backwards neither records into
// the past nor brings an evicted second back (R14).
type timeWindow struct {
	sec     []int64 // the second each bucket holds; -1 when empty
	buckets []windowCounts
	head    int64
}

func newTimeWindow(seconds int) timeWindow {
	w := timeWindow{sec: make([]int64, seconds), buckets: make([]windowCounts, seconds)}
	w.reset()
	return w
}

func (w *timeWindow) second(now time.Duration) int64 {
	s := int64(now / time.Second)
	if now < 0 {
		s = 0
	}
	if s > w.head {
		w.head = s
	}
	return w.head
}

func (w *timeWindow) add(now time.Duration, fail, slow bool) {
	s := w.second(now)
	i := s % int64(len(w.sec))
	if w.sec[i] != s {
		w.sec[i], w.buckets[i] = s, windowCounts{}
	}
	w.buckets[i].add(fail, slow, +1)
}

func (w *timeWindow) sum(now time.Duration) windowCounts {
	s := w.second(now)
	var t windowCounts
	for i, bs := range w.sec {
		if bs >= 0 && s-bs < int64(len(w.sec)) {
			b := w.buckets[i]
			t.n, t.f, t.s, t.sf = t.n+b.n, t.f+b.f, t.s+b.s, t.sf+b.sf
		}
	}
	return t
}

func (w *timeWindow) reset() {
	for i := range w.sec {
		w.sec[i] = -1
	}
}
