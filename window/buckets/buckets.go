// Package buckets is a lock-free, allocation-free time-based sliding window
// for use on its own: the counts of the outcomes of the last B whole
// seconds, B in 1..MaxSeconds, one bucket a second (or, made by NewWidth,
// one every 100 ms up to 1 s), on the caller's clock.
// It is the window casbreaker's breaker keeps for a time-based policy,
// without the breaker's side of it (the trip judged as each outcome is
// recorded, which lives in the module's internal packages).
//
// Every outcome carries a generation, as the breaker's permits do: a
// bucket holds outcomes of one generation, a newer generation starts an
// empty window, and a late outcome of an older one never counts in it.
// Generations are kept per bucket, not for the window as a whole: the late
// outcome is dropped where its second's bucket holds the newer generation
// already, and kept under its own generation (counted only by a Snapshot
// of that generation, until a newer one takes the bucket over) where the
// newer one has not written yet. A caller with no use for generations
// records every outcome under the same one.
package buckets

import (
	"time"

	"github.com/casbreaker/casbreaker/internal/window/buckets"
	"github.com/casbreaker/casbreaker/window"
)

// MaxSeconds is the largest window New accepts, in seconds (one hour). It
// bounds a window's memory (40 bytes a second, plus 8 a second for each
// success stripe) and the cost of Snapshot, which reads
// every bucket.
const MaxSeconds = buckets.MaxSeconds

// MaxBuckets is the most buckets NewWidth makes, whatever their width: it
// bounds memory and Snapshot's cost as MaxSeconds does for buckets of
// 1 s, so narrower buckets span less (360 s at 100 ms).
const MaxBuckets = buckets.MaxBuckets

// MinWidth is the narrowest bucket NewWidth accepts (100 ms). A width is a
// whole number of milliseconds from MinWidth to 1 s that divides 1 s: 100,
// 125, 200, 250, 500 or 1000 ms.
const MinWidth = buckets.MinWidth

// ErrSize is returned, wrapped with the rejected value, by New and NewWidth
// when the window size is outside 1..MaxSeconds, or makes more than
// MaxBuckets buckets of the width asked for. Test for it with errors.Is.
var ErrSize = buckets.ErrSize

// ErrWidth is returned, wrapped with the rejected value, by NewWidth when
// the bucket width is not one that MinWidth lists. Test for it with
// errors.Is.
var ErrWidth = buckets.ErrWidth

// Window is a time-based sliding window over the last B whole seconds of
// the caller's clock, in buckets of width w (1 s from New): an outcome at
// time now (a duration since any fixed base, as core.Clock reads) belongs
// to bucket floor(now / w), and the window at now holds the B x (1 s / w)
// buckets up to floor(now / w). A reading below zero counts as bucket 0; a
// clock that goes back is tolerated, and never brings an evicted bucket
// back.
//
// Only the low 24 bits of a generation are kept, compared with wrap-around:
// a is newer than b when (a-b) mod 2^24 is in (0, 2^23). A Window made by
// New or NewWidth starts at generation 0, and keeps up with generations that move
// forward less than 2^21 from one Record to the next, however far they go
// in all; a bigger jump may leave buckets whose generation reads as newer,
// and their seconds then drop outcomes (Record returns false).
//
// The zero Window is not usable: Record on it panics with a message naming
// New, and its Snapshot is empty. All methods of a Window made by New or
// NewWidth are safe for concurrent use with each other, allocate nothing, never block
// (lock-free) and never panic.
type Window struct {
	w *buckets.Window
}

// New returns an empty window of seconds seconds in buckets of 1 s. It
// returns an error wrapping ErrSize, naming the value, when seconds is
// outside 1..MaxSeconds; it never panics.
func New(seconds int) (*Window, error) {
	return NewWidth(seconds, time.Second)
}

// NewWidth returns an empty window of seconds seconds in buckets of width,
// seconds x (1 s / width) of them, so that it forgets an outcome within
// one width of its leaving the window rather than within a second. Its
// buckets are numbered in 32 bits from reading 0: past 2^32 widths (136
// years at 1 s, 13.6 at 100 ms) the window stops sliding, so give it
// readings from a recent base (core.NewSystemClock's), not from the Unix
// epoch. It
// returns an error wrapping ErrWidth, naming the value, when width is not
// one of those MinWidth lists, and one wrapping ErrSize when seconds is
// below 1 or makes more than MaxBuckets buckets; it never panics.
func NewWidth(seconds int, width time.Duration) (*Window, error) {
	w, err := buckets.NewWidth(seconds, width)
	if err != nil {
		return nil, err
	}
	return &Window{w: w}, nil
}

// Record counts one outcome completed at now under generation gen: a call
// that failed or not, and was slow or not. It returns true if the outcome
// was added to its second's bucket, where Snapshot counts it while that
// second is in the window, and false if it was dropped: its generation is
// older than the one its bucket holds, or a newer second took its bucket
// over while it was being recorded (its second had left the window). It
// panics, naming New, on a zero Window.
func (w *Window) Record(gen uint32, now time.Duration, failure, slow bool) bool {
	if w.w == nil {
		panic("buckets: Window used without New: make one with buckets.New")
	}
	// As the breaker does after each transition: a bucket left idle while
	// the generations moved 2^23 past it would read as newer, and drop
	// every later outcome of its second. One load, but for a sweep every
	// 2^22 generations (internal/window/buckets, Advance).
	w.w.Advance(gen)
	return w.w.Record(gen, now, failure, slow)
}

// Snapshot returns the counts of generation gen's outcomes inside the
// window at now (gen is meant to be the newest generation recorded: for an
// older one they miss the outcomes whose buckets a newer one took over), and moves the window's current second forward to now's if
// that is newer, so it never reports an outcome that had left the window
// before now. The counts are one state of the window, never torn: there is
// an order of the recorded outcomes, consistent with real time, such that
// they hold exactly those before some point of it. It retries
// only while failures or slow calls are being recorded (lock-free, not
// wait-free). On a zero Window it returns the zero Counts.
func (w *Window) Snapshot(gen uint32, now time.Duration) window.Counts {
	if w.w == nil {
		return window.Counts{}
	}
	return w.w.Snapshot(gen, now)
}

// Seconds returns the window size B in seconds, as given to New or
// NewWidth; 0 for the zero Window.
func (w *Window) Seconds() int {
	if w.w == nil {
		return 0
	}
	return w.w.Seconds()
}

// Width returns the bucket width: 1 s for a window made by New, the width
// given to NewWidth, 0 for the zero Window.
func (w *Window) Width() time.Duration {
	if w.w == nil {
		return 0
	}
	return w.w.Width()
}
