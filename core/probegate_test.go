package core_test

// The probe gate (Config.ProbeGate) misused: refusals with odd waits, a
// gate that panics, one that calls back into the breaker from AdmitProbe,
// a probe reported twice. Each case runs on both implementations and ends
// with the same answers, Counts, Metrics and gate calls on both.

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// scriptGate is a core.ProbeGate whose AdmitProbe is admit (nil: let every
// probe go), logging every call it hears.
type scriptGate struct {
	admit func(p core.Permit) (time.Duration, error)
	done  func(p core.Permit, o core.Outcome)

	mu  sync.Mutex
	log []string
}

func (g *scriptGate) AdmitProbe(p core.Permit) (time.Duration, error) {
	g.note(fmt.Sprintf("AdmitProbe(%d)", p.Generation))
	if g.admit == nil {
		return 0, nil
	}
	return g.admit(p)
}

func (g *scriptGate) ProbeDone(p core.Permit, o core.Outcome) {
	g.note(fmt.Sprintf("ProbeDone(%d, %v)", p.Generation, o))
	if g.done != nil {
		g.done(p, o)
	}
}

func (g *scriptGate) note(s string) {
	g.mu.Lock()
	g.log = append(g.log, s)
	g.mu.Unlock()
}

// errGateRefused is a refusal as core.ProbeGate asks: a full half-open
// breaker's.
var errGateRefused = fmt.Errorf("refused by the gate: %w", core.ErrHalfOpenFull)

// probeGateCase is one misuse of the gate: gate returns the gate for the
// breaker b (made from cfg with it), run drives b half-open's probes and
// returns what it saw, as text, for the implementations to agree on.
type probeGateCase struct {
	name string
	gate func(b *breakers.Breaker) *scriptGate
	run  func(t *testing.T, r *rig) string
}

