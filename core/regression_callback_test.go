package core_test

// Regressions in state-change callbacks under concurrency (B12 and B13 of
// docs/regressions.md): racing probes commit one transition, notifications
// arrive once and in order, and a listener may call back into the breaker.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
)

// B12 (resilience4j #646, #562, #674): racing half-open failures attempted a
// second open transition and threw "illegal transition" into callers.
func TestRegression_RacingProbeFailuresOpenOnce(t *testing.T) {
	for _, slowListener := range []bool{false, true} {
		t.Run(map[bool]string{false: "listener=fast", true: "listener=sleeps"}[slowListener], func(t *testing.T) {
			forEachImpl(t, func(t *testing.T, mk maker) {
				n := rounds(10000, 100)
				if slowListener {
					n = rounds(200, 10)
				}
				for round := range n {
					var listen []func(core.Transition)
					if slowListener {
						listen = append(listen, func(core.Transition) { time.Sleep(time.Millisecond) })
					}
					r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 50, MinimumNumberOfCalls: 10,
						OpenDuration: time.Second, PermittedCallsInHalfOpen: 8}, listen...)
					r.XN(10, F)
					r.At(1)
					ps := make([]core.Permit, 8)
					for i := range ps {
						ps[i] = r.A()
					}
					parallel(8, func(i int) { r.D(ps[i], F) })
					r.Is(core.Open)
					r.At(1.999).Reject(core.ErrOpen)
					r.At(2)
					var granted atomic.Int32
					parallel(64, func(int) {
						if _, err := r.B.Allow(); err == nil {
							granted.Add(1)
						}
					})
					require.LessOrEqual(t, granted.Load(), int32(8))
					require.Equal(t, []string{"C>O@0", "O>H@1", "H>O@1", "O>H@2"}, r.CBs(), "round %d", round)
				}
			})
		})
	}
}

// B13 (gobreaker #37, gascity #4839): a listener that called back into the
// breaker deadlocked on its mutex; dispatching after unlock then let
// notifications arrive out of order.
func TestRegression_ListenerMayCallBackIntoBreaker(t *testing.T) {
	forEachImpl(t, func(t *testing.T, mk maker) {
		t.Run("no deadlock", func(t *testing.T) {
			var r *rig
			type seen struct {
				tr    core.Transition
				state core.State
				err   error
			}
			var got []seen
			listener := func(tr core.Transition) {
				st := r.B.State()
				_ = r.B.Counts()
				p, err := r.B.Allow()
				if err == nil {
					r.B.Record(p, core.Ignored)
				}
				got = append(got, seen{tr, st, err})
			}
			r = mk.build(t, core.Config{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: time.Second}, listener)
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.XN(2, F)
				require.Len(t, got, 1)
				require.Equal(t, core.Open, got[0].state)
				require.ErrorIs(t, got[0].err, core.ErrOpen)
				p := r.At(1).A()
				require.Len(t, got, 2)
				require.Equal(t, core.HalfOpen, got[1].state)
				r.D(p, S)
				require.Len(t, got, 3)
				require.Equal(t, core.Closed, got[2].state)
			}()
			select {
			case <-done:
			case <-time.After(2 * time.Second): // a watchdog, not a timing assertion: a deadlock never returns
				t.Fatal("deadlock: a listener calling into the breaker did not return")
			}
		})
		t.Run("ordering", func(t *testing.T) {
			for round := range rounds(10000, 200) {
				r := mk.build(t, core.Config{WindowSize: 100, FailureRateThreshold: 50, MinimumNumberOfCalls: 10,
					OpenDuration: time.Second, PermittedCallsInHalfOpen: 3})
				r.XN(10, F)
				r.At(1)
				ps := make([]core.Permit, 3)
				parallel(3, func(i int) { ps[i], _ = r.B.Allow() })
				parallel(3, func(i int) { r.D(ps[i], []core.Outcome{S, F, S}[i]) })
				r.At(2)
				parallel(16, func(int) {
					if p, err := r.B.Allow(); err == nil {
						r.D(p, S)
					}
				})
				trs := r.Transitions()
				for i := 1; i < len(trs); i++ {
					require.Equal(t, trs[i-1].To, trs[i].From, "round %d: %v", round, r.CBs())
					require.Equal(t, trs[i-1].Generation+1, trs[i].Generation)
				}
				require.Equal(t, trs[len(trs)-1].To, r.B.Counts().State, "round %d", round)
			}
		})
	})
}
