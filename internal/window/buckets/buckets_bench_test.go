package buckets

import (
	"testing"
	"time"
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
