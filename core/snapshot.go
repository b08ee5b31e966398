package core

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Snapshot is what a breaker remembers across a restart of its process: its
// state, its backoff step, and its deadlines as wall-clock times, so that a
// breaker open when the process stopped is still open, for the time left,
// when it starts again (Restore). Take one with Breaker.Snapshot, store it
// with MarshalBinary or MarshalJSON, and build the new process's breaker
// with Restore (or baseline.Restore) from the same Config.
//
// A count window's outcomes come along when the snapshot is taken with
// them (Window). What is not carried: the generation (permits do not
// outlive their process), the probes in flight and the probe successes and
// tolerated probe failures of half-open (their callers died with the
// process: a restored half-open breaker starts its verdict over), a time window's
// outcomes (a new process's breaker clock starts at its construction, and
// a time window holds no second before it), and the metrics.
// docs/semantics.md, Restarts, has the rule.
//
// The zero value is a closed breaker's snapshot taken at the zero time.Time,
// with fingerprint 0; Restore refuses it, as it refuses any snapshot whose
// fingerprint is not the config's. A Snapshot is plain data, safe to copy
// and to read from any goroutine; Window is a slice, so compare two with
// Equal.
type Snapshot struct {
	// Fingerprint is Settings.Fingerprint of the breaker's config: Restore
	// refuses a snapshot of a config that gives its fields another meaning.
	Fingerprint uint64
	// State is the state the breaker was in: any of the six. An open
	// breaker whose open duration had elapsed without a call is Open with
	// OpenUntil at or before Taken.
	State State
	// Step is the open-duration backoff step, 0..MaxBackoffSteps: the
	// number of re-opens from half-open since the last trip from closed, as
	// far as the backoff counts them. Zero outside Open and HalfOpen.
	Step uint8
	// ConsecutiveFailures is the run of counted failures of a closed or
	// metrics-only breaker, tracked only when Config.ConsecutiveFailures is
	// set; zero otherwise. Below Config.ConsecutiveFailures.
	ConsecutiveFailures uint16
	// Taken is the wall-clock time the snapshot was taken at, as handed to
	// Breaker.Snapshot, to the nanosecond, in UTC.
	Taken time.Time
	// OpenUntil is, for Open, the wall-clock time from which a call may
	// probe: Taken plus the time that was left of the open duration (never
	// more than MaxOpenDurationLimit plus 1 ms after Taken). The zero
	// time.Time in every other state.
	OpenUntil time.Time
	// RampUntil is, for a closed breaker ramping up after half-open ->
	// closed, the wall-clock end of the ramp-up: Taken plus the time that
	// was left of it. The zero time.Time otherwise.
	RampUntil time.Time
	// Window is a closed or metrics-only breaker's count window, oldest
	// call first, when the snapshot was taken with its window: at most
	// WindowSize calls, and never a window that trips the config's rule.
	// Empty (nil) otherwise, and always for a time window; Restore starts
	// an empty window then.
	Window []WindowCall
}

// WindowCall is one counted call in a count window (Snapshot.Window): bit 0
// a failure, bit 1 slow. The zero value is a success that was not slow.
type WindowCall uint8

// The four counted calls.
const (
	CallSuccess WindowCall = iota
	CallFailure
	CallSlowSuccess
	CallSlowFailure
)

// Failure reports whether the call failed.
func (c WindowCall) Failure() bool { return c&CallFailure != 0 }

// Slow reports whether the call was slow.
func (c WindowCall) Slow() bool { return c&CallSlowSuccess != 0 }

// Equal reports whether s and o are the same snapshot: every field equal,
// the times by time.Time.Equal, and the windows call by call (a nil and an
// empty window are equal).
func (s Snapshot) Equal(o Snapshot) bool {
	if len(s.Window) != len(o.Window) {
		return false
	}
	for i, c := range s.Window {
		if o.Window[i] != c {
			return false
		}
	}
	return s.Fingerprint == o.Fingerprint && s.State == o.State && s.Step == o.Step &&
		s.ConsecutiveFailures == o.ConsecutiveFailures && s.Taken.Equal(o.Taken) &&
		s.OpenUntil.Equal(o.OpenUntil) && s.RampUntil.Equal(o.RampUntil)
}

// ErrInvalidSnapshot is what every error of a snapshot's decoding and of
// Restore's check matches with errors.Is; the error says what is wrong.
var ErrInvalidSnapshot = errors.New("core: invalid snapshot")

