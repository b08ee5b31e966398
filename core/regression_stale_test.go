package core_test

// Regressions in which a stale result corrupted the new state (B09, B11
// and B27 of docs/regressions.md): an outcome whose permit was granted in an
// earlier generation changes no state, no open deadline and no notification.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// B09 (Hystrix #1853, #1861): a late non-success from an older command
// flipped half-open to open and the real probe's success then failed to close.
func TestRegression_StaleOutcomeCannotFlipHalfOpen(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: 5 * time.Second}
	for _, late := range []core.Outcome{F, S, I} {
		t.Run(late.String(), func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				r := mk.build(t, cfg)
				pOld := r.A()
				r.XN(2, F)
				pProbe := r.At(5).A()
				r.At(6).D(pOld, late)
				r.Is(core.HalfOpen)
				r.Reject(core.ErrHalfOpenFull)
				r.At(7).D(pProbe, S)
				r.Is(core.Closed)
				require.Equal(t, []string{"C>O@0", "O>H@5", "H>C@7"}, r.CBs())
			})
		})
	}
}

// B11 (Polly #219): failures from calls started before the break re-fired
// the on-break notification for the same open period.
func TestRegression_PreBreakFailuresDoNotRefireBreak(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		r := mk.build(t, core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 4, OpenDuration: 10 * time.Second})
		ps := make([]core.Permit, 6)
		for i := range ps {
			ps[i] = r.A()
		}
		r.At(1)
		for _, p := range ps[:4] {
			r.D(p, F)
		}
		r.Is(core.Open)
		r.At(2)
		r.D(ps[4], F)
		r.D(ps[5], F)
		r.At(10.999).Reject(core.ErrOpen)
		r.At(11).A()
		require.Equal(t, []string{"C>O@1", "O>H@11"}, r.CBs())
	})
}

// B27. nodeshift/opossum #385: a sixth concurrent failure arriving after the
// fifth had opened the breaker cancelled the half-open timer without
// re-arming it, so the breaker never reached half-open.
func TestRegression_LateFailureDoesNotMoveOpenDeadline(t *testing.T) {
	cfg := core.Config{WindowSize: 10, FailureRateThreshold: 50, MinimumNumberOfCalls: 5,
		OpenDuration: 10 * time.Second, PermittedCallsInHalfOpen: 1}
	forEachImpl(t, func(t *testing.T, mk maker) {
		setup := func() (*rig, core.Permit) {
			r := mk.build(t, cfg)
			ps := make([]core.Permit, 6)
			for i := range ps {
				ps[i] = r.A()
			}
			r.At(1)
			for i := range 5 {
				r.Is(core.Closed)
				r.D(ps[i], F)
			}
			r.Is(core.Open)
			return r, ps[5]
		}

		r, p6 := setup()
		r.At(9).D(p6, F) // stale
		r.Is(core.Open)
		r.Reject(core.ErrOpen)
		regMs(r, 10_999).Reject(core.ErrOpen) // openedAt still 1: not 9 ...
		r.At(11).A()                          // ... and not cleared
		r.Is(core.HalfOpen)
		require.Equal(t, []string{"C>O@1", "O>H@11"}, r.CBs())

		// Variant: the late failure arrives during half-open; the probe alone decides.
		for _, probe := range []core.Outcome{S, F} {
			r, p6 = setup()
			p := r.At(11).A()
			r.At(11.5).D(p6, F)
			r.Is(core.HalfOpen)
			r.Reject(core.ErrHalfOpenFull) // the probe's slot is still taken
			r.D(p, probe)
			if probe == S {
				r.Is(core.Closed)
				r.Cnt(0, 0, 0, 0)
				require.Equal(t, []string{"C>O@1", "O>H@11", "H>C@11.5"}, r.CBs())
			} else {
				r.Is(core.Open)
				require.Equal(t, []string{"C>O@1", "O>H@11", "H>O@11.5"}, r.CBs())
			}
		}
	})
}
