package registry

import (
	"time"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// Breaker is a registry's breaker: a *core.Breaker (every method of which
// it has) that, when the registry evicts, also counts the permits it has
// out, so that eviction never drops it while a call is in flight. Use its
// Allow, Done, Record and RecordHint, or pass it to core.Do, rather than
// those of the embedded *core.Breaker, or the registry cannot see the
// permits. Safe for concurrent use; allocation-free like core.Breaker.
type Breaker struct {
	*core.Breaker
	track bool // the registry evicts: count permits

	// permits is the number of permits out, plus evictedBit once the
	// registry has marked the breaker for eviction.
	permits atomic.Int64
	// used is the clock reading of the last Get, kept to the registry's
	// slack (IdleAfter/16) so that a hot key's Get rarely writes it.
	used atomic.Int64
}

// evictedBit marks a breaker that the registry has dropped or is dropping;
// permits keep counting below it.
const evictedBit = 1 << 62

var _ core.CircuitBreaker = (*Breaker)(nil)

// Allow is core.Breaker.Allow, counting the permit.
func (b *Breaker) Allow() (core.Permit, error) {
	// Counted before the core admits, so that an eviction checking the
	// count between the two cannot drop a breaker with a permit out.
	if b.track {
		b.permits.Inc()
	}
	p, err := b.Breaker.Allow()
	if err != nil {
		b.release()
	}
	return p, err
}

// Done is core.Breaker.Done for a permit of this Breaker's Allow.
func (b *Breaker) Done(p core.Permit, err error) {
	defer b.release() // also when the classifier panics
	b.Breaker.Done(p, err)
}

// Record is core.Breaker.Record for a permit of this Breaker's Allow.
func (b *Breaker) Record(p core.Permit, o core.Outcome) {
	b.Breaker.Record(p, o)
	b.release()
}

// RecordHint is core.Breaker.RecordHint for a permit of this Breaker's
// Allow.
func (b *Breaker) RecordHint(p core.Permit, retryAfter time.Duration) {
	b.Breaker.RecordHint(p, retryAfter)
	b.release()
}

func (b *Breaker) release() {
	if b.track {
		b.permits.Dec()
	}
}

// touch stamps a Get at reading now, unless the stamp is less than slack
// old already.
func (b *Breaker) touch(now, slack time.Duration) {
	if now-time.Duration(b.used.Load()) > slack {
		b.used.Store(int64(now))
	}
}

func (b *Breaker) evicted() bool { return b.permits.Load()&evictedBit != 0 }

// mark sets the evicted mark if no permit is out.
func (b *Breaker) mark() bool { return b.permits.CompareAndSwap(0, evictedBit) }

func (b *Breaker) unmark() { b.permits.Sub(evictedBit) }

// evictable reports whether b's state lets it go: nothing to remember but
// a closed window (closed, disabled or metrics-only) and no permit out.
func (b *Breaker) evictable() bool {
	switch b.State() {
	case core.Open, core.HalfOpen, core.ForcedOpen:
		return false
	}
	return b.permits.Load()&^evictedBit == 0
}
