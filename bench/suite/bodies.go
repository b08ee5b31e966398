package suite

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// ClosedSuccess is BenchmarkClosedSuccess/policy=P/impl=I: Allow and Done of
// a successful call on a closed breaker, one goroutine.
func ClosedSuccess(b *testing.B, impls []Impl) {
	for _, p := range Policies {
		b.Run("policy="+p.Name, func(b *testing.B) {
			forEach(b, impls, func(b *testing.B, im Impl) {
				closedSerial(b, build(b, im, Spec{Policy: p}), allSuccess)
			})
		})
	}
}

// ClosedSuccessParallel is ClosedSuccess under b.RunParallel: GOMAXPROCS
// goroutines (set by -cpu) share one breaker.
func ClosedSuccessParallel(b *testing.B, impls []Impl) {
	for _, p := range Policies {
		b.Run("policy="+p.Name, func(b *testing.B) {
			forEach(b, impls, func(b *testing.B, im Impl) {
				closedParallel(b, build(b, im, Spec{Policy: p}), allSuccess)
			})
		})
	}
}

// Mixes are the failure mixes of ClosedMixed, by the value of /failures=.
// Neither trips any policy: the failures are spread evenly (never 5 in a
// row) and stay below the 50% threshold. Policy countrate runs both;
// timerate and consecutive run 10pct only, to keep make bench short.
var Mixes = []struct {
	Name string
	Pct  int
}{{"1pct", 1}, {"10pct", 10}}

// ClosedMixed is BenchmarkClosedMixed/policy=P/failures=F/impl=I: calls
// of which 1% or 10% fail, spread evenly so that the breaker stays closed,
// one goroutine. policy=countrate is the row the speed comparison reads;
// timerate and consecutive are there too so that the peers without a
// count window show.
func ClosedMixed(b *testing.B, impls []Impl) {
	for _, p := range Policies {
		b.Run("policy="+p.Name, func(b *testing.B) {
			for _, m := range Mixes {
				if p.Name != CountRate.Name && m.Pct != 10 {
					continue
				}
				b.Run("failures="+m.Name, func(b *testing.B) {
					outcomes := Pattern(m.Pct, 100)
					forEach(b, impls, func(b *testing.B, im Impl) {
						closedSerial(b, build(b, im, Spec{Policy: p, FailurePct: m.Pct}), outcomes)
					})
				})
			}
		})
	}
}

func closedSerial(b *testing.B, br Breaker, outcomes []error) {
	b.ReportAllocs()
	b.ResetTimer()
	got := br.Run(b.N, outcomes)
	b.StopTimer()
	if got != b.N {
		b.Fatalf("%d of %d calls admitted: the breaker left the closed state", got, b.N)
	}
}

func closedParallel(b *testing.B, br Breaker, outcomes []error) {
	var admitted atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		admitted.Add(int64(br.Parallel(pb, outcomes)))
	})
	b.StopTimer()
	if got := admitted.Load(); got != int64(b.N) {
		b.Fatalf("%d of %d calls admitted: the breaker left the closed state", got, b.N)
	}
}

// OpenReject is BenchmarkOpenReject/mode=serial|parallel/impl=I: Allow on
// an open breaker whose open duration (60 s) does not elapse during the
// benchmark. The breaker is tripped by consecutive failures, or by the
// implementation's closest rule.
func OpenReject(b *testing.B, impls []Impl) {
	spec := Spec{Policy: Consecutive, AnyRule: true}
	b.Run("mode=serial", func(b *testing.B) {
		forEach(b, impls, func(b *testing.B, im Impl) {
			br := build(b, im, spec)
			Trip(b, br)
			b.ReportAllocs()
			b.ResetTimer()
			got := br.Run(b.N, allSuccess)
			b.StopTimer()
			if got != 0 {
				b.Fatalf("an open breaker admitted %d of %d calls", got, b.N)
			}
		})
	})
	b.Run("mode=parallel", func(b *testing.B) {
		forEach(b, impls, func(b *testing.B, im Impl) {
			br := build(b, im, spec)
			Trip(b, br)
			var admitted atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				admitted.Add(int64(br.Parallel(pb, allSuccess)))
			})
			b.StopTimer()
			if got := admitted.Load(); got != 0 {
				b.Fatalf("an open breaker admitted %d of %d calls", got, b.N)
			}
		})
	})
}