// ErrSnapshotMismatch is what Restore's error matches, besides
// ErrInvalidSnapshot, when the snapshot is of a config whose fingerprint
// differs from the one it is given: a service that changed its config on
// purpose starts fresh on this error, and treats the others as corruption.
var ErrSnapshotMismatch = errors.New("core: snapshot of another config")

// invalidSnapshot is an error matching ErrInvalidSnapshot that says why.
func invalidSnapshot(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSnapshot, fmt.Sprintf(format, args...))
}

// The wall-clock times a snapshot carries are kept as Unix nanoseconds in
// an int64 (the binary form): from 1677-09-21 to 2262-04-11. A time outside
// is refused rather than wrapped.
var (
	minWall = time.Unix(0, math.MinInt64)
	maxWall = time.Unix(0, math.MaxInt64)
)

// wallTime is t as a snapshot keeps it: in UTC, without a monotonic reading
// (which means nothing in another process), to the nanosecond. what names
// t in the error when it is outside the range above.
func wallTime(t time.Time, what string) (time.Time, error) {
	if t.Before(minWall) || t.After(maxWall) {
		return time.Time{}, fmt.Errorf("%s %v is outside the wall-clock range a snapshot keeps (%v to %v)", what, t, minWall.UTC(), maxWall.UTC())
	}
	return time.Unix(0, t.UnixNano()).UTC(), nil
}

// maxOpenLeft bounds OpenUntil - Taken: the longest open period (a year,
// whether a backed-off duration, a hint or ForceOpen's) plus the rounding
// of its deadline up to a whole millisecond. A breaker clock that went back
// since the transition leaves more than that to wait on the live breaker;
// a snapshot carries this much.
const maxOpenLeft = MaxOpenDurationLimit + time.Millisecond

// check reports what makes s no snapshot a breaker of any config can take:
// the rules of the fields above, which each decoder checks too.
func (s Snapshot) check() error {
	if err := s.checkFields(); err != nil {
		return err
	}
	if err := s.checkTimes(); err != nil {
		return err
	}
	switch {
	case len(s.Window) != 0 && !counting(s.State):
		return invalidSnapshot("a window of %d calls in state %v, which counts none", len(s.Window), s.State)
	case len(s.Window) > MaxCountWindow:
		return invalidSnapshot("a window of %d calls, above the largest count window, %d", len(s.Window), MaxCountWindow)
	}
	for i, c := range s.Window {
		if c > CallSlowFailure {
			return invalidSnapshot("window call %d is %d, not one of the four calls", i, c)
		}
	}
	return nil
}

// checkFields is check's rule for which fields the state may carry.
func (s Snapshot) checkFields() error {
	switch {
	case s.State >= NumStates:
		return invalidSnapshot("state %d is not a state", uint8(s.State))
	case s.Step > MaxBackoffSteps:
		return invalidSnapshot("backoff step %d is above %d", s.Step, MaxBackoffSteps)
	case s.Step != 0 && s.State != Open && s.State != HalfOpen:
		return invalidSnapshot("backoff step %d in state %v, which has none", s.Step, s.State)
	case s.ConsecutiveFailures != 0 && !counting(s.State):
		return invalidSnapshot("%d consecutive failures in state %v, which counts none", s.ConsecutiveFailures, s.State)
	case s.State == Open && s.OpenUntil.IsZero():
		return invalidSnapshot("open with no OpenUntil")
	case s.State != Open && !s.OpenUntil.IsZero():
		return invalidSnapshot("OpenUntil %v in state %v", s.OpenUntil, s.State)
	case s.State != Closed && !s.RampUntil.IsZero():
		return invalidSnapshot("RampUntil %v in state %v", s.RampUntil, s.State)
	}
	return nil
}

// checkTimes is check's rule for the times: in the range the formats keep,
// and deadlines no breaker could set refused.
func (s Snapshot) checkTimes() error {
	if s.Taken.IsZero() {
		return invalidSnapshot("no Taken time")
	}
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"Taken", s.Taken}, {"OpenUntil", s.OpenUntil}, {"RampUntil", s.RampUntil}} {
		if _, err := wallTime(t.at, t.name); err != nil && !t.at.IsZero() {
			return fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
		}
	}
	if s.State == Open {
		if left := s.OpenUntil.Sub(s.Taken); left > maxOpenLeft {
			return invalidSnapshot("OpenUntil is %v after Taken, above the longest open period %v", left, maxOpenLeft)
		}
	}
	if !s.RampUntil.IsZero() && !s.RampUntil.After(s.Taken) {
		return invalidSnapshot("RampUntil %v is not after Taken %v: a ramp-up that is over is no ramp-up", s.RampUntil, s.Taken)
	}
	return nil
}

