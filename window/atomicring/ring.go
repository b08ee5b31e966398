// Package atomicring is a lock-free, allocation-free count-based sliding
// window for use on its own: the counts of the last W outcomes (calls), W in
// 1..MaxSize, exact and never torn. It is the window casbreaker's breaker
// keeps for a count-based policy, without the breaker's side of it (the
// trip decided in the step that records an outcome, which lives in the
// module's internal packages).
//
// Every outcome carries a generation, as the breaker's permits do: a ring
// holds one generation at a time, the first outcome of a newer generation
// starts an empty window, and an outcome of an older one is stale and
// dropped. A caller with no use for generations records every outcome
// under the same one.
package atomicring

import (
	ring "github.com/casbreaker/casbreaker/internal/window/atomicring"
	"github.com/casbreaker/casbreaker/window"
)

// MaxSize is the largest window size, in calls: the whole aggregate lives in
// one 64-bit word, and 255 is the largest size whose counts still fit there.
const MaxSize = ring.MaxSize

// ErrSize is returned, wrapped with the rejected size, by New for a window
// size outside 1..MaxSize. Test for it with errors.Is.
var ErrSize = ring.ErrSize

// Ring is a count-based sliding window over the last W calls.
//
// Only the low 16 bits of a generation are kept. Newer and older are
// decided by serial-number arithmetic on them: a generation 1..2^15-1 ahead
// of the ring's is newer, one 2^15..2^16-1 ahead is older, and one 2^16
// apart is the same.
//
// A Ring made by New holds generation 0 with an empty window. The zero
// Ring is not usable: Record on it panics with a message naming New, and
// its Snapshot is empty. All methods of a Ring made by New are safe for
// concurrent use with each other, allocate nothing, never block (lock-free:
// a call retries only after another call's commit) and never panic.
type Ring struct {
	r *ring.Ring
}

// New returns an empty ring of size calls that holds generation 0. It
// returns an error wrapping ErrSize when size is outside 1..MaxSize; it
// never panics.
func New(size int) (*Ring, error) {
	r, err := ring.New(size)
	if err != nil {
		return nil, err
	}
	return &Ring{r: r}, nil
}

// Record adds one outcome under generation gen: a call that failed or not,
// and was slow or not. It returns the window's counts right after the
// outcome entered it and true: the state committed by the compare-and-swap
// that added it, so it includes this call and every call recorded before
// it. An outcome of a generation older than the ring's is stale: nothing
// changes, and Record returns the zero Counts and false. A newer generation
// empties the window first. It panics, naming New, on a zero Ring.
func (r *Ring) Record(gen uint32, failure, slow bool) (window.Counts, bool) {
	if r.r == nil {
		panic("atomicring: Ring used without New: make one with atomicring.New")
	}
	return r.r.Record(gen, failure, slow)
}

// Snapshot returns the window's counts if the ring holds generation gen
// (low 16 bits), and the zero Counts otherwise: a newer generation's window
// starts empty and an older one's is gone. It is one atomic load, never
// torn; on a zero Ring it returns the zero Counts.
func (r *Ring) Snapshot(gen uint32) window.Counts {
	if r.r == nil {
		return window.Counts{}
	}
	return r.r.Snapshot(gen)
}

// Size returns the window size W in calls, as given to New; 0 for the zero
// Ring.
func (r *Ring) Size() int {
	if r.r == nil {
		return 0
	}
	return r.r.Size()
}
