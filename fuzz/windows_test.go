package fuzz_test

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/internal/window/atomicring"
	"github.com/casbreaker/casbreaker/internal/window/buckets"
	"github.com/casbreaker/casbreaker/window"
)

// outcome is one recorded call of a naive window.
type outcome struct {
	sec        uint64 // buckets only: the second it was counted in
	fail, slow bool
}

func sum(outs []outcome, keep func(outcome) bool) window.Counts {
	var c window.Counts
	for _, o := range outs {
		if keep != nil && !keep(o) {
			continue
		}
		c.Calls++
		if o.fail {
			c.Failures++
		}
		if o.slow {
			c.SlowCalls++
		}
		if o.fail && o.slow {
			c.SlowFailures++
		}
	}
	return c
}

// invariant is R2's: what every Counts a window returns must satisfy.
func invariant(t *testing.T, c window.Counts, maxCalls uint64) {
	t.Helper()
	if c.Failures > c.Calls || c.SlowCalls > c.Calls || c.SlowFailures > min(c.SlowCalls, c.Failures) || c.Calls > maxCalls {
		t.Fatalf("counts %+v break R2's invariants (calls at most %d)", c, maxCalls)
	}
}

// FuzzAtomicRing: the lock-free count window against a naive slice of the
// last W outcomes (R2, R8, R11), sequentially. The naive ring holds the
// generation the atomic one documents: generation 0 when new, then the low
// 16 bits of the newest generation seen, where g is newer than the ring's
// generation r when uint16(g-r) is in 1..2^15-1, the same when
// uint16(g) == r, and older otherwise. Every Record must return exactly the
// naive aggregate right after the outcome (ok = true), or zero counts and
// ok = false for an older generation; a newer generation starts an empty
// window, and so does Reset to any other generation; every Snapshot
// must equal the naive one for the ring's generation and be zero for any
// other; every value keeps R2's invariants with calls <= W. Generations
// are drawn near the ring's (the common case), a half-range away (the
// serial-arithmetic edges), 2^16 away (the same low bits) and at random,
// with random high bits (which must be ignored).
func FuzzAtomicRing(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{3, 0, 1, 0, 3, 0, 2, 0, 1, 1, 0, 3, 2},
		{0, 0, 1, 0, 1, 0, 2, 1, 3, 0, 0},
		{0x84, 10, 0, 3, 0, 3, 0, 1, 1, 2, 2, 3, 3, 0, 5, 1, 0, 4, 3, 0, 6, 2},
		{7, 0, 0, 1, 0, 2, 6, 0, 7, 3, 1, 0, 8, 0, 0, 1, 9, 0, 0, 3},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &input{b: data}
		b0 := r.byte()
		size := 1 + int(b0%16)
		if b0&0x80 != 0 {
			size = 1 + r.intn(atomicring.MaxSize)
		}
		ring, err := atomicring.New(size)
		if err != nil {
			t.Fatalf("New(%d): %v", size, err)
		}
		var gen uint16 // the naive ring's generation
		var outs []outcome
		for step := 0; r.more() && step < 2000; step++ {
			op := r.byte()
			g := pickRingGen(r, gen)
			switch op % 5 {
			case 0, 1, 2: // Record
				o := outcome{fail: op&0x10 != 0, slow: op&0x20 != 0}
				c, ok := ring.Record(g, o.fail, o.slow)
				d := uint16(g) - gen
				if d >= 1<<15 { // older: stale
					if ok || c != (window.Counts{}) {
						t.Fatalf("step %d: Record(gen %#x) on a ring of gen %#x returned %+v %v, want a stale drop", step, g, gen, c, ok)
					}
					break
				}
				if d != 0 {
					gen, outs = uint16(g), nil // newer: a fresh window
				}
				outs = append(outs, o)
				if len(outs) > size {
					outs = outs[1:]
				}
				if want := sum(outs, nil); !ok || c != want {
					t.Fatalf("step %d: Record(gen %#x, %+v) returned %+v %v, want %+v", step, g, o, c, ok, want)
				}
				invariant(t, c, uint64(size))
			case 3: // Reset: the caller knows g is current
				ring.Reset(g)
				if uint16(g) != gen {
					gen, outs = uint16(g), nil
				}
				if c := ring.Snapshot(g); c != sum(outs, nil) {
					t.Fatalf("step %d: after Reset(gen %#x) the ring holds %+v, want %+v", step, g, c, sum(outs, nil))
				}
			default: // Snapshot
				c := ring.Snapshot(g)
				want := window.Counts{}
				if uint16(g) == gen {
					want = sum(outs, nil)
				}
				if c != want {
					t.Fatalf("step %d: Snapshot(gen %#x) of a ring of gen %#x = %+v, want %+v", step, g, gen, c, want)
				}
				invariant(t, c, uint64(size))
			}
		}
	})
}

