package resilience

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Timer is the companions' only source of time: it reads a monotonic clock
// (core.Clock), waits on it, and bounds contexts by it. Retry waits its
// backoff with Sleep, Bulkhead its bounded wait, TimeLimiter bounds a call
// with WithTimeout. Implementations must be safe for concurrent use.
//
// SystemTimer runs on Go's monotonic clock; ManualTimer moves only when a
// test tells it to, so no test sleeps.
type Timer interface {
	core.Clock
	// Sleep waits until d has passed on the clock, ctx is done or wake
	// receives a value, whichever comes first. It returns ctx.Err() if ctx
	// is done (before or during the wait, and then at once), and nil
	// otherwise; d <= 0 waits for nothing. A nil wake never fires.
	Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error
	// WithTimeout returns a child of parent that is done d from now on the
	// clock (its Err is then context.DeadlineExceeded), when parent is
	// done, or when the returned cancel function is called, which the
	// caller must do when the call ends.
	WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc)
}

// SystemTimer is the Timer of production code: Go's monotonic clock
// (core.SystemClock), time.Timer for Sleep and context.WithTimeout. The zero
// value is ready to use. Sleep allocates one time.Timer when it has to
// wait; WithTimeout allocates what context.WithTimeout allocates.
type SystemTimer struct{ core.SystemClock }

// Sleep waits as Timer.Sleep says, on a time.Timer that it stops before it
// returns.
func (SystemTimer) Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithTimeout is context.WithTimeout.
func (SystemTimer) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, d)
}

// ManualTimer is a Timer on a core.ManualClock, for tests, simulations and
// the examples: a wait ends when Advance moves the clock to its end (or, for
// a stepping timer, at once, having moved the clock itself), never because
// real time passed. Share its clock with a breaker (core.Config.Clock) and
// the breaker's open duration elapses as the companions wait.
//
// Make one with NewManualTimer or NewSteppingTimer; a zero ManualTimer has
// no clock and panics with a message naming them. All methods are safe for
// concurrent use.
type ManualTimer struct {
	clock *core.ManualClock
	step  bool

	mu      sync.Mutex
	changed *sync.Cond    // broadcast when a wait starts: AwaitSleepers waits for more
	waits   []*manualWait // sleeps and timeouts not yet over
	sleeps  int           // how many of waits are sleeps
	slept   []time.Duration
}

// manualWait is one pending sleep or timeout: fire ends it.
type manualWait struct {
	at    time.Duration
	sleep bool
	fire  func()
}

// NewManualTimer returns a ManualTimer on clock whose Sleep blocks until
// Advance has moved the clock to its end (or ctx ends, or wake fires). A
// test runs the sleeper on another goroutine and calls AwaitSleepers before
// Advance. A nil clock is replaced by a new one reading 0 (see Clock).
func NewManualTimer(clock *core.ManualClock) *ManualTimer {
	return newManual(clock, false)
}

// NewSteppingTimer returns a ManualTimer on clock whose Sleep, unless ctx is
// done or wake already holds a value, moves the clock forward by the whole
// d itself (ending every timeout that falls due) and returns at once, so a
// retry loop runs through its backoff on one goroutine in no real time. A nil
// clock is replaced by a new one reading 0 (see Clock).
func NewSteppingTimer(clock *core.ManualClock) *ManualTimer {
	return newManual(clock, true)
}

func newManual(clock *core.ManualClock, step bool) *ManualTimer {
	if clock == nil {
		clock = core.NewManualClock(0)
	}
	t := &ManualTimer{clock: clock, step: step}
	t.changed = sync.NewCond(&t.mu)
	return t
}

func (t *ManualTimer) mustBeNew() {
	if t.clock == nil {
		panic("resilience: ManualTimer used without NewManualTimer or NewSteppingTimer")
	}
}

// Now returns the clock's reading.
func (t *ManualTimer) Now() time.Duration {
	t.mustBeNew()
	return t.clock.Now()
}

// Clock returns the clock the timer reads and moves.
func (t *ManualTimer) Clock() *core.ManualClock { return t.clock }

// Slept returns the d of every Sleep that had to wait (d > 0 and ctx not
// done at its start), in call order, whether it ran to its end or not.
func (t *ManualTimer) Slept() []time.Duration {
	t.mustBeNew()
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.slept...)
}

