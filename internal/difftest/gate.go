package difftest

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/casbreaker/casbreaker/core"
)

// Gate is a core.OpenGate for a Differ's config that refuses trips at
// random and keeps count. Set Config.OpenGate to a *Gate: NewOf gives each
// side a copy of its own (Side.Gate), and every copy refuses the same
// calls (the n-th TryAcquire of each, drawn from Seed), so sides that
// trip alike are refused alike. After every step the Differ holds each
// copy to the rule of core.OpenGate: one slot held while the side's
// breaker is open, half-open or forced open, none otherwise, and never a
// Release without a slot. Safe for concurrent use.
type Gate struct {
	// Seed draws the refusals; RefusePercent is the share of TryAcquire
	// calls refused, 0..100.
	Seed          uint64
	RefusePercent int

	mu      sync.Mutex
	rng     *rand.Rand
	held    int
	refused int
	misuse  string // the first Release with no slot held
}

// fork is a fresh copy of g for one side: same seed, no slot held.
func (g *Gate) fork() *Gate {
	return &Gate{Seed: g.Seed, RefusePercent: g.RefusePercent, rng: rand.New(rand.NewPCG(g.Seed, 24))}
}

// TryAcquire reserves a slot, or refuses one call in RefusePercent.
func (g *Gate) TryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rng == nil {
		g.rng = rand.New(rand.NewPCG(g.Seed, 24))
	}
	if g.rng.IntN(100) < g.RefusePercent {
		g.refused++
		return false
	}
	g.held++
	return true
}

// Acquire takes a slot.
func (g *Gate) Acquire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held++
}

// Release gives a slot back; one with none held is recorded as a misuse.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == 0 {
		if g.misuse == "" {
			g.misuse = "Release with no slot held"
		}
		return
	}
	g.held--
}

// Held is the number of slots held, and Refused the TryAcquire calls
// refused so far.
func (g *Gate) Held() (held, refused int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.refused
}

// check returns an error if g's count is not the one a breaker in state
// st holds (core.OpenGate), or a misuse happened.
func (g *Gate) check(st core.State) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	want := 0
	if st == core.Open || st == core.HalfOpen || st == core.ForcedOpen {
		want = 1
	}
	if g.misuse != "" || g.held != want {
		return fmt.Errorf("open gate: %d slots held in state %v, want %d%s", g.held, st, want, ifAny(g.misuse))
	}
	return nil
}

func ifAny(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}
