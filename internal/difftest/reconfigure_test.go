package difftest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/difftest"
)

// script drives a Differ over every implementation, failing t at the
// first disagreement or broken rule.
type script struct {
	t *testing.T
	d *difftest.Differ
}

func newScript(t *testing.T, cfg core.Config) *script {
	t.Helper()
	cfg.CollectMetrics = true
	d, err := difftest.New(cfg, time.Hour, true)
	require.NoError(t, err)
	return &script{t: t, d: d}
}

func (s *script) do(op difftest.Op) difftest.Obs {
	s.t.Helper()
	obs, err := s.d.Step(op)
	require.NoError(s.t, err)
	return obs
}

func (s *script) allow() core.Permit {
	s.t.Helper()
	obs := s.do(difftest.Op{Kind: difftest.Allow})
	require.True(s.t, obs.Err.Nil(), "Allow: %v", obs.Err)
	return obs.Permit
}

// call is one call that reports o at once.
func (s *script) call(o core.Outcome) {
	s.t.Helper()
	s.do(difftest.Op{Kind: difftest.Record, Permit: s.allow(), Outcome: o})
}

func (s *script) record(p core.Permit, o core.Outcome) {
	s.t.Helper()
	s.do(difftest.Op{Kind: difftest.Record, Permit: p, Outcome: o})
}

func (s *script) reconfigure(c core.Config) difftest.Obs {
	s.t.Helper()
	return s.do(difftest.Op{Kind: difftest.Reconfigure, Config: &c})
}

func (s *script) advance(d time.Duration) { s.do(difftest.Op{Kind: difftest.Advance, D: d}) }

func (s *script) counts() core.Counts { return s.d.Sides[0].B.Counts() }

// last is the last notification of the first side.
func (s *script) last() core.Transition {
	seen := s.d.Sides[0].Seen()
	require.NotEmpty(s.t, seen)
	return seen[len(seen)-1].Transition
}

