package difftest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// ErrProbeRefused is what a ProbeGate's refusals match (besides
// core.ErrRejected and core.ErrHalfOpenFull), so that the Differ can tell
// a gate's refusal, whose wait the breaker's RetryAfter does not know,
// from the breaker's own.
var ErrProbeRefused = errors.New("difftest: probe refused by the probe gate")

// ProbeGate is a core.ProbeGate for a Differ's config that refuses probes
// at random, each with a wait, and logs every call. Set
// Config.ProbeGate to a *ProbeGate: NewOf gives each side a copy of its
// own (Side.Probes), and every copy refuses the same calls (the n-th
// AdmitProbe of each, drawn from Seed), so sides that probe alike are
// refused alike; after every step the Differ requires the copies to have
// heard the same calls, in the same order. Safe for concurrent use.
type ProbeGate struct {
	// Seed draws the refusals and their waits; RefusePercent is the share
	// of AdmitProbe calls refused, 0..100.
	Seed          uint64
	RefusePercent int

	mu    sync.Mutex
	rng   *rand.Rand
	calls []probeCall
}

// probeCall is one call a ProbeGate heard: AdmitProbe (and its answer) or
// ProbeDone (and the outcome).
type probeCall struct {
	done    bool
	gen     uint64
	wait    time.Duration // AdmitProbe's refusal: its wait; 0: let go
	outcome core.Outcome  // ProbeDone's
}

func (c probeCall) String() string {
	switch {
	case c.done:
		return fmt.Sprintf("ProbeDone(generation %d, %v)", c.gen, c.outcome)
	case c.wait > 0:
		return fmt.Sprintf("AdmitProbe(generation %d) refused for %v", c.gen, c.wait)
	}
	return fmt.Sprintf("AdmitProbe(generation %d) let go", c.gen)
}

// fork is a fresh copy of g for one side: same seed, nothing heard.
func (g *ProbeGate) fork() *ProbeGate {
	return &ProbeGate{Seed: g.Seed, RefusePercent: g.RefusePercent}
}

// AdmitProbe refuses one call in RefusePercent, for 1 ms to 2 s.
func (g *ProbeGate) AdmitProbe(p core.Permit) (time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rng == nil {
		g.rng = rand.New(rand.NewPCG(g.Seed, 25))
	}
	c := probeCall{gen: p.Generation}
	if g.rng.IntN(100) < g.RefusePercent {
		c.wait = time.Duration(1+g.rng.IntN(2000)) * time.Millisecond
	}
	g.calls = append(g.calls, c)
	if c.wait == 0 {
		return 0, nil
	}
	return c.wait, probeRefusal{c.wait}
}

// ProbeDone logs the outcome.
func (g *ProbeGate) ProbeDone(p core.Permit, o core.Outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, probeCall{done: true, gen: p.Generation, outcome: o})
}

// since returns the calls heard from the i-th on.
func (g *ProbeGate) since(i int) []probeCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]probeCall(nil), g.calls[min(i, len(g.calls)):]...)
}

// probeRefusal is a ProbeGate's refusal: a full half-open breaker's
// rejection for wait, as core.ProbeGate asks.
type probeRefusal struct{ wait time.Duration }

func (r probeRefusal) Error() string {
	return fmt.Sprintf("difftest: probe refused by the probe gate for %v", r.wait)
}

func (r probeRefusal) Is(target error) bool {
	return target == ErrProbeRefused || target == core.ErrRejected || target == core.ErrHalfOpenFull
}

// RetryAfter is the refusal's wait, for core.RetryAfterOf.
func (r probeRefusal) RetryAfter() time.Duration { return r.wait }
