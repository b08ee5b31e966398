package suite

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/cacheline"
)

// padded is a word alone on its cache line, as the breaker's state word is.
type padded struct {
	v atomic.Uint64
	_ [cacheline.Size - 8]byte
}

//go:noinline
func noop() {}

// Floor is BenchmarkFloor/op=O: the physical floors, one goroutine, measured
// in the same run as everything else so that every result can be read as a
// ratio to them.
//   - noop: one call of an empty function that is not inlined: the loop and
//     call overhead a breaker call cannot go below.
//   - atomicload, atomicadd, cas: one atomic load, add, or successful
//     compare-and-swap on a word nobody else touches.
//   - clock: one reading of the default clock by a direct call on a
//     concrete core.SystemClock, inlined, as the breaker reads its default
//     clock (a Clock the caller supplies is read through the core.Clock
//     interface, one indirect call more).
//   - mutex: sync.Mutex Lock and Unlock, uncontended.
func Floor(b *testing.B) {
	b.Run("op=noop", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			noop()
		}
	})
	b.Run("op=atomicload", func(b *testing.B) {
		w := new(padded)
		s := uint64(0)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			s += w.v.Load()
		}
		runtime.KeepAlive(s)
	})
	b.Run("op=atomicadd", func(b *testing.B) {
		w := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			w.v.Add(1)
		}
	})
	b.Run("op=cas", func(b *testing.B) {
		w := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range uint64(b.N) {
			w.v.CompareAndSwap(i, i+1)
		}
	})
	b.Run("op=clock", func(b *testing.B) {
		c := core.NewSystemClock()
		s := time.Duration(0)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			s += c.Now()
		}
		runtime.KeepAlive(s)
	})
	b.Run("op=mutex", func(b *testing.B) {
		mu := new(sync.Mutex)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			mu.Lock()
			//lint:ignore SA2001 the empty critical section is the floor being measured
			mu.Unlock()
		}
	})
}

// FloorParallel is BenchmarkFloorParallel/op=O: the same floors under
// b.RunParallel, every goroutine on one shared word (or mutex): the
// contended costs a shared breaker is read against. Two more are the
// least a closed breaker's Allow and Done can cost in a BenchmarkMix cell,
// so a cell reads as a ratio to the floor of its window kind:
//   - twoloads: two atomic loads of one shared word: the count window's
//     floor, the least a call reads where its success writes nothing
//     shared (the breaker's state in Allow, the window in Done).
//   - clockadd: one reading of the default clock (as op=clock) and one
//     atomic add to a word of the goroutine's own, on its own cache line:
//     the time window's floor, one clock read plus one uncontended add
//     per outcome.
func FloorParallel(b *testing.B) {
	b.Run("op=atomicload", func(b *testing.B) {
		w := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			s := uint64(0)
			for pb.Next() {
				s += w.v.Load()
			}
			w.v.CompareAndSwap(^uint64(0), s) // never succeeds; keeps s alive
		})
	})
	b.Run("op=atomicadd", func(b *testing.B) {
		w := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.v.Add(1)
			}
		})
	})
	b.Run("op=clock", func(b *testing.B) {
		c := core.NewSystemClock()
		w := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			s := time.Duration(0)
			for pb.Next() {
				s += c.Now()
			}
			w.v.Add(uint64(s))
		})
	})
	b.Run("op=twoloads", func(b *testing.B) {
		w := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			s := uint64(0)
			for pb.Next() {
				s += w.v.Load()
				s += w.v.Load()
			}
			w.v.CompareAndSwap(^uint64(0), s) // never succeeds; keeps s alive
		})
	})
	b.Run("op=clockadd", func(b *testing.B) {
		c := core.NewSystemClock()
		sink := new(padded)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			// Each goroutine's own word, made here so that no other
			// goroutine writes its line (escape analysis keeps it on
			// this goroutine's stack; the heap would do as well).
			own := new(padded)
			s := time.Duration(0)
			for pb.Next() {
				s += c.Now()
				own.v.Add(1)
			}
			sink.v.Add(uint64(s) + own.v.Load())
		})
	})
	b.Run("op=mutex", func(b *testing.B) {
		mu := new(sync.Mutex)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				//lint:ignore SA2001 the empty critical section is the floor being measured
				mu.Unlock()
			}
		})
	})
}