// Sleep waits as Timer.Sleep says; see NewManualTimer and NewSteppingTimer
// for how the clock moves.
func (t *ManualTimer) Sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t.mustBeNew()
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	if t.step {
		select {
		case <-wake:
			return nil
		default:
		}
		t.mu.Lock()
		t.slept = append(t.slept, d)
		t.mu.Unlock()
		t.Advance(d)
		return ctx.Err() // a deadline inside the step ended the wait
	}
	done := make(chan struct{})
	w := &manualWait{at: after(t.clock.Now(), d), sleep: true, fire: func() { close(done) }}
	t.mu.Lock()
	t.slept = append(t.slept, d)
	t.add(w)
	t.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-wake:
		t.remove(w)
		return nil
	case <-ctx.Done():
		t.remove(w)
		return ctx.Err()
	}
}

// WithTimeout returns a child of parent that is done once the clock reaches
// d from now, when parent is done, or when cancel is called, whichever comes
// first, and ends as context.WithTimeout's context would: its Err and
// context.Cause are context.DeadlineExceeded at the deadline (at once for
// d <= 0), parent's Err when parent ended it, and context.Canceled after
// cancel; a context made from it (context.WithCancel, an HTTP request's)
// ends with the same Err, on another goroutine, as a context made from
// one of a type the context package does not know does. Its Deadline is
// parent's: the manual deadline has no wall-clock time.
func (t *ManualTimer) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	t.mustBeNew()
	inner, cancel := context.WithCancelCause(parent)
	ctx := &manualDeadline{Context: inner}
	expire := func() { cancel(context.DeadlineExceeded) }
	if d <= 0 {
		expire()
		return ctx, func() { cancel(context.Canceled) }
	}
	w := &manualWait{at: after(t.clock.Now(), d), fire: expire}
	t.mu.Lock()
	t.add(w)
	t.mu.Unlock()
	return ctx, func() {
		t.remove(w)
		cancel(context.Canceled)
	}
}

// after is now + d for d > 0, saturating at the largest reading instead of
// wrapping, so a very long wait never ends at once.
func after(now, d time.Duration) time.Duration {
	if now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// manualDeadline is a ManualTimer context: a cancel context that the
// deadline cancels with the cause context.DeadlineExceeded, and whose Err
// says so. The context package must not find the cancel context inside
// (Value hides it): it would end a context made from this one with the
// cancel context's own Err, context.Canceled. Not finding it, the package
// ends such a context with this one's Err, through AfterFunc.
type manualDeadline struct {
	context.Context // the cancel context
}

func (c *manualDeadline) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// Value is the cancel context's, except that the context package's lookup
// of its innermost cancel context, which answers with itself, finds none.
func (c *manualDeadline) Value(key any) any {
	if v := c.Context.Value(key); v != any(c.Context) {
		return v
	}
	return nil
}

// AfterFunc is context.AfterFunc on the cancel context, which the context
// package uses to end a context made from this one.
func (c *manualDeadline) AfterFunc(f func()) func() bool { return context.AfterFunc(c.Context, f) }

// Advance moves the clock by d and ends every sleep and timeout whose end
// the clock has reached; a negative d moves the clock back and ends
// nothing. It returns the new reading.
func (t *ManualTimer) Advance(d time.Duration) time.Duration {
	t.mustBeNew()
	now := t.clock.Advance(d)
	var due []*manualWait
	t.mu.Lock()
	kept := t.waits[:0]
	for _, w := range t.waits {
		if w.at <= now {
			due = append(due, w)
			if w.sleep {
				t.sleeps--
			}
			continue
		}
		kept = append(kept, w)
	}
	clear(t.waits[len(kept):])
	t.waits = kept
	t.mu.Unlock()
	for _, w := range due {
		w.fire()
	}
	return now
}

// Sleepers returns how many Sleep calls are waiting now.
func (t *ManualTimer) Sleepers() int {
	t.mustBeNew()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sleeps
}

// AwaitSleepers blocks until at least n Sleep calls are waiting, so that a
// test advances the clock only once the goroutines it drives have started
// their waits.
func (t *ManualTimer) AwaitSleepers(n int) {
	t.mustBeNew()
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.sleeps < n {
		t.changed.Wait()
	}
}

// add registers w; t.mu is held.
func (t *ManualTimer) add(w *manualWait) {
	t.waits = append(t.waits, w)
	if w.sleep {
		t.sleeps++
	}
	t.changed.Broadcast()
}

// remove drops w if it is still pending.
func (t *ManualTimer) remove(w *manualWait) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.waits {
		if x == w {
			t.waits = slices.Delete(t.waits, i, i+1)
			if w.sleep {
				t.sleeps--
			}
			return
		}
	}
}
