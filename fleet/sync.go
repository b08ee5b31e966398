package fleet

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/casbreaker/casbreaker/core"
)

// syncState is what only the background loop reads and writes.
type syncState struct {
	inc          string // the store incarnation of the versions seen
	seen         uint64 // the version adopted last
	publishedGen uint64 // the breaker generation of the last trip the store recorded
	failures     int    // store failures in a row
}

// loop is the member's background goroutine, the only one that talks to
// the store besides a half-open Allow's lease: it publishes trips and
// probe outcomes, hears the channel, polls the state every PollInterval
// (every backoff while the store fails) and adopts what it finds.
func (m *Member) loop(ctx context.Context) {
	defer close(m.done)
	sub := m.o.Client.Subscribe(ctx, m.channel)
	defer sub.Close()
	// The channel's health check pings no more often than the member
	// polls, and at least as rarely as go-redis's default: a member that
	// polls once an hour does nothing at all in between.
	msgs := sub.Channel(redis.WithChannelHealthCheckInterval(max(m.o.PollInterval, 3*time.Second)))
	timer := time.NewTimer(0)
	defer timer.Stop()
	var s syncState
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			err = m.pass(ctx, &s)
		case <-m.wake:
			if m.local.Load() {
				continue // the next attempt is the backoff's
			}
			err = m.pass(ctx, &s)
		case <-msgs:
			err = m.pass(ctx, &s)
		case r := <-m.reports:
			if m.local.Load() {
				m.stats.dropped.Inc()
				continue
			}
			err = m.report(ctx, &s, r)
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = m.release(ctx, &s)
		}
		timer.Reset(m.next(&s, err))
	}
}

// next records the result of a store call and returns the wait until the
// next poll: PollInterval after a success, the backoff after a failure.
func (m *Member) next(s *syncState, err error) time.Duration {
	if err == nil {
		s.failures = 0
		m.local.Store(false)
		return m.o.PollInterval
	}
	m.storeFailed()
	s.failures++
	d := m.o.MinBackoff
	for i := 1; i < s.failures && d < m.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, m.o.MaxBackoff)
	return d + rand.N(d/4+1)
}

// storeFailed puts the member in local mode after a failed store call.
func (m *Member) storeFailed() { m.local.Store(true) }

// call runs a script under the store deadline.
func (m *Member) call(ctx context.Context, s *redis.Script, keys []string, args ...any) (shared, error) {
	ctx, cancel := context.WithTimeout(ctx, m.o.StoreTimeout)
	defer cancel()
	return m.eval(ctx, s, keys, args...)
}

// pass publishes the breaker's trip if the store has not recorded it yet,
// or else reads the state, and adopts what the store answered.
func (m *Member) pass(ctx context.Context, s *syncState) error {
	var st shared
	var err error
	// A trip is published while it is the breaker's latest transition:
	// one that a later transition superseded (the breaker half-opened or
	// closed while the store was out of reach) is no longer news.
	if g := m.tripGen.Load(); g > s.publishedGen && m.Counts().Generation == g {
		st, err = m.call(ctx, tripScript, m.keys[:], m.o.Member, m.instance, g, m.openMs, m.o.Quorum, m.channel)
		if err == nil {
			s.publishedGen = g
			m.stats.published.Inc()
		}
	} else {
		st, err = m.call(ctx, readScript, m.keys[:1])
	}
	if err != nil {
		return err
	}
	m.adopt(s, st)
	return nil
}

// report sends a leased probe's outcome to the store.
func (m *Member) report(ctx context.Context, s *syncState, r report) error {
	outcome := "s"
	switch r.outcome {
	case core.Failure:
		outcome = "f"
	case core.Ignored:
		outcome = "i"
	}
	st, err := m.call(ctx, doneScript, []string{m.keys[0], m.keys[1], m.keys[3]},
		r.version, r.holder, outcome, m.successes, m.failures, m.openMs, m.channel)
	if err != nil {
		m.stats.dropped.Inc()
		return err
	}
	m.adopt(s, st)
	return nil
}

// release gives back the leases of calls that gave up waiting for them,
// as ignored probes: a lease the store never granted, or one it dropped
// for its TTL, is not there to give back, and that changes nothing.
func (m *Member) release(ctx context.Context, s *syncState) error {
	for {
		select {
		case l := <-m.abandoned:
			if err := m.report(ctx, s, report{lease: l, outcome: core.Ignored}); err != nil {
				select {
				case m.abandoned <- l: // the next time the store answers
				default: // callers filled the queue: this one runs out at its TTL
				}
				return err
			}
		default:
			return nil
		}
	}
}

// adopt moves the local breaker to a shared state newer than the one it
// adopted last: open for what is left of the open period on the store's
// clock (half-open at once if nothing is left), or closed. A breaker an
// operator moved to ForcedOpen, Disabled or MetricsOnly is left there.
func (m *Member) adopt(s *syncState, st shared) {
	if st.inc != s.inc {
		first := s.inc == ""
		s.inc, s.seen = st.inc, 0
		if !first {
			// A new incarnation: the store lost its state (a restart
			// without persistence), and its versions start again. The
			// open period whose leases the member asked for is gone, and
			// the trip the breaker is still open from is published again
			// (next pass).
			s.publishedGen = 0
			m.period.Store(nil)
			m.version.Store(0)
			m.poke()
		}
	}
	if st.version <= s.seen {
		return
	}
	s.seen = st.version
	// Stats shows the version once the breaker has moved to it.
	defer m.version.Store(st.version)
	if st.open {
		m.stats.adoptedOpen.Inc()
	} else {
		m.stats.adoptedClosed.Inc()
	}
	m.refusedUntil.Store(0)
	m.mu.Lock()
	clear(m.leases)
	m.mu.Unlock()
	switch m.State() {
	case core.ForcedOpen, core.Disabled, core.MetricsOnly:
		return
	}
	if !st.open {
		// The verdict of a fleet open period closes a breaker that was
		// open for that period; one that is open by its own trip, with no
		// fleet period adopted (on the first read, say), stays open:
		// its own probes decide.
		if m.period.Swap(nil) != nil {
			if state := m.State(); state == core.Open || state == core.HalfOpen {
				m.Reset()
			}
		}
		return
	}
	// The period is stored after the breaker moved: a probe that reads
	// the new period is of a generation the move made, or of a later
	// one, never of the half-open the move ends.
	if left := time.Duration(st.until-st.now) * time.Millisecond; left > 0 {
		_ = m.ForceOpen(left) // at most the open duration, which New validated
	} else {
		m.HalfOpen()
	}
	m.period.Store(&period{version: st.version, gen: m.Counts().Generation})
}