// StormGoroutines and StormProbes are the values of /goroutines= and
// /probes= in ProbeStorm.
var (
	StormGoroutines = []int{8, 64}
	StormProbes     = []int{1, 3}
)

// ProbeStorm is BenchmarkProbeStorm/goroutines=G/probes=P/impl=I. One op is
// one round: the open duration elapses (Expire), G goroutines parked on a
// barrier call Allow at once, the admitted ones stay in flight until every
// goroutine has its answer, then all fail, which re-opens the breaker for
// the next round.
//
// Metrics: probes/round is the mean number of calls admitted per round,
// minprobes/round and maxprobes/round the extremes over all rounds (all three
// equal P for a breaker that keeps its probe limit), ns/round the time from
// the start signal to the end of the last call, without Expire. ns/op is the
// whole round, Expire included: a real-clock implementation that cannot
// shorten its open duration below 1 ms sleeps there.
func ProbeStorm(b *testing.B, impls []Impl) {
	for _, g := range StormGoroutines {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			for _, p := range StormProbes {
				b.Run("probes="+strconv.Itoa(p), func(b *testing.B) {
					forEach(b, impls, func(b *testing.B, im Impl) { probeStorm(b, im, g, p) })
				})
			}
		})
	}
}

// StormSpec is the spec of a probe storm with p probes.
func StormSpec(p int) Spec {
	return Spec{Policy: Consecutive, AnyRule: true, OpenDuration: time.Millisecond, Probes: p, Clock: core.NewManualClock(0)}
}

func probeStorm(b *testing.B, im Impl, g, p int) {
	br := build(b, im, StormSpec(p))
	Trip(b, br)
	s := NewStorm(br, g)
	defer s.Stop()
	var (
		total, rounds    int
		lowest, highest  = g + 1, -1
		inStorm          time.Duration
		wrong, wrongSeen int
	)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		br.Expire()
		n, d := s.Round()
		total += n
		rounds++
		inStorm += d
		lowest, highest = min(lowest, n), max(highest, n)
		if n != p {
			wrong, wrongSeen = wrong+1, n
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(total)/float64(rounds), "probes/round")
	b.ReportMetric(float64(lowest), "minprobes/round")
	b.ReportMetric(float64(highest), "maxprobes/round")
	b.ReportMetric(float64(inStorm.Nanoseconds())/float64(rounds), "ns/round")
	if im.ExactProbes && wrong > 0 {
		b.Errorf("%s admitted %d probes in %d of %d rounds, want exactly %d every round", im.Name, wrongSeen, wrong, rounds, p)
	}
}

// Storm runs rounds of G goroutines racing for admission on one breaker.
// Its goroutines live until Stop.
type Storm struct {
	br      Breaker
	g       int
	jobs    chan stormRound
	ready   sync.WaitGroup
	decided sync.WaitGroup
	done    sync.WaitGroup
	n       atomic.Int64
	decide  func(bool)
}

type stormRound struct{ start, release chan struct{} }

// NewStorm starts g goroutines that wait for rounds on br.
func NewStorm(br Breaker, g int) *Storm {
	s := &Storm{br: br, g: g, jobs: make(chan stormRound, g)}
	s.decide = func(admitted bool) {
		if admitted {
			s.n.Add(1)
		}
		s.decided.Done()
	}
	for range g {
		go s.worker()
	}
	return s
}

func (s *Storm) worker() {
	for r := range s.jobs {
		s.ready.Done()
		<-r.start
		s.br.Hold(r.release, ErrCall, s.decide)
		s.done.Done()
	}
}