// pickRingGen draws a generation relative to the ring's current one.
func pickRingGen(r *input, cur uint16) uint32 {
	hi := uint32(r.byte()&3) << 16 // high bits the ring must ignore
	var g uint16
	switch r.intn(10) {
	case 0, 1, 2, 3:
		g = cur
	case 4:
		g = cur + 1
	case 5:
		g = cur - 1
	case 6:
		g = cur + 1<<15 - 1 // the newest "newer"
	case 7:
		g = cur + 1<<15 // the first "older"
	case 8:
		g = cur + uint16(r.intn(4)) + 2
	default:
		g = r.u16()
	}
	return hi | uint32(g)
}

const (
	maxSec    = 1<<32 - 1 // the largest second a bucket id holds
	bucketGen = 1<<24 - 1 // the generation bits buckets keep
	// maxAdvance keeps the fuzzed generations short of a full 2^24 wrap,
	// after which a bucket untouched since generation g would alias it.
	maxAdvance = 1<<24 - 1<<10
)

// second is the bucket of a reading in buckets of width, as buckets
// documents it: a negative reading is 0, and readings past 2^32-1 widths
// saturate there.
func second(now, width time.Duration) uint64 {
	if now <= 0 {
		return 0
	}
	return min(uint64(now/width), maxSec)
}

// fuzzBucketWidths are FuzzBuckets' bucket widths, by bits 3..5 of its
// first byte (which it read no other way before widths): every width
// NewWidth accepts.
var fuzzBucketWidths = [8]time.Duration{time.Second, 100 * time.Millisecond, 125 * time.Millisecond, 200 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second}

