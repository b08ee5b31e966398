package race_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

var (
	errFail    = errors.New("dependency failed")
	errIgnored = errors.New("ignored by the classifier")
	errPanic   = errors.New("the classifier panics on this one")
)

// classify is the classifier of the stale-generation test: errIgnored is
// Ignored, errPanic makes it panic (R10: the permit is released as Ignored
// and the panic propagates), the rest follows R9.
func classify(err error) core.Outcome {
	switch {
	case errors.Is(err, errPanic):
		panic(errPanic)
	case errors.Is(err, errIgnored):
		return core.Ignored
	}
	return core.DefaultClassifier(err)
}

// Stale generations (R8; regressions B09, B10, B11, B12, B27, B29; scenario
// S9). A driver goroutine runs a random script of calls, held permits and
// clock steps, which makes the breaker trip, probe, re-open and close, on
// two breakers of the same implementation: the subject and a control. Every
// permit the driver holds past the end of its generation goes to a pool,
// and hammer goroutines complete those stale permits on the subject only,
// over and over, in every way an outcome can arrive: Record with success,
// failure and ignored, Done with nil, a failure, context.Canceled,
// context.DeadlineExceeded, an ignored error and an error on which the
// classifier panics. Since no stale outcome may change anything, the
// subject must equal the control after every step of the script: the same
// counts (window, consecutive failures, probes in flight and successes,
// generation), the same state, the same admissions with the same permits
// and rejection waits (so the same open deadline), and the same
// notifications.
func TestStaleGenerationsChangeNothing(t *testing.T) {
	procs(t, 6)
	cfgs := []core.Config{
		{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, OpenDuration: time.Second,
			OpenDurationBackoff: 2, MaxOpenDuration: 4 * time.Second, PermittedCallsInHalfOpen: 3, SuccessesToClose: 2},
		{WindowType: core.TimeBased, WindowSize: 3, FailureCountThreshold: 2, OpenDuration: 700 * time.Millisecond,
			PermittedCallsInHalfOpen: 2, SuccessesToClose: 3, SlowCallRateThreshold: 100, SlowCallDurationThreshold: 400 * time.Millisecond},
		{ConsecutiveFailures: 2, OpenDuration: 500 * time.Millisecond, PermittedCallsInHalfOpen: 2},
	}
	scripts := size(150, 16)
	forEachImpl(t, func(t *testing.T, newB newFunc) {
		var staleDone int64
		for ci, cfg := range cfgs {
			kinds := map[string]int{}
			for s := range scripts {
				staleDone += staleScript(t, newB, cfg, uint64(ci*100_000+s), size(300, 120), kinds)
			}
			for _, k := range []string{"C>O", "O>H", "H>O", "H>C"} {
				if kinds[k] == 0 {
					t.Fatalf("config %d: the scripts never reached %s (%v): too tame to prove anything", ci, k, kinds)
				}
			}
			t.Logf("config %d: transitions reached %v", ci, kinds)
		}
		t.Logf("%d scripts x %d configs; %d stale outcomes delivered during them", scripts, len(cfgs), staleDone)
	})
}