// Round runs one round and returns how many calls the breaker admitted and
// the time from the start signal until the last call was over.
func (s *Storm) Round() (admitted int, d time.Duration) {
	r := stormRound{start: make(chan struct{}), release: make(chan struct{})}
	s.n.Store(0)
	s.ready.Add(s.g)
	s.decided.Add(s.g)
	s.done.Add(s.g)
	for range s.g {
		s.jobs <- r
	}
	s.ready.Wait()
	t0 := time.Now()
	close(r.start)
	s.decided.Wait()
	admitted = int(s.n.Load())
	close(r.release)
	s.done.Wait()
	return admitted, time.Since(t0)
}

// Stop ends the storm's goroutines.
func (s *Storm) Stop() { close(s.jobs) }

// ChurnPattern is what each goroutine of Churn does, over and over: 8
// failures in a row, then 8 successes.
var ChurnPattern = func() []error {
	p := make([]error, 16)
	for i := range 8 {
		p[i] = ErrCall
	}
	return p
}()

// ChurnSpec is the spec of Churn: trips on 5 failures in a row, one probe,
// time driven by Expire.
var ChurnSpec = Spec{Policy: Consecutive, AnyRule: true, OpenDuration: time.Millisecond, Probes: 1, FastExpire: true}

// Churn is BenchmarkChurn/impl=I: GOMAXPROCS goroutines share one breaker;
// each repeats 8 failures and 8 successes, and a goroutine whose call is
// rejected makes the open duration elapse (Expire) before its next call.
// So the breaker keeps tripping, probing, closing and re-opening as fast as
// the callers can drive it: the cost of transitions under contention, not
// of waiting. ns/op is per call, admitted or rejected; admitted/op is the
// share admitted.
func Churn(b *testing.B, impls []Impl) {
	forEach(b, impls, func(b *testing.B, im Impl) {
		spec := ChurnSpec
		spec.Clock = core.NewManualClock(0)
		br := build(b, im, spec)
		var admitted atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			n, k := 0, 0
			for pb.Next() {
				if br.Run(1, ChurnPattern[k:k+1]) == 1 {
					n++
				} else {
					br.Expire()
				}
				if k++; k == len(ChurnPattern) {
					k = 0
				}
			}
			admitted.Add(int64(n))
		})
		b.StopTimer()
		b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
	})
}

// SnapshotPolicies are the policies of Snapshot: the two whose counts come
// from a window.
var SnapshotPolicies = []Policy{CountRate, TimeRate}

// Snapshot is BenchmarkSnapshot/policy=P/impl=I: one goroutine reads the
// state and the counts (Breaker.Snapshot) while another records successes
// in batches of 100, yielding between batches so that at -cpu 1 the reader
// is not starved. ns/op is one read of state and counts.
func Snapshot(b *testing.B, impls []Impl) {
	for _, p := range SnapshotPolicies {
		b.Run("policy="+p.Name, func(b *testing.B) {
			forEach(b, impls, func(b *testing.B, im Impl) {
				br := build(b, im, Spec{Policy: p})
				var stop atomic.Bool
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						br.Run(100, allSuccess)
						runtime.Gosched()
					}
				}()
				b.ReportAllocs()
				b.ResetTimer()
				runtime.KeepAlive(br.Snapshot(b.N))
				b.StopTimer()
				stop.Store(true)
				wg.Wait()
			})
		})
	}
}

// Windows are the values of /window= in New: the policy whose window is
// built.
var Windows = []struct {
	Name   string
	Policy Policy
}{{"count100", CountRate}, {"time10", TimeRate}}

// New is BenchmarkNew/window=W/impl=I: the construction of one breaker with
// a count window of 100 calls or a time window of 10 seconds. B/op is what
// construction allocates: the breaker itself and any garbage its
// constructor makes on the way.
func New(b *testing.B, impls []Impl) {
	for _, w := range Windows {
		b.Run("window="+w.Name, func(b *testing.B) {
			forEach(b, impls, func(b *testing.B, im Impl) {
				if im.Construct == nil {
					b.Skip(im.Name + ": no constructor to measure")
				}
				spec := Spec{Policy: w.Policy}
				if _, err := im.Construct(spec); err != nil {
					if u, ok := err.(Unsupported); ok {
						b.Skip(im.Name + ": " + string(u))
					}
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					x, _ := im.Construct(spec)
					runtime.KeepAlive(x)
				}
			})
		})
	}
}