// CheckFor reports why s cannot restore a breaker running with set (a
// Settings from Config.Validate), or nil: a corrupt field, a fingerprint
// that is not set's (matching ErrSnapshotMismatch too), a backoff step the
// config's backoff never reaches, a run of failures at or above its
// threshold, or a ramp-up longer than the config's. Every error matches
// ErrInvalidSnapshot. Restore runs it; a service may run it to decide
// before building anything. It never panics.
func (s Snapshot) CheckFor(set Settings) error {
	if err := s.check(); err != nil {
		return err
	}
	if fp := set.Fingerprint(); s.Fingerprint != fp {
		return fmt.Errorf("%w: %w: fingerprint %016x, the config's is %016x (window, rate or count thresholds, minimum calls, slow calls, consecutive failures, open durations and backoff, half-open probes or ramp-up differ)",
			ErrInvalidSnapshot, ErrSnapshotMismatch, s.Fingerprint, fp)
	}
	if set.OpenDuration == 0 {
		return invalidSnapshot("the Settings are not from Config.Validate (no open duration)")
	}
	if s.Step > set.lastStep {
		return invalidSnapshot("backoff step %d is past the config's last, %d", s.Step, set.lastStep)
	}
	if s.ConsecutiveFailures != 0 && set.ConsecutiveFailures == 0 {
		return invalidSnapshot("%d consecutive failures, where the config counts none", s.ConsecutiveFailures)
	}
	if err := s.checkWindow(&set); err != nil {
		return err
	}
	if !s.RampUntil.IsZero() {
		// A ramp-up's end is at most span + 1 coarse units ahead of a
		// reading: the furthest a breaker takes for a ramp not over
		// (rampOver), which its own snapshot reaches when its clock went
		// back by less than a unit since the ramp began.
		if set.rampUp.unit == 0 {
			return invalidSnapshot("a ramp-up, where the config has none")
		}
		if left, most := s.RampUntil.Sub(s.Taken), time.Duration(set.rampUp.span+1)*set.rampUp.unit; left > most {
			return invalidSnapshot("RampUntil is %v after Taken, above the config's ramp-up of %v (at most %v in its units)", left, set.RampUpDuration, most)
		}
	}
	return nil
}

// checkWindow is CheckFor's rule for the window: one the config's count
// window can hold, with slow calls only where the config times calls, and
// no window that trips the config's rule (no closed breaker holds one).
func (s Snapshot) checkWindow(set *Settings) error {
	if len(s.Window) == 0 {
		return nil
	}
	if set.WindowType != CountBased || len(s.Window) > set.WindowSize {
		return invalidSnapshot("a count window of %d calls, where the config's window is %d calls %v", len(s.Window), set.WindowSize, set.WindowType)
	}
	// A window (or a run of failures) that trips the rule is taken as it
	// is: a breaker whose threshold Reconfigure lowered holds one, closed,
	// until its next outcome judges it, and so does the restored one.
	for _, x := range s.Window {
		if x.Slow() && !set.slowEnabled() {
			return invalidSnapshot("a slow call in the window, where the config has no slow-call threshold")
		}
	}
	return nil
}

// fingerprintVersion is hashed first, so that a change of what the
// fingerprint covers changes every fingerprint.
const fingerprintVersion = 1

