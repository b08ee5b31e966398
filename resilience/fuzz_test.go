package resilience

import (
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// FuzzBackoff: for any valid base and maximum delay, any retry number (64
// and the largest int included) and any random draw, the jittered backoff
// is never negative and never above the maximum, and full and equal jitter
// stay inside their ranges of the unjittered backoff.
func FuzzBackoff(f *testing.F) {
	f.Add(int64(100*time.Millisecond), int64(10*time.Second), 64, uint64(0))
	f.Add(int64(1), int64(1<<62), 63, ^uint64(0))
	f.Add(int64(1<<62), int64(1<<63-1), 1<<30, uint64(12345))
	f.Fuzz(func(t *testing.T, base, ceiling int64, retry int, rnd uint64) {
		r, err := NewRetry(RetryConfig{BaseDelay: time.Duration(base), MaxDelay: time.Duration(ceiling)})
		if err != nil {
			return
		}
		for _, n := range []int{max(retry, 1), 64, 65, 1<<31 - 1, int(^uint(0) >> 1)} {
			d := backoff(r.base, r.max, n)
			if d < r.base && n >= 1 || d > r.max {
				t.Fatalf("backoff(%v, %v, %d) = %v", r.base, r.max, n, d)
			}
			if n >= 64 && d != r.max {
				t.Fatalf("backoff(%v, %v, %d) = %v, want the maximum", r.base, r.max, n, d)
			}
			for _, j := range []Jitter{FullJitter, EqualJitter, NoJitter} {
				got := jittered(d, j, rnd)
				lo := time.Duration(0)
				switch j {
				case EqualJitter:
					lo = d - d/2
				case NoJitter:
					lo = d
				}
				if got < lo || got > d {
					t.Fatalf("jittered(%v, %v, %#x) = %v, outside [%v, %v]", d, j, rnd, got, lo, d)
				}
				// The extreme draws reach the ends of the range.
				if got := jittered(d, j, 0); got != lo {
					t.Fatalf("jittered(%v, %v, 0) = %v, want %v", d, j, got, lo)
				}
				if got := jittered(d, j, ^uint64(0)); got != d {
					t.Fatalf("jittered(%v, %v, 2^64-1) = %v, want %v", d, j, got, d)
				}
			}
		}
	})
}

// FuzzBudget drives a budget with a script of deposits, withdrawals and
// clock steps, forward and back across zero, and checks it against the
// obvious model in whole units: the balance stays in 0..MaxSaved, the floor
// grants at most its count in each second of the last floor grant and
// starts afresh in any other second, and every grant is one the model
// grants too.
func FuzzBudget(f *testing.F) {
	f.Add(10, 10, 100, []byte{0, 0, 0, 1, 1, 2, 1})
	f.Add(1000, 0, 1, []byte{0, 1, 1, 1, 2, 2, 1})
	f.Add(1, 3, 5, []byte{1, 1, 1, 1, 2, 1, 0})
	f.Add(10, 2, 5, []byte{1, 1, 1, 125, 1, 1, 128, 1, 1, 2, 1, 254, 1})
	f.Fuzz(func(t *testing.T, percent, floor, saved int, script []byte) {
		clock := core.NewManualClock(0)
		if floor == 0 {
			floor = NoFloor
		}
		b, err := NewBudget(BudgetConfig{Percent: percent, MinPerSecond: floor, MaxSaved: saved, Clock: clock})
		if err != nil {
			return
		}
		balance, used, grantSecond := int64(0), uint32(0), int64(0)
		for _, op := range script {
			switch op % 3 {
			case 0:
				b.Deposit()
				balance = min(balance+b.perCall, b.max)
			case 1:
				want := false
				if s := floorDiv(clock.Now(), time.Second); b.floor > 0 && s != grantSecond {
					grantSecond, used = s, 0
				}
				if used < b.floor {
					used++
					want = true
				} else if balance >= unit {
					balance -= unit
					want = true
				}
				if got := b.TryWithdraw(); got != want {
					t.Fatalf("TryWithdraw at %v = %v, the model says %v (balance %d, floor used %d of %d)", clock.Now(), got, want, balance, used, b.floor)
				}
			case 2:
				// -4.2 s to +4.2 s, in steps of 100 ms.
				clock.Advance(time.Duration(int(op/3)-42) * 100 * time.Millisecond)
			}
			if got := b.balance.Load(); got != balance || got < 0 || got > b.max {
				t.Fatalf("balance %d, the model says %d (max %d)", got, balance, b.max)
			}
		}
	})
}

// floorDiv is a / b rounded down.
func floorDiv(a, b time.Duration) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return int64(q)
}
