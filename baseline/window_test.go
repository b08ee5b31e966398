package baseline

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The windows' running sums against naive models that keep every outcome
// and add up the ones inside the window at each question: random outcomes,
// resets and, for the time window, clock readings that stay in a second,
// step forwards by less or more than the window, jump to the last second
// a reading can be in, go backwards and go negative.

// counted is one outcome of a naive window.
type counted struct {
	sec        int64 // time window only: the second it counted in
	fail, slow bool
}

func naiveSum(outs []counted, keep func(counted) bool) windowCounts {
	var c windowCounts
	for _, o := range outs {
		if !keep(o) {
			continue
		}
		c.n++
		if o.fail {
			c.f++
		}
		if o.slow {
			c.s++
		}
		if o.fail && o.slow {
			c.sf++
		}
	}
	return c
}

func TestCountWindowKeepsTheLastOutcomes(t *testing.T) {
	for _, size := range []int{1, 2, 3, 7, 100} {
		rng := rand.New(rand.NewPCG(uint64(size), 1))
		w := newCountWindow(size)
		var outs []counted
		for step := range 20000 {
			if rng.IntN(500) == 0 {
				w.reset()
				outs = outs[:0]
				continue
			}
			o := counted{fail: rng.IntN(3) == 0, slow: rng.IntN(4) == 0}
			w.add(outcomeOf(o.fail, o.slow))
			outs = append(outs, o)
			last := outs[max(0, len(outs)-size):]
			if want := naiveSum(last, func(counted) bool { return true }); w.sum != want {
				t.Fatalf("window of %d, step %d: sum %+v, want %+v (the last %d outcomes)", size, step, w.sum, want, len(last))
			}
		}
	}
}

// ahead is the reading d after now, or the last one there is.
func ahead(now, d time.Duration) time.Duration {
	if now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// The total is the sum of the buckets, and of the outcomes of the last
// size seconds in buckets of the width, for every width (a "second" below
// is one width).
func TestTimeWindowTotalIsTheSumOfItsSeconds(t *testing.T) {
	widths := []time.Duration{time.Second, 100 * time.Millisecond, 125 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond}
	for i, size := range []int{1, 2, 3, 10, 60, 300, 1, 7, 30, 360} {
		width := widths[i%len(widths)]
		buckets := int64(size) * int64(time.Second/width)
		lastSecond := math.MaxInt64 / int64(width)
		rng := rand.New(rand.NewPCG(uint64(size), 2))
		w := newTimeWindow(size, width)
		var outs []counted
		head := int64(0) // the newest second seen; a negative reading is second 0
		now := time.Duration(0)
		for step := range 50000 {
			switch r := rng.IntN(100); {
			case r < 40: // within about a second of the width
				now = ahead(now, time.Duration(rng.Int64N(int64(width))))
			case r < 55: // up to a little over the window
				now = ahead(now, time.Duration(rng.Int64N(int64(size+2)))*time.Second)
			case r < 60: // far ahead
				now = ahead(now, time.Duration(rng.Int64N(int64(100*size)))*time.Second)
			case r < 70: // backwards
				now -= time.Duration(rng.Int64N(int64(size+2) * int64(time.Second)))
			case r < 72: // negative
				now = -time.Duration(rng.Int64N(int64(time.Hour)))
			case r < 73: // the last second a reading can be in
				now = math.MaxInt64 - time.Duration(rng.Int64N(int64(2*width)))
			case r < 74: // back to the start
				now = 0
			}
			s := int64(now / width)
			if now < 0 {
				s = 0
			}
			var got windowCounts
			switch r := rng.IntN(100); {
			case r < 1: // a transition: no reading
				w.reset()
				outs = outs[:0]
				continue
			}
			head = max(head, s)
			switch r := rng.IntN(100); {
			case r < 20:
				got = w.sum(now)
			default:
				o := counted{sec: head, fail: rng.IntN(3) == 0, slow: rng.IntN(4) == 0}
				w.move(now)
				got = w.addHead(outcomeOf(o.fail, o.slow))
				outs = append(outs, o)
			}
			want := naiveSum(outs, func(o counted) bool { return head-o.sec < buckets })
			if got != want {
				t.Fatalf("window of %d s at %v, step %d, reading %v (head second %d): counts %+v, want %+v", size, width, step, now, head, got, want)
			}
			var sum windowCounts
			for _, b := range w.buckets {
				sum.n, sum.f, sum.s, sum.sf = sum.n+b.n, sum.f+b.f, sum.s+b.s, sum.sf+b.sf
			}
			if sum != w.total || w.head != head {
				t.Fatalf("window of %d s at %v, step %d: buckets add up to %+v, total %+v; head %d, want %d", size, width, step, sum, w.total, w.head, head)
			}
			if head == lastSecond && rng.IntN(20) == 0 { // nowhere left to go: start again
				w, outs, head, now = newTimeWindow(size, width), outs[:0], 0, 0
			}
		}
	}
}
