package registry

import (
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// Breaker is a registry's breaker: a core.Breaker (every method of which it
// has, each doing what core.Breaker's does) that, when the registry
// evicts, also counts the permits it has out, so that eviction does not
// drop it while a call is in flight. The core.Breaker inside is not
// reachable, so no permit can bypass the count. Safe for concurrent use;
// allocation-free like core.Breaker. Get one from Registry.Get: every
// method of a zero Breaker panics with "registry: Breaker used without
// Registry.Get".
//
// The count is exact when every permit of Allow is reported once, by
// Done, Record or RecordHint, to the Breaker that granted it (panics of
// the classifier or of a Config.OnStateChange listener included: the
// permit is released on every path). It tolerates the misuses the core
// tolerates, without a hang and without going below zero:
//   - a report of a rejection's permit (Allow returned an error) changes
//     nothing when the rejection carries a wait (Permit.RetryAfter above zero:
//     ErrOpen, ErrHalfOpenFull);
//   - any other report with no permit out, on this Breaker (a second
//     report of one permit, a forced-open or ramping-up rejection's, one
//     granted by another breaker) changes nothing;
//   - such a report while other permits are out releases one of theirs:
//     the Breaker may then be evicted while that call is in flight, and
//     that call's outcome reaches a breaker the registry no longer holds;
//   - a permit never reported here (its report went to another breaker,
//     or never came) keeps the Breaker from eviction until its key has had
//     no Get for Options.PermitTimeout; after that the registry presumes
//     the permits lost and may evict the Breaker as if none were out.
type Breaker struct {
	// The 64-bit atomics come first: the first word of an allocated struct
	// is 64-bit aligned on 32-bit platforms too, and the ones after it are
	// while they stay in pairs of 32-bit words.

	// permits is the number of permits out, never below zero.
	permits atomic.Int64
	// used is the clock reading at which the registry's hand last found
	// the reference mark set (or b was made): no Get reads the clock.
	used atomic.Int64

	core  *core.Breaker
	track bool // the registry evicts: count permits, mark uses
	// ref is set by a Get and cleared by the registry's eviction hand as it
	// passes: a breaker used since the hand's last pass is spared once.
	ref atomic.Bool
}

const noGet = "registry: Breaker used without Registry.Get: a zero Breaker has no core breaker"

// mustHaveCore panics, naming the misuse, for a zero or nil Breaker.
func (b *Breaker) mustHaveCore() {
	if b == nil {
		panic("registry: nil *Breaker: get one from Registry.Get or Registry.Lookup")
	}
	if b.core == nil {
		panic(noGet)
	}
}

// Allow is core.Breaker.Allow, counting the permit.
func (b *Breaker) Allow() (core.Permit, error) {
	b.mustHaveCore()
	p, err := b.core.Allow()
	// Counted once granted, so that a panicking listener inside the core's
	// Allow leaves no count behind. An eviction between the grant and the
	// count is one before this Allow: the caller's call then goes through
	// a breaker the registry no longer holds (see Options.MaxBreakers).
	if err == nil && b.track {
		b.permits.Inc()
	}
	return p, err
}

// Done is core.Breaker.Done for a permit of this Breaker's Allow; see
// Breaker for a permit reported twice, to another breaker, or never. The
// permit is released after the outcome is recorded, also when the
// classifier or a listener panics.
func (b *Breaker) Done(p core.Permit, err error) {
	b.mustHaveCore()
	defer b.release(p)
	b.core.Done(p, err)
}

// Record is core.Breaker.Record for a permit of this Breaker's Allow; see
// Done.
func (b *Breaker) Record(p core.Permit, o core.Outcome) {
	b.mustHaveCore()
	defer b.release(p)
	b.core.Record(p, o)
}

// RecordHint is core.Breaker.RecordHint for a permit of this Breaker's
// Allow; see Done.
func (b *Breaker) RecordHint(p core.Permit, retryAfter time.Duration) {
	b.mustHaveCore()
	defer b.release(p)
	b.core.RecordHint(p, retryAfter)
}

// State is core.Breaker.State.
func (b *Breaker) State() core.State {
	b.mustHaveCore()
	return b.core.State()
}

// Counts is core.Breaker.Counts.
func (b *Breaker) Counts() core.Counts {
	b.mustHaveCore()
	return b.core.Counts()
}

// Metrics is core.Breaker.Metrics.
func (b *Breaker) Metrics() core.Metrics {
	b.mustHaveCore()
	return b.core.Metrics()
}

// Settings is core.Breaker.Settings: the template's, under this key's name.
func (b *Breaker) Settings() core.Settings {
	b.mustHaveCore()
	return b.core.Settings()
}

// RetryAfter is core.Breaker.RetryAfter.
func (b *Breaker) RetryAfter() time.Duration {
	b.mustHaveCore()
	return b.core.RetryAfter()
}

// ForceOpen is core.Breaker.ForceOpen.
func (b *Breaker) ForceOpen(d time.Duration) error {
	b.mustHaveCore()
	return b.core.ForceOpen(d)
}

// Disable is core.Breaker.Disable.
func (b *Breaker) Disable() {
	b.mustHaveCore()
	b.core.Disable()
}

// MetricsOnly is core.Breaker.MetricsOnly.
func (b *Breaker) MetricsOnly() {
	b.mustHaveCore()
	b.core.MetricsOnly()
}

// HalfOpen is core.Breaker.HalfOpen.
func (b *Breaker) HalfOpen() {
	b.mustHaveCore()
	b.core.HalfOpen()
}

// Reconfigure is core.Breaker.Reconfigure, for this key alone: the next
// Registry.Reconfigure gives it the registry's template again.
func (b *Breaker) Reconfigure(c core.Config) error {
	b.mustHaveCore()
	return b.core.Reconfigure(c)
}

// Reset is core.Breaker.Reset.
func (b *Breaker) Reset() {
	b.mustHaveCore()
	b.core.Reset()
}

// release takes back p's count, unless p is a rejection's (a granted
// permit never carries a wait) or no permit is out: a report too many
// must not take the count below zero.
func (b *Breaker) release(p core.Permit) {
	if !b.track || p.RetryAfter > 0 {
		return
	}
	for {
		n := b.permits.Load()
		if n == 0 || b.permits.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// touch records a Get: the reference mark, unless set already, so that a
// key hit constantly writes nothing. It reads no clock: the registry's
// hand stamps the time when it finds the mark (seen).
func (b *Breaker) touch() {
	if !b.ref.Load() {
		b.ref.Store(true)
	}
}

// seen reports whether b's key had a Get since the hand last passed (the
// reference mark), and if so clears the mark and stamps reading now as
// the time of its last known use. The caller holds the registry's mutex.
func (b *Breaker) seen(now time.Duration) bool {
	if !b.ref.Load() {
		return false
	}
	b.ref.Store(false)
	b.used.Store(int64(now))
	return true
}

// idleFor returns how long before now the hand last found b's key looked
// up, or b was made: its last Get was at least that long ago (negative
// after a clock step back).
func (b *Breaker) idleFor(now time.Duration) time.Duration {
	return now - time.Duration(b.used.Load())
}

// evictable reports whether b may be evicted at reading now: not open or
// forced open (a half-open one has no probe out unless a permit is), and
// no permit out, or none reported for permitTimeout of idleness.
func (b *Breaker) evictable(now, permitTimeout time.Duration) bool {
	switch b.State() {
	case core.Open, core.ForcedOpen:
		return false
	}
	return b.permits.Load() == 0 || b.idleFor(now) >= permitTimeout
}
