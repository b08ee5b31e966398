package suite

import (
	"strconv"
	"testing"

	"github.com/casbreaker/casbreaker/core"
)

// Smoke runs every adapter of impls once through what each body relies
// on, in well under a second, so that `go test` catches a broken adapter
// without running a benchmark: closed calls under every policy stay
// admitted, every cell of Mix stays closed, a tripped breaker rejects, a
// few storm rounds admit the probe count (exactly, where the
// implementation claims it), churn ends, and the constructors build.
func Smoke(t *testing.T, impls []Impl) {
	for _, im := range impls {
		t.Run(im.Name, func(t *testing.T) {
			for _, p := range Policies {
				t.Run("closed/"+p.Name, func(t *testing.T) {
					br := build(t, im, Spec{Policy: p})
					if got := br.Run(300, allSuccess); got != 300 {
						t.Fatalf("%d of 300 successful calls admitted on a closed breaker", got)
					}
					br.Snapshot(3)
				})
				for _, m := range Mixes {
					t.Run("mixed/"+p.Name+"/"+m.Name, func(t *testing.T) {
						br := build(t, im, Spec{Policy: p, FailurePct: m.Pct})
						if got := br.Run(300, Pattern(m.Pct, 100)); got != 300 {
							t.Fatalf("%d of 300 calls admitted on a closed breaker", got)
						}
						if s := br.State(); s != core.Closed {
							t.Fatalf("state %v after calls that must not trip", s)
						}
					})
				}
			}
			for _, w := range MixWindows {
				for _, r := range MixRates {
					t.Run("mix/"+w.Name+"/"+r.Name, func(t *testing.T) {
						br := build(t, im, Spec{Policy: w.Policy, FailurePerMille: r.perMille()})
						// Twice the pattern or the window, whichever is
						// longer: the failures are in, and the rate rule
						// has judged a full window.
						n := 2 * max(r.Every, 100)
						if got := br.Run(n, r.Outcomes()); got != n {
							t.Fatalf("%d of %d calls admitted on a closed breaker", got, n)
						}
						if s := br.State(); s != core.Closed {
							t.Fatalf("state %v after calls that must not trip", s)
						}
					})
				}
			}
			t.Run("open", func(t *testing.T) {
				br := build(t, im, Spec{Policy: Consecutive, AnyRule: true})
				Trip(t, br)
				if got := br.Run(10, allSuccess); got != 0 {
					t.Fatalf("an open breaker admitted %d of 10 calls", got)
				}
			})
			for _, p := range StormProbes {
				t.Run("storm/probes="+strconv.Itoa(p), func(t *testing.T) {
					br := build(t, im, StormSpec(p))
					Trip(t, br)
					s := NewStorm(br, 8)
					defer s.Stop()
					for range 3 {
						br.Expire()
						n, _ := s.Round()
						if n < 1 || (im.ExactProbes && n != p) {
							t.Fatalf("a storm round admitted %d probes, want %d", n, p)
						}
					}
				})
			}
			t.Run("churn", func(t *testing.T) {
				spec := ChurnSpec
				spec.Clock = core.NewManualClock(0)
				br := build(t, im, spec)
				for i := range 400 {
					if br.Run(1, ChurnPattern[i%16:i%16+1]) == 0 {
						br.Expire()
					}
				}
			})
			if im.Construct != nil {
				t.Run("new", func(t *testing.T) {
					for _, w := range Windows {
						if _, err := im.Construct(Spec{Policy: w.Policy}); err != nil {
							if _, ok := err.(Unsupported); !ok {
								t.Fatal(err)
							}
						}
					}
				})
			}
		})
	}
}
