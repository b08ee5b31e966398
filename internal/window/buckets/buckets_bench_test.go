package buckets

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/internal/trip"
)

// The clock in these benchmarks moves 1 µs per Record, so a bucket is
// recycled once per million Records: the steady state with its once-a-second
// slow path, as in a service doing a million calls a second.

func BenchmarkRecord(b *testing.B) {
	w := mustNew(b, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		w.Record(1, time.Duration(i)*time.Microsecond, i%4 == 0, i%3 == 0)
	}
}

// Each goroutine runs its own clock from the same base at the same pace,
// so they all record into the same second's bucket: the worst case for the
// counter CAS loops.
func BenchmarkRecordParallel(b *testing.B) {
	w := mustNew(b, 10)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			w.Record(1, time.Duration(i)*time.Microsecond, i%4 == 0, i%3 == 0)
			i++
		}
	})
}

func BenchmarkSnapshot(b *testing.B) {
	w := mustNew(b, 10)
	for s := range 10 {
		for i := range 100 {
			w.Record(1, time.Duration(s)*time.Second, i%4 == 0, i%3 == 0)
		}
	}
	now := 9 * time.Second
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = w.Snapshot(1, now)
	}
}

// The breaker's own steady paths, at the same 1 µs a call: a fast success
// on a clean window; one on an unclean window once its second's minimum is
// met (the judgement's full bit, judge.go); and a plain failure that takes
// a unit of its second's slack. Each second's first outcome takes the slow
// path (recycle, and on the unclean window a Snapshot), once per million.
func BenchmarkRecordSteady(b *testing.B) {
	for _, bc := range []struct {
		name    string
		failure bool
		unclean bool
		rule    trip.Rule
	}{
		{name: "success/clean", rule: trip.Rule{FailureRateThreshold: 50, MinimumNumberOfCalls: 10}},
		{name: "success/unclean", unclean: true, rule: trip.Rule{FailureRateThreshold: 50, MinimumNumberOfCalls: 10}},
		{name: "failure", failure: true, rule: trip.Rule{FailureCountThreshold: 1 << 40}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := mustNew(b, 10)
			rule := &bc.rule
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now := time.Duration(i) * time.Microsecond
				if bc.unclean && i%1_000_000 == 0 {
					// One failure a second keeps the window unclean and
					// the rate far below the threshold.
					_, _ = w.RecordTrip(1, now, true, false, rule)
				}
				if bc.failure {
					w.RecordFailure(1, now, rule)
				} else {
					w.RecordSuccess(1, now, rule)
				}
			}
		})
	}
}