// Fingerprint is a 64-bit hash (FNV-1a) of the settings that give a
// Snapshot's fields their meaning: the window type, size and bucket width, the thresholds
// that judge a window and a run of failures (failure rate, slow-call rate,
// slow-call duration, failure count, minimum number of calls, consecutive
// failures), the open duration, backoff factor and maximum, and whether
// an open-duration function is set (what a backoff step means), the
// half-open probes permitted, the successes that close and the failures
// that re-open, and the ramp-up duration. Settings that differ only in anything
// else (the name, the max wait, the half-open-full wait, hints, metrics,
// the classifier, the clock, the listener, the initial state) have the
// same fingerprint, and a snapshot of one restores the other. Stable across processes and builds of the same snapshot format
// version. The zero Settings has a fingerprint too, which no validated
// Settings shares (its open duration is never zero).
func (s Settings) Fingerprint() uint64 {
	// FNV-1a over each value's 8 bytes, big-endian, spelled out so that
	// Snapshot allocates nothing.
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, v := range [...]uint64{
		fingerprintVersion,
		uint64(s.WindowType), uint64(s.WindowSize), uint64(s.BucketWidth),
		uint64(s.FailureRateThreshold), uint64(s.SlowCallRateThreshold), uint64(s.SlowCallDurationThreshold),
		uint64(s.FailureCountThreshold), uint64(s.MinimumNumberOfCalls), b2u(s.MinimumAppliesToCount),
		uint64(s.ConsecutiveFailures),
		uint64(s.OpenDuration), math.Float64bits(s.OpenDurationBackoff), uint64(s.MaxOpenDuration),
		b2u(s.OpenDurationFunc != nil),
		uint64(s.PermittedCallsInHalfOpen), uint64(s.SuccessesToClose), uint64(s.FailuresToReopen),
		uint64(s.RampUpDuration),
	} {
		for i := 56; i >= 0; i -= 8 {
			h = (h ^ v>>i&0xff) * prime
		}
	}
	return h
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Snapshot returns the breaker's snapshot at the wall-clock time now (pass
// time.Now(); tests pass a fixed time), with the count window's calls when
// withWindow is set and the breaker is closed or metrics-only with a count
// window (a time window is never carried: see Snapshot). It pairs now with
// one reading of the breaker's clock: an open deadline becomes now plus the
// time left of the open duration at that reading, a ramp-up's end
// likewise. Concurrent with traffic it returns a state the breaker was in:
// it reads the state word (completing a claimed transition first, and
// committing a trip an outcome has decided, as Counts does), then the
// clock and the window (one committed state of it, read as Counts reads
// its sums), then the word again, and starts over if the word moved. It
// commits nothing else and notifies nothing but such a trip (which, like
// any trip, asks Config.OpenGate for a slot and may run the listener); it
// allocates only with withWindow, for the window's calls. An open breaker whose open duration
// has elapsed is snapshot as Open with OpenUntil equal to now, no time
// left (the transition to half-open comes with the next call, here or
// after a restore); one whose wait is longer than any open period (its
// clock went back) is snapshot with the longest, MaxOpenDurationLimit plus
// 1 ms.
//
// It returns an error matching ErrInvalidArgument when now, or the open
// deadline or ramp-up's end it would carry, is outside the span 1677-09-21
// to 2262-04-11, which the snapshot's formats cannot hold. It panics on
// a zero Breaker, naming New.
func (b *Breaker) Snapshot(now time.Time, withWindow bool) (Snapshot, error) {
	b.mustBeNew()
	taken, err := wallTime(now, "Snapshot: now")
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	var calls []uint8
	if withWindow && b.ring != nil {
		calls = make([]uint8, b.ring.Size())
	}
	for {
		w := b.load()
		if w == moving {
			return b.successor().Snapshot(now, withWindow)
		}
		u := w.fields()
		gen := b.genOf(w)
		if b.tripPending(u, gen) {
			continue
		}
		s := Snapshot{Fingerprint: b.cfg.Fingerprint(), State: u.state, Taken: taken}
		switch u.state {
		case Closed, MetricsOnly:
			if !b.snapshotCounting(&s, u, gen, calls) {
				continue
			}
		case Open:
			s.Step = u.step
			s.OpenUntil = taken.Add(min(untilDeadline(u.deadline, b.now()), maxOpenLeft))
		case HalfOpen:
			s.Step = u.step
			return s, nil
		default:
			return s, nil
		}
		if b.peek() == w { // the reading belongs to the word
			if err := s.deadlinesInSpan(); err != nil {
				return Snapshot{}, err
			}
			return s, nil
		}
	}
}

// deadlinesInSpan is Snapshot's error, matching ErrInvalidArgument, for a
// snapshot taken so near the end of the span the formats keep that its
// open deadline or ramp-up's end lies past it: no decoder and no Restore
// would take it.
func (s Snapshot) deadlinesInSpan() error {
	for _, t := range [...]struct {
		name string
		at   time.Time
	}{{"OpenUntil", s.OpenUntil}, {"RampUntil", s.RampUntil}} {
		if _, err := wallTime(t.at, "Snapshot: "+t.name); err != nil && !t.at.IsZero() {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	return nil
}

// snapshotCounting fills in s, taken of the closed or metrics-only word u
// of generation gen: the run of failures, the ramp-up's end, and the
// window's calls (read into calls, when not nil). It reports false, having
// committed it, when the count window has decided a trip: the caller
// starts over.
func (b *Breaker) snapshotCounting(s *Snapshot, u word, gen uint64, calls []uint8) bool {
	s.ConsecutiveFailures = uint16(u.consec)
	if calls != nil {
		n, closed := b.ring.Calls(uint32(gen), calls)
		if closed {
			b.finishTrip(gen, false)
			return false
		}
		if n > 0 {
			s.Window = make([]WindowCall, n)
			for i, c := range calls[:n] {
				s.Window[i] = WindowCall(c)
			}
		}
	}
	if u.ramping {
		r := b.now()
		if remaining := signedDiff(uint64(u.rampEnd), b.cfg.rampUnits(r), rampBits); !b.cfg.rampOver(remaining) {
			left := time.Duration(remaining)*b.cfg.rampUp.unit - max(r, 0)%b.cfg.rampUp.unit
			s.RampUntil = s.Taken.Add(left)
		}
	}
	return true
}

// Restore returns a breaker built from c, as New builds one, in the state
// snapshot s records, at generation 0, with no transition and no
// notification; now is the wall-clock time of the restore (pass
// time.Now()). An Open snapshot restores open for the time left at now:
// s.OpenUntil minus now, but never more than was left when s was taken
// (a wall clock that went backwards does not lengthen the open duration),
// and an OpenUntil already passed restores open with the deadline passed,
// so the next call probes. HalfOpen restores with no probe in flight, no
// success and no tolerated failure, its max wait starting at the restore;
// a ramp-up resumes for the time left, by the same rule as an open
// duration, but never further ahead than a ramp-up is set (its duration
// rounded up to its coarse units, plus one), which may take less than one
// unit (0.1 % of RampUpDuration, or 1 ms) off it; ForcedOpen, Disabled and
// MetricsOnly restore as such; the run of consecutive failures and the
// backoff step carry over. A count window holds the snapshot's calls, if
// it has any; otherwise the window starts empty. The metrics start at zero.
// Config.InitialState is validated and then ignored: the snapshot decides.
//
// It returns the errors of Config.Validate (matching ErrInvalidConfig); an
// error matching ErrInvalidSnapshot (and ErrSnapshotMismatch for a snapshot
// of another config), from Snapshot.CheckFor; or one matching
// ErrInvalidArgument when now is outside the span 1677-09-21 to 2262-04-11. It never
// panics.
func Restore(c Config, s Snapshot, now time.Time) (*Breaker, error) {
	b, err := build(c)
	if err != nil {
		return nil, err
	}
	if err := s.CheckFor(b.cfg); err != nil {
		return nil, err
	}
	at, err := wallTime(now, "Restore: now")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	u := word{state: s.State, step: s.Step}
	switch s.State {
	case Closed, MetricsOnly:
		u.consec = uint32(s.ConsecutiveFailures)
		for _, c := range s.Window { // CheckFor: a count window holds them
			b.ring.Record(0, c.Failure(), c.Slow())
		}
		if left := leftAt(s.RampUntil, s.Taken, at); left > 0 {
			// At most span + 1 units ahead, the furthest a ramp is ever
			// set and so the furthest rampOver takes for one not over:
			// a ramp taken just past a unit boundary has nearly a unit
			// more than its duration left, and restored at a later phase
			// of a unit it would reach one unit further and be dropped.
			r := b.now()
			end := min(ceilUnits(r, left, b.cfg.rampUp.unit), b.cfg.rampUnits(r)+b.cfg.rampUp.span+1)
			u.ramping, u.rampEnd = true, uint32(end&rampMask)
		}
	case Open:
		r := b.now()
		if left := leftAt(s.OpenUntil, s.Taken, at); left > 0 {
			u.deadline = deadline(r, left)
		} else {
			// Passed: the current millisecond, which a call at r has
			// reached (deadline would round a reading within a
			// millisecond up to the next one).
			u.deadline = uint64(max(r, 0)/time.Millisecond) % deadlineMod
		}
	case HalfOpen:
		if b.cfg.MaxWaitInHalfOpen != WaitForever {
			u.expiry = b.expiry(b.now())
		}
	}
	b.acquireIf(Closed, s.State) // an ejecting state is counted, as an initial one is
	b.state.Store(uint64(u.packed()))
	return b, nil
}

// leftAt is how much of a wall-clock deadline until, set when the snapshot
// was taken, is left at the wall-clock time now: until - now, but never
// more than until - taken (a wall clock that went back since does not
// lengthen it), and never below zero. Zero for a zero until.
func leftAt(until, taken, now time.Time) time.Duration {
	if until.IsZero() {
		return 0
	}
	return max(min(until.Sub(now), until.Sub(taken)), 0)
}
