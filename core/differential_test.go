package core_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// The lock-free breaker and the mutex baseline agree at every step of random
// sequential histories: admission, rejection kind and wait, state, counts and
// notifications. (The fuzz target of issue 3 explores further; this is the
// quick version that runs on every `go test`.)
func TestDifferentialRandomHistories(t *testing.T) {
	n := rounds(2000, 200)
	kinds := map[string]int{} // which transitions the histories reached
	for seed := range n {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		cfg := randomConfig(rng)
		lf := maker{new: impls[0].New}.build(t, cfg)
		mu := maker{new: impls[1].New}.build(t, cfg)
		var held []core.Permit // the same permits for both: the generations agree
		for step := range 300 {
			where := fmt.Sprintf("seed %d step %d cfg %+v", seed, step, cfg)
			switch op := rng.IntN(10); {
			case op < 4:
				p1, e1 := lf.B.Allow()
				p2, e2 := mu.B.Allow()
				require.Equal(t, e1, e2, where)
				require.Equal(t, p1, p2, where)
				if e1 == nil {
					held = append(held, p1)
				}
			case op < 7 && len(held) > 0:
				i := rng.IntN(len(held))
				p := held[i]
				held = append(held[:i], held[i+1:]...)
				o := core.Outcome(rng.IntN(3))
				lf.B.Record(p, o)
				mu.B.Record(p, o)
			case op < 9:
				d := time.Duration(rng.IntN(4000)) * time.Millisecond
				if rng.IntN(10) == 0 {
					d = -d / 4 // backwards (R14)
				}
				lf.Clock.Advance(d)
				mu.Clock.Advance(d)
			default:
				require.Equal(t, lf.B.State(), mu.B.State(), where)
			}
			require.Equal(t, lf.B.Counts(), mu.B.Counts(), where)
			require.Equal(t, lf.Transitions(), mu.Transitions(), where)
		}
		for _, tr := range lf.Transitions() {
			kinds[letter(tr.From)+">"+letter(tr.To)]++
		}
	}
	t.Logf("transitions reached: %v", kinds)
	for _, k := range []string{"C>O", "O>H", "H>O", "H>C"} {
		require.Greater(t, kinds[k], n/10, "histories too tame to compare %s", k)
	}
}

func randomConfig(rng *rand.Rand) core.Config {
	for {
		c := core.Config{
			WindowType:               core.WindowType(rng.IntN(2)),
			WindowSize:               1 + rng.IntN(12),
			MinimumNumberOfCalls:     rng.IntN(6),
			OpenDuration:             time.Duration(1+rng.IntN(5000)) * time.Millisecond,
			PermittedCallsInHalfOpen: rng.IntN(4),
			SuccessesToClose:         rng.IntN(4),
			Classifier:               func(error) core.Outcome { return core.Failure },
		}
		switch rng.IntN(4) {
		case 0:
			c.FailureRateThreshold = 1 + rng.IntN(100)
		case 1:
			c.FailureCountThreshold = 1 + rng.IntN(5)
		case 2:
			c.ConsecutiveFailures = 1 + rng.IntN(5)
			if rng.IntN(2) == 0 {
				c.WindowSize = 0
			}
		default:
			c.FailureRateThreshold = 1 + rng.IntN(100)
			c.ConsecutiveFailures = 1 + rng.IntN(5)
			c.SlowCallRateThreshold = 1 + rng.IntN(100)
			c.SlowCallDurationThreshold = time.Duration(1+rng.IntN(3000)) * time.Millisecond
		}
		if rng.IntN(3) == 0 {
			c.OpenDurationBackoff = 1 + rng.Float64()*3
			c.MaxOpenDuration = c.OpenDuration * time.Duration(1+rng.IntN(20))
		}
		if _, err := c.Validate(); err == nil {
			return c
		} else if !errors.Is(err, core.ErrInvalidConfig) {
			panic(err)
		}
	}
}