// FuzzBuckets: the lock-free time window against a naive list of
// timestamped outcomes (R2, R8, R11, R14), sequentially, with idle gaps and
// clock steps in both directions. The naive window keeps the newest second
// seen (head, which a backwards reading never lowers) and the outcomes of
// the newest generation, each with the second it was counted in
// (max(head, floor(now))). For the newest generation, every Record must
// return true (or, once the generation has moved 2^23 or more since a
// bucket was last written, RecordCurrent must, as the breaker calls it) and
// every Snapshot must equal the sum of the outcomes whose second is within
// the last B seconds of max(head, floor(now)), however long the gap. A
// newer generation starts empty; a newer-than-newest snapshot is empty;
// outcomes of older generations, which the fuzzer records too, may be kept
// or dropped but must never show up in the newest generation's counts.
// Generations start anywhere, jump by up to 2^23-1 at a time (long
// outages), wrap past 2^24 and carry high bits the window must ignore. Readings reach negative
// values and the saturation at 2^32-1 bucket widths (136 years at 1 s).
// The window's bucket width is any NewWidth accepts.
func FuzzBuckets(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{2, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 3, 1, 4, 0, 0, 3, 0},
		{4, 0xff, 0xff, 0xff, 0, 0, 1, 1, 1, 0, 1, 1, 2, 9, 1, 0, 3, 1},
		{0x83, 5, 0, 0, 0, 0, 5, 1, 0, 9, 1, 0, 10, 2, 2, 0, 0, 3, 7, 0, 1, 2, 1},
		{1, 7, 0, 0, 0, 8, 0, 2, 200, 0, 1, 3, 9, 0, 0, 10, 0, 2, 11, 0, 3, 1},
		{1 | 1<<3, 7, 0, 0, 0, 8, 0, 2, 200, 0, 1, 3, 9, 0, 0, 10, 0, 2, 11, 0, 3, 1},    // 2 s of 100 ms buckets
		{0x83 | 4<<3, 5, 0, 0, 0, 0, 5, 1, 0, 9, 1, 0, 10, 2, 2, 0, 0, 3, 7, 0, 1, 2, 1}, // 250 ms
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &input{b: data}
		b0 := r.byte()
		width := fuzzBucketWidths[b0>>3&7]
		perSec := int(time.Second / width)
		seconds := 1 + int(b0%8)
		if b0&0x80 != 0 {
			seconds = 1 + int(r.u16())%(buckets.MaxBuckets/perSec)
		}
		w, err := buckets.NewWidth(seconds, width)
		if err != nil {
			t.Fatalf("NewWidth(%d, %v): %v", seconds, width, err)
		}
		size := seconds * perSec // buckets
		// A new window holds generation 0, empty, in every bucket. newest
		// starts anywhere (near the 2^24 wrap too) and only moves forward;
		// advanced is how far it has moved from where it started.
		var (
			newest   = r.u32() & bucketGen
			advanced uint64
			now      time.Duration
			head     uint64
			outs     []outcome
		)
		inWindow := func(cur uint64) func(outcome) bool {
			return func(o outcome) bool { return cur-o.sec < uint64(size) }
		}
		for step := 0; r.more() && step < 2000; step++ {
			op := r.byte()
			switch op % 5 {
			case 0: // move the clock
				now = moveClock(r, now, seconds, width)
			case 1, 2: // Record
				fail, slow := op&0x10 != 0, op&0x20 != 0
				var jump uint32
				switch r.intn(8) {
				case 0, 1, 2, 3:
				case 4:
					jump = 1 + uint32(r.intn(3))
				case 5: // a long outage: up to 2^23-1 generations at once
					if j := uint32(r.u32()) % (1 << 23); advanced+uint64(j) < maxAdvance {
						jump = j
					}
				default: // an older generation
					g := (newest - 1 - uint32(r.intn(3))) & bucketGen
					head = max(head, second(now, width))
					w.Record(uint32(r.byte())<<24|g, now, fail, slow) // kept or dropped, but never counted below
					continue
				}
				g := (newest + jump) & bucketGen
				if jump > 0 {
					newest, advanced, outs = g, advanced+uint64(jump), nil
				}
				hi := uint32(r.byte()) << 24
				cur := max(head, second(now, width))
				head = cur
				outs = append(outs, outcome{sec: cur, fail: fail, slow: slow})
				if !w.Record(hi|g, now, fail, slow) {
					// Sequentially, the newest generation is dropped only by a
					// bucket whose generation looks newer: one untouched while
					// the generation moved 2^23 or more. The breaker then
					// calls RecordCurrent, which must take the bucket over.
					// Strict while every generation a bucket may hold (0,
					// and those from the start's on) reads as not newer.
					if (newest-0)&bucketGen < 1<<23 && advanced+3 < 1<<23 {
						t.Fatalf("step %d: Record(gen %#x, now %v) of the newest generation was dropped, %d generations after 0", step, g, now, advanced)
					}
					if !w.RecordCurrent(hi|g, now, fail, slow) {
						t.Fatalf("step %d: RecordCurrent(gen %#x, now %v) dropped the outcome", step, g, now)
					}
				}
			case 3: // Snapshot of the newest generation
				hi := uint32(r.byte()) << 24
				cur := max(head, second(now, width))
				head = cur
				c := w.Snapshot(hi|newest, now)
				want := sum(outs, inWindow(cur))
				if c != want {
					t.Fatalf("step %d: Snapshot(gen %#x, now %v) = %+v, want %+v (head second %d, outcomes %+v)", step, newest, now, c, want, cur, outs)
				}
				invariant(t, c, uint64(len(outs)))
			default: // Snapshot of another generation: empty if newer
				g := (newest + 1 + uint32(r.intn(3))) & bucketGen
				older := r.byte()&1 == 0
				if older {
					g = (newest - 1 - uint32(r.intn(3))) & bucketGen
				}
				head = max(head, second(now, width))
				c := w.Snapshot(g, now)
				if !older && c != (window.Counts{}) {
					t.Fatalf("step %d: Snapshot of newer generation %#x = %+v, want empty", step, g, c)
				}
				invariant(t, c, ^uint64(0))
			}
		}
	})
}

// moveClock decodes a clock step: small steps, steps across whole seconds,
// idle gaps of up to several windows, steps backwards and below zero, and
// jumps to the edge of the saturation at 2^32 widths (136 years at 1 s);
// size is the window in seconds.
func moveClock(r *input, now time.Duration, size int, width time.Duration) time.Duration {
	arg := time.Duration(r.byte())
	switch r.intn(10) {
	case 0:
		return now + arg*time.Millisecond
	case 1:
		return now + time.Second
	case 2:
		return now + time.Second - 1
	case 3:
		return now + 1
	case 4:
		return now + time.Duration(size)*time.Second*arg/64 // gaps up to 4 windows
	case 5:
		return now - arg*100*time.Millisecond // backwards
	case 6:
		return -arg * time.Second // below zero
	case 7:
		return time.Duration(maxSec-int64(arg%4))*width + arg*time.Millisecond // the saturation edge
	case 8:
		return now + arg*10*time.Millisecond
	}
	return now + arg*time.Second
}
