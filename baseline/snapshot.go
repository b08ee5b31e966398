package baseline

import (
	"fmt"
	"math"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Snapshot returns the breaker's snapshot at the wall-clock time now, with
// the count window's calls when withWindow is set; see
// core.Breaker.Snapshot. It is taken under the mutex, with one clock
// reading where a deadline needs one, so it is one instant of the breaker.
func (b *Breaker) Snapshot(now time.Time, withWindow bool) (core.Snapshot, error) {
	b.mustBeNew()
	taken, err := wallTime(now, "Snapshot: now")
	if err != nil {
		return core.Snapshot{}, err
	}
	s := core.Snapshot{Taken: taken}
	b.mu.Lock()
	defer b.mu.Unlock()
	s.Fingerprint = b.cfg.Fingerprint() // under the mutex: Reconfigure changes it
	s.State = b.state
	switch b.state {
	case core.Closed, core.MetricsOnly:
		s.ConsecutiveFailures = uint16(b.consec)
		if withWindow && b.window == countBased {
			s.Window = b.count.calls()
		}
		if b.ramping {
			r := b.cfg.Clock.Now()
			if !b.ramp.over(b.ramp.left(b.rampEnd, r)) {
				s.RampUntil = taken.Add(b.ramp.until(b.rampEnd, r))
			}
		}
	case core.Open:
		s.Step = b.step()
		// At most the longest open period: a clock that went back since the
		// trip leaves more than that to wait here (see core's maxOpenLeft).
		s.OpenUntil = taken.Add(min(b.wait(b.now()), core.MaxOpenDurationLimit+time.Millisecond))
	case core.HalfOpen:
		s.Step = b.step()
	}
	for _, t := range [...]struct {
		name string
		at   time.Time
	}{{"OpenUntil", s.OpenUntil}, {"RampUntil", s.RampUntil}} {
		if _, err := wallTime(t.at, "Snapshot: "+t.name); err != nil && !t.at.IsZero() {
			return core.Snapshot{}, err // past the span the formats keep: nothing would take it
		}
	}
	return s, nil
}

// calls is the window's outcomes, oldest first, as a snapshot carries
// them; nil for an empty window.
func (w *countWindow) calls() []core.WindowCall {
	older := w.ring[:w.next] // not yet full: the oldest is slot 0
	if w.full {
		older = append(append([]outcome(nil), w.ring[w.next:]...), w.ring[:w.next]...)
	}
	if len(older) == 0 {
		return nil
	}
	calls := make([]core.WindowCall, len(older))
	for i, o := range older {
		var c core.WindowCall
		if o&failBit != 0 {
			c |= core.CallFailure
		}
		if o&slowBit != 0 {
			c |= core.CallSlowSuccess
		}
		calls[i] = c
	}
	return calls
}

// step is the backoff step of the open duration of this period (openFor):
// how many re-opens from half-open grow the open duration to it (R4), the
// first such count once it is the maximum; with an open-duration function,
// which decides every duration itself, the count of re-opens. The caller
// holds the mutex.
func (b *Breaker) step() uint8 {
	if b.cfg.OpenDurationFunc != nil {
		return uint8(b.reopens)
	}
	d := b.cfg.OpenDuration
	var i uint8
	for d != b.openFor && d != b.cfg.MaxOpenDuration {
		d, i = backoff(&b.cfg, d), i+1
	}
	return i
}

// Restore returns a breaker built from c in the state snapshot s records,
// at generation 0, with no notification; see core.Restore, whose rules and
// errors it keeps. What a snapshot may hold is the format's, shared: it
// checks s with core.Snapshot.CheckFor; what the breaker becomes (the
// deadlines, the backoff's open duration, the window) it decides with its
// own code. It never panics.
func Restore(c core.Config, s core.Snapshot, now time.Time) (*Breaker, error) {
	b, err := build(c)
	if err != nil {
		return nil, err
	}
	if err := s.CheckFor(b.cfg); err != nil {
		return nil, err
	}
	at, err := wallTime(now, "Restore: now")
	if err != nil {
		return nil, err
	}
	if b.cfg.OpenGate != nil && ejected(s.State) {
		b.cfg.OpenGate.Acquire() // an ejecting state is counted, as an initial one is
	}
	b.state = s.State
	switch s.State {
	case core.Closed, core.MetricsOnly:
		b.consec = uint64(s.ConsecutiveFailures)
		for _, c := range s.Window { // CheckFor: a count window holds them
			b.count.add(outcomeOf(c.Failure(), c.Slow()))
		}
		if left := leftAt(s.RampUntil, s.Taken, at); left > 0 {
			// No further ahead than a ramp is ever set (units + 1), which
			// over would read as a clock gone back and drop.
			r := b.cfg.Clock.Now()
			b.ramping, b.rampEnd = true, min(ceilDiv(nanos(r)+uint64(left), b.ramp.unit), b.ramp.at(r)+b.ramp.units+1)
		}
	case core.Open:
		b.openFor, b.reopens = b.stepDuration(s.Step), int(s.Step)
		r := b.now()
		if left := leftAt(s.OpenUntil, s.Taken, at); left > 0 {
			b.deadline = openDeadline(r, left)
		} else {
			b.deadline = nanos(r) / msec // passed: the next call probes
		}
	case core.HalfOpen:
		b.openFor, b.reopens = b.stepDuration(s.Step), int(s.Step)
		if b.maxWait.unit > 0 {
			b.maxWaitFrom(b.cfg.Clock.Now())
		}
	}
	return b, nil
}

// stepDuration is the open duration after step re-opens from half-open:
// the open duration backed off step times (R4).
func (b *Breaker) stepDuration(step uint8) time.Duration {
	d := b.cfg.OpenDuration
	for range step {
		d = backoff(&b.cfg, d)
	}
	return d
}

// leftAt is how much of a wall-clock deadline until, set when a snapshot
// was taken at taken, is left at the wall-clock time now: not below zero,
// and never more than was left at taken, so a wall clock that went back
// does not lengthen it. Zero for the zero time (no deadline).
func leftAt(until, taken, now time.Time) time.Duration {
	if until.IsZero() {
		return 0
	}
	left := until.Sub(now)
	if atTaken := until.Sub(taken); left > atTaken {
		left = atTaken
	}
	if left < 0 {
		return 0
	}
	return left
}

// wallTime is t as a snapshot keeps it: Unix nanoseconds, in UTC, with no
// monotonic reading; an error matching core.ErrInvalidArgument names what
// when t is outside what an int64 of nanoseconds holds.
func wallTime(t time.Time, what string) (time.Time, error) {
	if t.Before(time.Unix(0, math.MinInt64)) || t.After(time.Unix(0, math.MaxInt64)) {
		return time.Time{}, fmt.Errorf("%w: %s %v is outside the wall-clock range a snapshot keeps (Unix nanoseconds in an int64)", core.ErrInvalidArgument, what, t)
	}
	return time.Unix(0, t.UnixNano()).UTC(), nil
}