// probeGateCases: the breaker trips on one failure, is open for 1 s and
// lets 2 probes out at once; each case starts it half-open's first Allow
// at 1 s.
var probeGateCases = []probeGateCase{{
	name: "refused with a negative wait: RetryAfter zero, not negative",
	gate: func(*breakers.Breaker) *scriptGate {
		return &scriptGate{admit: func(core.Permit) (time.Duration, error) { return -5 * time.Second, errGateRefused }}
	},
	run: func(t *testing.T, r *rig) string {
		p, err := r.B.Allow()
		require.ErrorIs(t, err, core.ErrHalfOpenFull)
		require.Equal(t, core.Permit{}, p, "a refusal's permit: zero, RetryAfter not negative")
		return "refused"
	},
}, {
	name: "refused with a zero wait",
	gate: func(*breakers.Breaker) *scriptGate {
		return &scriptGate{admit: func(core.Permit) (time.Duration, error) { return 0, errGateRefused }}
	},
	run: func(t *testing.T, r *rig) string {
		p, err := r.B.Allow()
		require.ErrorIs(t, err, core.ErrHalfOpenFull)
		require.Equal(t, core.Permit{}, p)
		return "refused"
	},
}, {
	name: "a wait with a nil refusal lets the probe go",
	gate: func(*breakers.Breaker) *scriptGate {
		return &scriptGate{admit: func(core.Permit) (time.Duration, error) { return time.Minute, nil }}
	},
	run: func(t *testing.T, r *rig) string {
		p := r.A()
		require.True(t, p.Probe)
		require.Zero(t, p.RetryAfter)
		r.D(p, core.Success)
		return r.B.State().String()
	},
}, {
	name: "AdmitProbe panics: the slot given back, the panic goes on, ProbeDone never told",
	gate: func(*breakers.Breaker) *scriptGate {
		n := 0
		return &scriptGate{admit: func(core.Permit) (time.Duration, error) {
			if n++; n == 1 {
				panic("gate down")
			}
			return 0, nil
		}}
	},
	run: func(t *testing.T, r *rig) string {
		require.PanicsWithValue(t, "gate down", func() { _, _ = r.B.Allow() })
		require.Zero(t, r.B.Counts().ProbesInFlight)
		p1, p2 := r.A(), r.A()
		r.Reject(core.ErrHalfOpenFull) // 2 slots, both out: none leaked to the panic
		r.D(p1, core.Success)
		r.D(p2, core.Success)
		return r.B.State().String()
	},
}, {
	name: "ProbeDone panics: the outcome recorded first, the panic goes on",
	gate: func(*breakers.Breaker) *scriptGate {
		return &scriptGate{done: func(core.Permit, core.Outcome) { panic("told too late") }}
	},
	run: func(t *testing.T, r *rig) string {
		p := r.A()
		require.PanicsWithValue(t, "told too late", func() { r.D(p, core.Failure) })
		require.Equal(t, core.Open, r.B.State())
		return r.B.State().String()
	},
}, {
	name: "AdmitProbe calls Allow: the nested probe is asked about too",
	gate: func(b *breakers.Breaker) *scriptGate {
		var nested []core.Permit
		g := &scriptGate{}
		g.admit = func(core.Permit) (time.Duration, error) {
			if len(nested) == 0 {
				nested = append(nested, core.Permit{})
				p, err := (*b).Allow()
				if err == nil {
					(*b).Done(p, nil)
				}
			}
			return 0, nil
		}
		return g
	},
	run: func(t *testing.T, r *rig) string {
		p := r.A()
		r.D(p, core.Success)
		return r.B.State().String()
	},
}, {
	name: "AdmitProbe calls ForceOpen and lets the probe go: a stale probe, told once",
	gate: func(b *breakers.Breaker) *scriptGate {
		return &scriptGate{admit: func(core.Permit) (time.Duration, error) {
			if err := (*b).ForceOpen(0); err != nil {
				panic(err)
			}
			return 0, nil
		}}
	},
	run: func(t *testing.T, r *rig) string {
		p := r.A()
		require.Equal(t, core.ForcedOpen, r.B.State())
		r.D(p, core.Success)
		return r.B.State().String()
	},
}, {
	name: "AdmitProbe calls Reset and refuses",
	gate: func(b *breakers.Breaker) *scriptGate {
		return &scriptGate{admit: func(core.Permit) (time.Duration, error) {
			(*b).Reset()
			return time.Second, errGateRefused
		}}
	},
	run: func(t *testing.T, r *rig) string {
		r.Reject(core.ErrHalfOpenFull)
		r.X(core.Success)
		return r.B.State().String()
	},
}, {
	name: "AdmitProbe records the probe's failure itself, then refuses it",
	gate: func(b *breakers.Breaker) *scriptGate {
		return &scriptGate{admit: func(p core.Permit) (time.Duration, error) {
			(*b).Record(p, core.Failure)
			return time.Second, errGateRefused
		}}
	},
	run: func(t *testing.T, r *rig) string {
		r.Reject(core.ErrHalfOpenFull)
		return r.B.State().String()
	},
}, {
	name: "a probe reported twice is told twice; no slot freed twice",
	gate: func(*breakers.Breaker) *scriptGate { return &scriptGate{} },
	run: func(t *testing.T, r *rig) string {
		p1, p2 := r.A(), r.A()
		r.D(p1, core.Ignored)
		r.D(p1, core.Ignored) // releases p2's slot: the documented misuse
		require.Zero(t, r.B.Counts().ProbesInFlight)
		r.D(p2, core.Ignored) // no probe in flight: dropped
		require.Zero(t, r.B.Counts().ProbesInFlight)
		return r.B.State().String()
	},
}}

// TestProbeGateMisuse runs probeGateCases on both implementations: each
// ends with no probe slot in flight and agrees on answers, Counts, Metrics
// and the gate's calls.
func TestProbeGateMisuse(t *testing.T) {
	for _, c := range probeGateCases {
		t.Run(c.name, func(t *testing.T) {
			var seen []string
			forEachImpl(t, func(t *testing.T, mk maker) {
				var b breakers.Breaker
				g := c.gate(&b)
				r := mk.build(t, core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second,
					PermittedCallsInHalfOpen: 2, SuccessesToClose: 2, CollectMetrics: true, ProbeGate: g})
				b = r.B
				r.X(core.Failure)
				r.At(1)
				out := c.run(t, r)
				require.Zero(t, r.B.Counts().ProbesInFlight, "a probe slot leaked")
				g.mu.Lock()
				defer g.mu.Unlock()
				seen = append(seen, fmt.Sprintf("%s\n%+v\n%+v\n%q", out, r.B.Counts(), r.B.Metrics(), g.log))
			})
			for _, s := range seen[min(1, len(seen)):] {
				require.Equal(t, seen[0], s, "the implementations disagree")
			}
		})
	}
}