// The rule of docs/semantics.md R18, case by case, on every implementation
// at once (the Differ compares them after every step and checks the
// notifications, the metrics and the reconfiguration's own rules).
func TestReconfigure(t *testing.T) {
	rate := core.Config{WindowSize: 5, MinimumNumberOfCalls: 5, FailureRateThreshold: 50, OpenDuration: time.Second,
		PermittedCallsInHalfOpen: 3, SuccessesToClose: 3, FailuresToReopen: 2}
	t.Run("invalid: refused, nothing changes", func(t *testing.T) {
		s := newScript(t, rate)
		s.call(core.Failure)
		bad := rate
		bad.MinimumNumberOfCalls = 9 // above the count window
		obs := s.reconfigure(bad)
		require.Contains(t, obs.Err.Text, "MinimumNumberOfCalls")
		require.Empty(t, s.d.Sides[0].Seen())
	})
	t.Run("no rule field changed: nothing happens", func(t *testing.T) {
		if set, _ := rate.Validate(); namesClassifier(set, rate) {
			t.Skip("core.Settings.Reconfigured names Classifier for an unchanged config with the default classifier (Validate resolves it to DefaultClassifier, and a function is named whenever either side has one): no reconfiguration can change nothing")
		}
		s := newScript(t, rate)
		same := rate
		same.Name, same.CollectMetrics, same.InitialState = "ignored", false, core.ForcedOpen // kept: not read
		require.True(t, s.reconfigure(same).Err.Nil())
		require.Empty(t, s.d.Sides[0].Seen())
	})
	t.Run("one notification in the same generation, no transition in Metrics", func(t *testing.T) {
		s := newScript(t, rate)
		c := rate
		c.FailureRateThreshold, c.OpenDuration = 60, 2*time.Second
		require.True(t, s.reconfigure(c).Err.Nil())
		tr := s.last()
		changed := tr.Changed
		tr.Changed = ""
		require.Equal(t, core.Transition{From: core.Closed, To: core.Closed, Reason: core.ReasonReconfigured, Generation: 0,
			At: time.Hour}, tr)
		// The resolved values count: the maximum open duration and the
		// half-open-full wait follow the open duration by default.
		require.Subset(t, strings.Split(changed, ","), []string{"FailureRateThreshold", "OpenDuration", "MaxOpenDuration", "HalfOpenFullWait"})
		require.Equal(t, core.Metrics{}.Transitions, s.d.Sides[0].B.Metrics().Transitions)
	})
	t.Run("count window shrinks to its newest outcomes, not judged until the next", func(t *testing.T) {
		s := newScript(t, rate)
		for _, o := range []core.Outcome{core.Failure, core.Failure, core.Success, core.Failure} {
			s.call(o)
		}
		c := rate
		c.WindowSize, c.MinimumNumberOfCalls = 2, 2
		s.reconfigure(c)
		got := s.counts()
		require.Equal(t, [2]uint64{2, 1}, [2]uint64{got.Calls, got.Failures}, "the newest two: success, failure")
		require.Equal(t, core.Closed, got.State, "50 %% of 2 calls, but no outcome judged it yet")
		s.call(core.Failure)
		require.Equal(t, core.Open, s.counts().State)
		require.Equal(t, core.ReasonFailureRate, s.last().Reason)
	})
	t.Run("count window grows, keeping every outcome", func(t *testing.T) {
		s := newScript(t, rate)
		s.call(core.Failure)
		s.call(core.Success)
		c := rate
		c.WindowSize = 9
		s.reconfigure(c)
		require.EqualValues(t, 2, s.counts().Calls)
	})
	t.Run("window kind or width changed: empty, same generation", func(t *testing.T) {
		s := newScript(t, rate)
		s.call(core.Failure)
		c := rate
		c.WindowType, c.WindowSize = core.TimeBased, 2
		s.reconfigure(c)
		got := s.counts()
		require.Zero(t, got.Calls)
		require.Zero(t, got.Generation)
	})
	t.Run("time window keeps the buckets inside the new span", func(t *testing.T) {
		tw := core.Config{WindowType: core.TimeBased, WindowSize: 4, FailureCountThreshold: 9, OpenDuration: time.Second}
		s := newScript(t, tw)
		for i := range 4 { // one failure in each of four seconds
			if i > 0 {
				s.advance(time.Second)
			}
			s.call(core.Failure)
		}
		c := tw
		c.WindowSize = 2
		s.reconfigure(c)
		require.EqualValues(t, 2, s.counts().Failures, "the last two seconds")
		c.BucketWidth = 500 * time.Millisecond
		s.reconfigure(c)
		require.Zero(t, s.counts().Calls)
	})
	t.Run("run of failures kept, or dropped with its rule", func(t *testing.T) {
		run := core.Config{ConsecutiveFailures: 3, FailureCountThreshold: 10, WindowSize: 20, OpenDuration: time.Second}
		s := newScript(t, run)
		s.call(core.Failure)
		s.call(core.Failure)
		c := run
		c.ConsecutiveFailures = 4
		s.reconfigure(c)
		require.EqualValues(t, 2, s.counts().ConsecutiveFailures)
		s.call(core.Failure)
		require.Equal(t, core.Closed, s.counts().State)
		c.ConsecutiveFailures = 0
		s.reconfigure(c)
		require.Zero(t, s.counts().ConsecutiveFailures)
		c.ConsecutiveFailures = 2
		s.reconfigure(c)
		s.call(core.Failure)
		require.Equal(t, core.Closed, s.counts().State, "the run started over")
		s.call(core.Failure)
		require.Equal(t, core.ReasonConsecutiveFailures, s.last().Reason)
	})
	t.Run("half-open: kept counts reach a verdict, which commits after the notification", func(t *testing.T) {
		s := newScript(t, rate)
		s.do(difftest.Op{Kind: difftest.HalfOpen})
		p1, p2, p3 := s.allow(), s.allow(), s.allow()
		s.record(p1, core.Success)
		s.record(p2, core.Success)
		c := rate
		c.SuccessesToClose = 2
		s.reconfigure(c)
		seen := s.d.Sides[0].Seen()
		require.Len(t, seen, 3)
		require.Equal(t, core.ReasonReconfigured, seen[1].Reason)
		require.Equal(t, core.ReasonProbesPassed, seen[2].Reason)
		require.Equal(t, core.Closed, s.counts().State)
		s.record(p3, core.Failure) // stale: a probe of the half-open generation
		require.Equal(t, core.Closed, s.counts().State)
	})
	t.Run("half-open: a tolerated failure re-opens under a lower FailuresToReopen, at the next step", func(t *testing.T) {
		c := rate
		c.OpenDurationBackoff, c.MaxOpenDuration = 2, 8*time.Second
		s := newScript(t, c)
		s.do(difftest.Op{Kind: difftest.HalfOpen})
		s.record(s.allow(), core.Failure)
		require.EqualValues(t, 1, s.counts().ProbeFailures)
		c.FailuresToReopen = 1
		s.reconfigure(c)
		tr := s.last()
		require.Equal(t, core.ReasonProbeFailed, tr.Reason)
		require.Equal(t, time.Hour+2*time.Second, tr.OpenUntil, "the first backoff step: 2 s")
	})
	t.Run("half-open: probes above the new permit count drain", func(t *testing.T) {
		s := newScript(t, rate)
		s.do(difftest.Op{Kind: difftest.HalfOpen})
		p1, _ := s.allow(), s.allow()
		c := rate
		c.PermittedCallsInHalfOpen = 1
		s.reconfigure(c)
		require.True(t, s.do(difftest.Op{Kind: difftest.Allow}).Err.Matches(core.ErrHalfOpenFull))
		s.record(p1, core.Success)
		require.True(t, s.do(difftest.Op{Kind: difftest.Allow}).Err.Matches(core.ErrHalfOpenFull), "one still out")
	})
	t.Run("half-open max wait: kept when unchanged, restarted when changed", func(t *testing.T) {
		c := rate
		c.PermittedCallsInHalfOpen, c.SuccessesToClose, c.MaxWaitInHalfOpen = 1, 1, 2*time.Second
		c.HalfOpenFullWait = time.Minute // a rejection waits for what is left of the max wait
		s := newScript(t, c)
		s.do(difftest.Op{Kind: difftest.HalfOpen})
		s.allow()
		s.advance(1500 * time.Millisecond)
		c.FailureRateThreshold = 70 // max wait unchanged: 500 ms left
		s.reconfigure(c)
		require.Equal(t, 500*time.Millisecond, s.do(difftest.Op{Kind: difftest.Allow}).Err.Wait)
		c.MaxWaitInHalfOpen = 3 * time.Second // restarted: 3 s from now
		s.reconfigure(c)
		s.advance(2 * time.Second)
		require.Equal(t, time.Second, s.do(difftest.Op{Kind: difftest.Allow}).Err.Wait)
		c.MaxWaitInHalfOpen = core.WaitForever
		s.reconfigure(c)
		s.advance(time.Hour)
		require.True(t, s.do(difftest.Op{Kind: difftest.Allow}).Err.Matches(core.ErrHalfOpenFull))
	})
	t.Run("open: the deadline is kept, the new open duration applies from the next trip", func(t *testing.T) {
		s := newScript(t, rate)
		s.do(difftest.Op{Kind: difftest.ForceOpen, D: time.Second})
		c := rate
		c.OpenDuration = 5 * time.Second
		s.reconfigure(c)
		require.Equal(t, time.Second, s.do(difftest.Op{Kind: difftest.Allow}).Err.Wait)
		s.advance(time.Second)
		p := s.allow()
		s.record(p, core.Failure)
		s.record(s.allow(), core.Failure)
		require.Equal(t, core.Open, s.counts().State)
	})
	t.Run("ramp-up: kept when its duration is unchanged, ended when changed", func(t *testing.T) {
		c := rate
		c.PermittedCallsInHalfOpen, c.SuccessesToClose, c.RampUpDuration = 1, 1, time.Minute
		s := newScript(t, c)
		s.do(difftest.Op{Kind: difftest.HalfOpen})
		s.record(s.allow(), core.Success)
		rejected := func() int {
			n := 0
			for range 50 {
				if s.do(difftest.Op{Kind: difftest.Allow}).Err.Matches(core.ErrRampingUp) {
					n++
				}
				s.advance(time.Millisecond)
			}
			return n
		}
		require.Positive(t, rejected())
		c.RampUpStartPercent = 100 // the ramp goes on, now admitting all
		s.reconfigure(c)
		require.Zero(t, rejected())
		c.RampUpStartPercent = 0
		s.reconfigure(c)
		require.Positive(t, rejected())
		c.RampUpDuration = 2 * time.Minute // changed: the ramp ends
		s.reconfigure(c)
		require.Zero(t, rejected())
	})
	t.Run("slow calls: never turned on, a permit in flight measured by the new threshold", func(t *testing.T) {
		slow := core.Config{WindowSize: 4, MinimumNumberOfCalls: 1, FailureRateThreshold: 100, OpenDuration: time.Second}
		s := newScript(t, slow)
		c := slow
		c.SlowCallDurationThreshold, c.SlowCallRateThreshold = time.Second, 50
		obs := s.reconfigure(c) // its permits carry no Start to measure from
		require.Contains(t, obs.Err.Text, "SlowCallDurationThreshold")
		slow.SlowCallDurationThreshold, slow.SlowCallRateThreshold = 3*time.Second, 50
		s = newScript(t, slow)
		before := s.allow()
		s.call(core.Success)
		s.advance(2 * time.Second)
		slow.SlowCallDurationThreshold = time.Second
		s.reconfigure(slow)
		s.record(before, core.Success) // 2 s from its Start: slow now
		require.Equal(t, core.Open, s.counts().State, "one slow call of two: 50 %%")
	})
	t.Run("retry-after hints: turned off, a hint is a plain failure; turned on, it trips", func(t *testing.T) {
		c := rate
		c.MaxRetryAfter = 5 * time.Second
		s := newScript(t, c)
		c.MaxRetryAfter = 0
		s.reconfigure(c)
		s.do(difftest.Op{Kind: difftest.RecordHint, Permit: s.allow(), D: time.Second})
		require.Equal(t, core.Closed, s.counts().State, "one failure of five calls")
		c.MaxRetryAfter = 5 * time.Second
		s.reconfigure(c)
		s.do(difftest.Op{Kind: difftest.RecordHint, Permit: s.allow(), D: time.Second})
		require.Equal(t, core.ReasonRetryAfter, s.last().Reason)
	})
	t.Run("backoff step: kept, within the new ladder", func(t *testing.T) {
		c := rate
		c.PermittedCallsInHalfOpen, c.SuccessesToClose, c.FailuresToReopen = 1, 1, 1
		c.OpenDurationBackoff, c.MaxOpenDuration = 2, 16*time.Second
		s := newScript(t, c)
		s.do(difftest.Op{Kind: difftest.ForceOpen, D: time.Second})
		for range 3 { // re-opens at steps 1, 2, 3: 2 s, 4 s, 8 s
			s.advance(8 * time.Second)
			s.record(s.allow(), core.Failure)
		}
		c.MaxOpenDuration = 2 * time.Second // a ladder of one step
		s.reconfigure(c)
		snap, err := s.d.Restart(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), false, 0, time.Hour)
		require.NoError(t, err, "each side's snapshot, and a restore from it")
		require.EqualValues(t, 1, snap.Step)
	})
	t.Run("forced open and disabled: only the rules change", func(t *testing.T) {
		s := newScript(t, rate)
		s.do(difftest.Op{Kind: difftest.ForceOpen})
		c := rate
		c.WindowSize = 3
		s.reconfigure(c)
		require.Equal(t, core.ForcedOpen, s.counts().State)
		s.do(difftest.Op{Kind: difftest.Disable})
		c.WindowSize = 2
		c.MinimumNumberOfCalls = 2
		s.reconfigure(c)
		require.Equal(t, core.Disabled, s.counts().State)
	})
}

// namesClassifier reports whether Settings.Reconfigured names Classifier
// for c on a breaker running with s when c sets none.
func namesClassifier(s core.Settings, c core.Config) bool {
	_, changed, err := s.Reconfigured(c)
	return err == nil && slices.Contains(strings.Split(changed, ","), "Classifier")
}