// staleScript runs one script and returns how many stale outcomes the
// hammers delivered while it ran.
func staleScript(t *testing.T, newB newFunc, cfg core.Config, seed uint64, steps int, kinds map[string]int) int64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	cfg.Classifier = classify
	var subRec, ctlRec transitions
	subClock, ctlClock := core.NewManualClock(0), core.NewManualClock(0)
	sc, cc := cfg, cfg
	sc.Clock, sc.OnStateChange = subClock, subRec.listen
	cc.Clock, cc.OnStateChange = ctlClock, ctlRec.listen
	sub, ctl := mustNew(t, newB, sc), mustNew(t, newB, cc)

	pool := &stalePool{}
	stop := make(chan struct{})
	var delivered atomic.Int64
	var fault atomic.Pointer[string]
	var hammers sync.WaitGroup
	for h := range 3 {
		hammers.Go(func() {
			hrng := rand.New(rand.NewPCG(seed, uint64(h)+10))
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, ok := pool.pick(hrng)
				if !ok {
					runtime.Gosched() // nothing stale yet
					continue
				}
				if msg := completeStale(sub, p, hrng.IntN(10)); msg != "" {
					fault.CompareAndSwap(nil, &msg)
				}
				delivered.Add(1)
			}
		})
	}
	defer func() {
		close(stop)
		hammers.Wait()
	}()

	var held []core.Permit
	for step := range steps {
		where := func() string { return fmt.Sprintf("seed %d step %d cfg %+v", seed, step, cfg) }
		switch op := rng.IntN(10); {
		case op < 4: // a whole call
			ps, es := sub.Allow()
			pc, ec := ctl.Allow()
			if ps != pc || !breakers.SameError(es, ec) {
				t.Fatalf("%s: Allow subject %+v %v, control %+v %v", where(), ps, es, pc, ec)
			}
			if es == nil {
				o := core.Outcome(rng.IntN(3))
				sub.Record(ps, o)
				ctl.Record(pc, o)
			}
		case op < 6: // a permit held across transitions: later stale
			ps, es := sub.Allow()
			pc, ec := ctl.Allow()
			if ps != pc || !breakers.SameError(es, ec) {
				t.Fatalf("%s: Allow subject %+v %v, control %+v %v", where(), ps, es, pc, ec)
			}
			if es == nil {
				held = append(held, ps)
			}
		case op < 7 && len(held) > 0: // a held permit completes while still current
			i := rng.IntN(len(held))
			p := held[i]
			if p.Generation != sub.Counts().Generation {
				break // already stale: the pool has it
			}
			held = append(held[:i], held[i+1:]...)
			o := core.Outcome(rng.IntN(3))
			sub.Record(p, o)
			ctl.Record(p, o)
		default:
			d := time.Duration(rng.IntN(900)) * time.Millisecond
			subClock.Advance(d)
			ctlClock.Advance(d)
		}
		// Permits of a generation that has ended go to the hammers.
		gen := ctl.Counts().Generation
		kept := held[:0]
		for _, p := range held {
			if p.Generation != gen {
				pool.add(p)
			} else {
				kept = append(kept, p)
			}
		}
		held = kept

		if msg := fault.Load(); msg != nil {
			t.Fatalf("%s: %s", where(), *msg)
		}
		sc, cc := sub.Counts(), ctl.Counts()
		if sc != cc {
			t.Fatalf("%s: stale outcomes changed the counts:\nsubject %+v\ncontrol %+v", where(), sc, cc)
		}
		if s, c := sub.State(), ctl.State(); s != c {
			t.Fatalf("%s: state subject %v control %v", where(), s, c)
		}
		if s, c := subRec.get(), ctlRec.get(); !reflect.DeepEqual(s, c) {
			t.Fatalf("%s: notifications differ:\nsubject %+v\ncontrol %+v", where(), s, c)
		}
	}
	for _, tr := range ctlRec.get() {
		kinds[letter(tr.From)+">"+letter(tr.To)]++
	}
	return delivered.Load()
}

// completeStale delivers the outcome of stale permit p in one of ten ways.
// It returns what went wrong, if anything: only a classifier's panic may
// come out of Done, unchanged (R10).
func completeStale(b breakers.Breaker, p core.Permit, how int) (fault string) {
	switch how {
	case 0, 1, 2:
		b.Record(p, core.Outcome(how))
	case 3:
		b.Done(p, nil)
	case 4:
		b.Done(p, errFail)
	case 5:
		b.Done(p, context.Canceled)
	case 6:
		b.Done(p, context.DeadlineExceeded)
	case 7:
		b.Done(p, errIgnored)
	case 8: // the protected function panicked: core.Do records a failure
		b.Record(p, core.Failure)
	default: // the classifier panics: released as Ignored, panic propagates
		defer func() {
			if r := recover(); r != errPanic {
				fault = fmt.Sprintf("Done with a panicking classifier: recovered %v, want the classifier's panic", r)
			}
		}()
		b.Done(p, errPanic)
	}
	return ""
}

// stalePool is the set of permits whose generation has ended.
type stalePool struct {
	mu sync.Mutex
	ps []core.Permit
}

func (p *stalePool) add(x core.Permit) {
	p.mu.Lock()
	p.ps = append(p.ps, x)
	p.mu.Unlock()
}

func (p *stalePool) pick(rng *rand.Rand) (core.Permit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ps) == 0 {
		return core.Permit{}, false
	}
	return p.ps[rng.IntN(len(p.ps))], true
}
