package difftest

import (
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Alternatives is a table of configs a history on a breaker built from
// base may reconfigure it to (Op.Config): base itself (nothing changes,
// unless base has a function, which Settings.Reconfigured always names),
// and base with one group of rule fields changed each: a threshold, the
// window's size up and down, its kind, its bucket width, the half-open
// probes down to one and up, the ramp-up's duration and its start alone,
// the run of failures on, changed and off, the max wait and wait forever,
// the open duration and a backoff, slow calls on and off, hints on and
// off; two configs Validate refuses; and the open durations tripled.
// Some of the changed ones may be invalid for some bases too (a window
// below the minimum of calls, a config with no trip rule left):
// Reconfigure must refuse them as New does. The table is the same for the same base, in the same order.
func Alternatives(base core.Config) []core.Config {
	alt := func(change func(*core.Config)) core.Config {
		c := base
		change(&c)
		return c
	}
	return []core.Config{
		base,
		alt(func(c *core.Config) { c.FailureRateThreshold = 1 + (c.FailureRateThreshold+36)%100 }),
		alt(func(c *core.Config) { c.FailureCountThreshold = 1 + c.FailureCountThreshold%3 }),
		alt(func(c *core.Config) { c.WindowSize += 3 }),
		alt(func(c *core.Config) {
			c.WindowSize = max(1, c.WindowSize/2)
			c.MinimumNumberOfCalls = min(c.MinimumNumberOfCalls, c.WindowSize)
		}),
		alt(func(c *core.Config) {
			c.WindowType = 1 - c.WindowType
			c.BucketWidth = 0
			c.WindowSize = max(c.WindowSize, 1)
		}),
		alt(func(c *core.Config) {
			c.WindowType, c.WindowSize = core.TimeBased, max(c.WindowSize, 1)
			if c.BucketWidth == 250*time.Millisecond {
				c.BucketWidth = 100 * time.Millisecond
			} else {
				c.BucketWidth = 250 * time.Millisecond
			}
		}),
		alt(func(c *core.Config) { c.PermittedCallsInHalfOpen, c.SuccessesToClose, c.FailuresToReopen = 1, 1, 1 }),
		alt(func(c *core.Config) {
			c.PermittedCallsInHalfOpen, c.SuccessesToClose, c.FailuresToReopen = 4, 3, 2
		}),
		alt(func(c *core.Config) { c.RampUpDuration += 700 * time.Millisecond }),
		alt(func(c *core.Config) { c.RampUpStartPercent = (c.RampUpStartPercent + 50) % 101 }),
		alt(func(c *core.Config) { c.ConsecutiveFailures = 1 + (c.ConsecutiveFailures+1)%4 }),
		alt(func(c *core.Config) { c.ConsecutiveFailures = 0 }),
		alt(func(c *core.Config) { c.MaxWaitInHalfOpen = 1500*time.Millisecond + c.MaxWaitInHalfOpen/2 }),
		alt(func(c *core.Config) { c.MaxWaitInHalfOpen = core.WaitForever }),
		alt(func(c *core.Config) {
			c.OpenDuration *= 2
			if c.OpenDurationFunc == nil {
				c.OpenDurationBackoff, c.MaxOpenDuration = 2, 8*c.OpenDuration
			}
		}),
		alt(func(c *core.Config) {
			if c.SlowCallDurationThreshold > 0 {
				c.SlowCallDurationThreshold, c.SlowCallRateThreshold = 0, 0
			} else {
				c.SlowCallDurationThreshold, c.SlowCallRateThreshold = 300*time.Millisecond, 50
			}
		}),
		alt(func(c *core.Config) {
			if c.MaxRetryAfter > 0 {
				c.MaxRetryAfter = 0
			} else {
				c.MaxRetryAfter = 2 * time.Second
			}
		}),
		alt(func(c *core.Config) { c.FailureRateThreshold = 101 }),
		alt(func(c *core.Config) { c.OpenDuration = -1 }),
		// Every open duration three times as long, the ladder as long as
		// it was: a kept step backs off from its new duration.
		alt(func(c *core.Config) { c.OpenDuration, c.MaxOpenDuration = 3*c.OpenDuration, 3*c.MaxOpenDuration }),
	}
}

// Follows reports whether notification tr may come right after last: it
// starts where last ended, at the next generation, or, for a
// reconfiguration, it stays where last ended, in the same generation. The
// zero Transition stands for "none yet": a breaker starts closed at
// generation 0.
func Follows(last, tr core.Transition) bool {
	if tr.Reason == core.ReasonReconfigured {
		return tr.From == last.To && tr.To == tr.From && tr.Generation == last.Generation && tr.OpenUntil == 0 && tr.Changed != ""
	}
	return tr.From == last.To && tr.Generation == last.Generation+1 && tr.Changed == ""
}

// reconfigured checks a Reconfigure against docs/semantics.md R18, from
// the first side's counts and notification count before it: refused as
// Settings.Reconfigured refuses it, with nothing changed; a no-op when it
// changes no rule field; otherwise one notification in the current
// generation, at the clock's reading, naming the changed fields, the state
// and the generation kept and the run of failures kept or dropped, then
// at most a half-open verdict; and the Differ goes on with the new config.
func (d *Differ) reconfigured(op Op, o Obs, before core.Counts, beforeM core.Metrics, beforeN int) error {
	n, changed, err := d.settings.Reconfigured(*op.Config)
	if err != nil {
		if o.Err != ErrOf(err) {
			return d.fail("%v = %v, want %v", op, o.Err, err)
		}
		return d.unchanged(op, before, beforeM, beforeN)
	}
	if !o.Err.Nil() {
		return d.fail("%v = %v, want nil", op, o.Err)
	}
	if changed == "" {
		return d.unchanged(op, before, beforeM, beforeN)
	}
	s0 := d.Sides[0]
	seen, c := s0.Since(beforeN), s0.B.Counts()
	// The state is the one committed: Counts reports an open breaker
	// whose deadline has passed as half-open, and a reconfiguration keeps
	// it open (Follows holds the notification to the chain's).
	st := before.State
	if len(seen) > 0 && seen[0].From == core.Open && st == core.HalfOpen {
		st = core.Open
	}
	want := core.Transition{Name: n.Name, From: st, To: st, Reason: core.ReasonReconfigured,
		Generation: before.Generation, At: d.Now(), Changed: changed}
	if w, ok := core.Clock(s0.Clock).(core.WallClock); ok {
		want.Time = w.Wall(want.At)
	}
	if len(seen) == 0 || seen[0].Transition != want {
		return d.fail("%v: the first notification is %+v, want %+v", op, at(seen, 0), want)
	}
	switch {
	case len(seen) == 2 && st == core.HalfOpen && (seen[1].Reason == core.ReasonProbeFailed || seen[1].Reason == core.ReasonProbesPassed):
	case len(seen) == 1:
		consec := before.ConsecutiveFailures
		if n.ConsecutiveFailures == 0 {
			consec = 0
		}
		if c.Generation != before.Generation || c.State != before.State || c.ConsecutiveFailures != consec ||
			c.ProbesInFlight != before.ProbesInFlight || c.ProbeSuccesses != before.ProbeSuccesses || c.ProbeFailures != before.ProbeFailures {
			return d.fail("%v: counts %+v -> %+v", op, before, c)
		}
	default:
		return d.fail("%v: %d notifications %+v, want the reconfiguration's and at most a half-open verdict", op, len(seen), seen)
	}
	// The breakers keep their own wiring; so does the Differ's config,
	// which a Restart builds the new sides from.
	c2 := *op.Config
	c2.Name, c2.Clock, c2.OnStateChange, c2.CollectMetrics = d.cfg.Name, d.cfg.Clock, d.cfg.OnStateChange, d.cfg.CollectMetrics
	c2.OpenGate, c2.ProbeGate, c2.InitialState = d.cfg.OpenGate, d.cfg.ProbeGate, d.cfg.InitialState
	d.cfg, d.settings = c2, n
	return nil
}
