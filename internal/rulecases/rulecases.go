// Package rulecases holds hand-computed values of the arithmetic rules that
// docs/semantics.md and docs/design.md define: the millisecond rounding of
// the open deadline, the coarse units of the half-open max wait and the
// ramp-up, their wrap and idle rule, the ramp-up admission hash and share,
// the open-duration backoff, the retry-after hint bound, slow calls and the
// trip rule with its minimum number of calls.
//
// The two breakers share no rule code (the uber-go/ratelimit shape: they
// share only their configuration), so a bug in one side's arithmetic shows
// as a difference in the differential tests. Those tests cannot tell which
// side is wrong when both are, so each side also checks its own functions
// against these tables: core in core/rules_test.go, the baseline in
// baseline/rules_test.go. Only the expected values are shared, never code.
//
// Every value was worked out from the rule's text, not by running either
// implementation: by hand for the small ones, and with exact integer
// arithmetic in Python (fractions, and the inverse of the MurmurHash3
// finalizer to find readings with a chosen hash) for the large ones. The
// comments show the working.
package rulecases

import (
	"math"
	"time"
)

const (
	ms   = time.Millisecond
	sec  = time.Second
	year = 365 * 24 * time.Hour
)

// Deadline: an open breaker whose transition committed at clock reading Now
// for an open duration D may probe from the first whole millisecond at or
// after Now+D (docs/design.md, Open-duration resolution); a negative reading
// counts as zero, as any time before the clock's start does: never a
// negative or wrapped deadline.
type Deadline struct {
	Now, D time.Duration
	Ms     uint64 // ceil((max(Now, 0) + D) / 1 ms)
}

// Deadlines are the Deadline cases, each worked out by hand from the rule text.
var Deadlines = []Deadline{
	{0, ms, 1},
	{0, 1, 1},                    // 1 ns rounds up to a whole millisecond
	{1, ms - 1, 1},               // exactly 1 ms: no rounding
	{1, ms, 2},                   // 1 ms + 1 ns
	{999_999, 1, 1},              // 1 ms exactly
	{sec, sec, 2000},             // 2 s
	{2_500_000, 60 * sec, 60003}, // 60,002.5 ms
	{59_999_999_999, 1, 60000},   // 60 s exactly
	{-5 * sec, sec, 1000},        // the reading counts as 0
	// The largest reading and the longest open duration, a year:
	// (9,223,372,036,854,775,807 + 31,536,000,000,000,000) ns
	// = 9,254,908,036,854.775807 ms, rounded up. No overflow.
	{math.MaxInt64, year, 9_254_908_036_855},
}

// Wait: how long a call at Now waits before it may probe an open breaker
// whose deadline is millisecond Ms: Ms*1ms - Now, or 0 from Ms*1ms on
// (Permit.RetryAfter). A negative reading counts as zero.
type Wait struct {
	Ms   uint64
	Now  time.Duration
	Wait time.Duration
}

// Waits are the Wait cases, each worked out by hand from the rule text.
var Waits = []Wait{
	{63, 0, 63 * ms},
	{63, 62_500_000, 500_000}, // 62.5 ms: half a millisecond to go
	{63, 63*ms - 1, 1},
	{63, 63 * ms, 0}, // the boundary is inclusive: a call at the deadline may probe
	{63, 63*ms + 1, 0},
	{63, sec, 0},
	{63, -sec, 63 * ms},
	{60003, 2_500_000, 60*sec + 500_000},
}

// Coarse: a duration D (MaxWaitInHalfOpen, RampUpDuration) is kept in units
// of max(1 ms, D/1024) rounded up to whole milliseconds; Span is D in whole
// units, rounded up (Config.MaxWaitInHalfOpen, docs/design.md Widths).
type Coarse struct {
	D    time.Duration
	Unit time.Duration
	Span uint64
}

// Coarses are the Coarse cases, each worked out by hand from the rule text.
var Coarses = []Coarse{
	{1, ms, 1},
	{ms, ms, 1},
	{4 * ms, ms, 4},
	{sec, ms, 1000},
	{sec + 1, ms, 1001},        // 1,001 ms rounded up; the unit is still 1 ms
	{1024 * ms, ms, 1024},      // the largest duration with 1 ms units
	{1024*ms + 1, 2 * ms, 513}, // 1,025 ms / 1024 rounds up to 2 ms; 1,024.000001 ms / 2 ms rounds up to 513
	{1025 * ms, 2 * ms, 513},   // 512.5 rounds up
	{2049 * ms, 3 * ms, 683},   // 2,049 / 1024 = 2.0009.. rounds up to 3 ms; 2,049 / 3 = 683
	{10 * sec, 10 * ms, 1000},
	// A year is 31,536,000,000 ms = 1024 * 30,796,875 ms exactly.
	{year, 30_796_875 * ms, 1024},
	{year - 1, 30_796_875 * ms, 1024},
}

// CoarseDeadline: for a duration D, At is the number of whole units up to
// the reading Now, and Deadline the first unit boundary at or after Now+D
// (ceil((Now+D)/unit)); a negative reading counts as zero. The deadline has
// passed at a reading r exactly when At(r) >= Deadline.
type CoarseDeadline struct {
	D, Now   time.Duration
	At       uint64
	Deadline uint64
}

// CoarseDeadlines are the CoarseDeadline cases, each worked out by hand from the rule text.
var CoarseDeadlines = []CoarseDeadline{
	// D = 1,025 ms: 2 ms units.
	{1025 * ms, 0, 0, 513},        // 1,025 / 2 = 512.5 rounds up
	{1025 * ms, ms, 0, 513},       // 1,026 / 2 = 513
	{1025 * ms, ms + 1, 0, 514},   // just past 1,026 ms
	{1025 * ms, -3 * sec, 0, 513}, // the reading counts as 0
	{1025 * ms, 1025 * ms, 512, 1025},
	{1025 * ms, 1026*ms - 1, 512, 1026},
	{1025 * ms, 1026 * ms, 513, 1026},
	// D = 1 s: 1 ms units. 7.4 ms -> 7 units; 1,007.4 ms rounds up to 1,008.
	{sec, 7_400_000, 7, 1008},
	{4 * ms, 2*sec + 5, 2000, 2005},
	// The largest reading and a year (units of 30,796,875 ms):
	// 9,223,372,036,854,775,807 / 30,796,875,000,000 = 299,490.3..;
	// plus the 1,024 units of the year, rounded up: 300,515. No overflow.
	{year, math.MaxInt64, 299_490, 300_515},
}

// Expired: the half-open max wait has passed (or the ramp-up is over) when
// its deadline is Remaining units ahead of the clock and Remaining <= 0, or
// Remaining > Span+1: no deadline is set further ahead than that, so a
// larger remainder is a deadline long past whose 19- or 20-bit difference
// wrapped, or a clock that went back by more than D (docs/design.md, Known
// limits). D is both a MaxWaitInHalfOpen and a RampUpDuration.
type Expired struct {
	D         time.Duration
	Remaining int64
	Passed    bool
}

// Expireds are the Expired cases, each worked out by hand from the rule text.
var Expireds = []Expired{
	{1025 * ms, math.MinInt64, true},
	{1025 * ms, -1, true},
	{1025 * ms, 0, true},
	{1025 * ms, 1, false},
	{1025 * ms, 513, false}, // span 513
	{1025 * ms, 514, false}, // span + 1: rounding up can set it this far
	{1025 * ms, 515, true},
	{1025 * ms, 1 << 19, true},
	{1025 * ms, math.MaxInt64, true},
	{ms, 2, false}, // span 1
	{ms, 3, true},
	{year, 1025, false}, // span 1024
	{year, 1026, true},
}

// Hash: the ramp-up decides a call from the high 32 bits of the 64-bit
// finalizer of MurmurHash3 (fmix64: x ^= x>>33; x *= 0xff51afd7ed558ccd;
// x ^= x>>33; x *= 0xc4ceb9fe1a85ec53; x ^= x>>33) of the clock reading's
// 64 bits (two's complement for a negative reading).
type Hash struct {
	Now  time.Duration
	Hash uint32
}

// Hashes are the Hash cases, each worked out by hand from the rule text.
var Hashes = []Hash{
	{0, 0},                     // fmix64(0) = 0
	{1, 3_025_583_356},         // fmix64(1) = 0xb456bcfc34c2cb2c
	{2, 985_606_688},           // 0x3abf2a20650683e7
	{ms, 1_144_723_756},        // 0x443b192cac3fa823
	{time.Hour, 1_485_400_170}, // 0x5889686ab6fe33f8
	{-1, 1_689_612_811},        // fmix64(2^64-1) = 0x64b5720b4b825f21
	{math.MaxInt64, 2_881_043_952},
	// Readings found with the inverse of fmix64, for the boundaries below.
	{2_108_611_989_581_222_584, 1_431_655_764},
	{2_220_624_924_049_983_866, 1_431_655_765},
	{2_166_987_913_304_411_618, 1<<31 - 1},
	{1_401_494_638_771_588_894, 1 << 31},
	{4_430_171_362_470_293_766, 4_290_672_327},
	{4_516_440_856_466_992_598, 4_290_672_328},
	{1_071_107_497_181_265_233, 2_362_232_011},
	{3_725_622_724_826_855_817, 2_362_232_012},
	{2_218_036_520_250_977_482, math.MaxUint32},
}

// Ramp: during a ramp-up of D (span units) starting at StartPercent, a call
// at reading Now whose ramp deadline is Remaining units ahead (1.., a ramp
// that is not over) is admitted when its hash is below the share as a
// 32-bit fraction, rounded down:
//
//	elapsed   = span - min(Remaining, span)
//	threshold = floor((start*span + (100-start)*elapsed) * 2^32 / (100*span))
//	admitted  = hash(Now) < threshold
type Ramp struct {
	D            time.Duration
	StartPercent int
	Remaining    uint64
	Now          time.Duration
	Admitted     bool
}

// Ramps are the Ramp cases, each worked out by hand from the rule text.
var Ramps = []Ramp{
	// 3 ms (span 3), 0 %, one unit elapsed: threshold floor(2^32/3) =
	// 1,431,655,765 (2^32/3 = 1,431,655,765.33). A hash equal to it is shed:
	// the threshold is rounded down.
	{3 * ms, 0, 2, 2_108_611_989_581_222_584, true},
	{3 * ms, 0, 2, 2_220_624_924_049_983_866, false},
	// 1 s (span 1000), 50 %, nothing elapsed: threshold 2^31.
	{sec, 50, 1000, 2_166_987_913_304_411_618, true},
	{sec, 50, 1000, 1_401_494_638_771_588_894, false},
	{sec, 50, 5000, 2_166_987_913_304_411_618, true}, // further ahead than the span: nothing elapsed
	{sec, 50, 1000, ms, true},                        // hash 1,144,723,756
	{sec, 50, 1000, time.Hour, true},                 // hash 1,485,400,170
	{sec, 50, 1000, 1, false},                        // hash 3,025,583,356
	{sec, 50, 1000, -1, true},                        // hash 1,689,612,811
	// 1 s, 10 %, nothing elapsed: threshold floor(2^32/10) = 429,496,729.
	{sec, 10, 1000, -1, false},
	// 1 s, 0 %, one unit left (999 elapsed): threshold floor(0.999 * 2^32)
	// = 4,290,672,328 (4,290,672,328.704).
	{sec, 0, 1, 4_430_171_362_470_293_766, true},
	{sec, 0, 1, 4_516_440_856_466_992_598, false},
	// 0 % at the start: threshold 0, nothing is admitted, not even hash 0.
	{sec, 0, 1000, 0, false},
	// 4 ms (span 4), 10 %, two units elapsed: threshold
	// floor((40 + 180) * 2^32 / 400) = floor(0.55 * 2^32) = 2,362,232,012.
	{4 * ms, 10, 2, 1_071_107_497_181_265_233, true},
	{4 * ms, 10, 2, 3_725_622_724_826_855_817, false},
	// 100 %: threshold 2^32, every hash is below it.
	{7 * ms, 100, 7, 2_218_036_520_250_977_482, true},
}

// Backoff: the open duration after a trip (Steps[0]) and after each
// following re-open from half-open: each multiplies the last by the factor
// in float64, truncated to whole nanoseconds, up to the maximum, which it
// then keeps. The last value repeats for every further re-open.
type Backoff struct {
	Open, Max time.Duration
	Factor    float64
	Steps     []time.Duration
}

// Backoffs are the Backoff cases, each worked out by hand from the rule text.
var Backoffs = []Backoff{
	{60 * sec, 0, 0, []time.Duration{60 * sec, 60 * sec, 60 * sec}}, // no backoff
	{5 * sec, time.Minute, 2, []time.Duration{5 * sec, 10 * sec, 20 * sec, 40 * sec, 60 * sec, 60 * sec}},
	{sec, 10 * sec, 1.5, []time.Duration{sec, 1500 * ms, 2250 * ms, 3375 * ms, 5_062_500_000, 7_593_750_000, 10 * sec, 10 * sec}},
	// 3,000,000 * 1.1 = 3,300,000.0000000005 in float64, truncated.
	{3 * ms, 4 * ms, 1.1, []time.Duration{3 * ms, 3_300_000, 3_630_000, 3_993_000, 4 * ms, 4 * ms}},
	{1, 100, 3, []time.Duration{1, 3, 9, 27, 81, 100, 100}},
	// 7 * 1.3 = 9.1 -> 9; 11.7 -> 11; 14.3 -> 14; 18.2 -> 18; 23.4 -> 20.
	{7, 20, 1.3, []time.Duration{7, 9, 11, 14, 18, 20, 20}},
	{year/2 + 1, year, 2, []time.Duration{year/2 + 1, year, year}},
}

// Hint: a retry-after hint D is bounded by MaxRetryAfter: 0 (no hint) when
// hints are off or D <= 0, MaxRetryAfter when D exceeds it, D otherwise.
// OpenFor is the open duration of the trip it causes with OpenDuration Open:
// the longer of the two, the hint rounded up to whole milliseconds first (a
// hint is kept in whole milliseconds, like ForceOpen's duration).
type Hint struct {
	MaxRetryAfter, Open, D time.Duration
	Bounded, OpenFor       time.Duration
}

// Hints are the Hint cases, each worked out by hand from the rule text.
var Hints = []Hint{
	{0, sec, time.Minute, 0, sec}, // hints off
	{10 * sec, sec, -1, 0, sec},
	{10 * sec, sec, 0, 0, sec},
	{10 * sec, sec, 1, 1, sec}, // a hint never shortens the open duration
	{10 * sec, sec, sec, sec, sec},
	{10 * sec, sec, sec + 1, sec + 1, sec + ms}, // 1 s + 1 ns: kept as 1.001 s
	{10 * sec, sec, sec - 1, sec - 1, sec},      // 999.999999 ms: kept as 1 s, not longer
	{10 * sec, sec, 2*sec + ms - 1, 2*sec + ms - 1, 2*sec + ms},
	{10 * sec, sec, 10 * sec, 10 * sec, 10 * sec},
	{10 * sec, sec, 10*sec + 1, 10 * sec, 10 * sec},
	{10 * sec, sec, math.MaxInt64, 10 * sec, 10 * sec},
	{time.Minute, 2 * time.Minute, 30 * sec, 30 * sec, 2 * time.Minute}, // the open duration is longer than the bounded hint
	{year, sec, math.MaxInt64, year, year},
}

// Slow: a call that took D is slow when a threshold is set and D is strictly
// above it, as in Resilience4j.
type Slow struct {
	Threshold, D time.Duration
	Slow         bool
}

// Slows are the Slow cases, each worked out by hand from the rule text.
var Slows = []Slow{
	{0, time.Hour, false}, // no threshold: nothing is slow
	{sec, 0, false},
	{sec, sec - 1, false},
	{sec, sec, false},
	{sec, sec + 1, true},
	{sec, -time.Hour, false}, // a clock that went back
	{1, 2, true},
}

// Trip: whether a closed breaker with the trip rule Rule, whose window
// holds Calls, Failures and Slow calls and whose run of consecutive
// failures is Consecutive, must trip: any enabled threshold reached, with
// the minimum number of calls where docs/semantics.md says it applies.
type Trip struct {
	Name                  string
	Rule                  Rule
	Calls, Failures, Slow uint64
	Consecutive           uint64
	Trips                 bool
}

// Rule is the part of a Config that the trip rule reads, with the same
// names and zero values (this package cannot import core, whose internal
// tests use it). Timed selects a time-based window.
type Rule struct {
	Timed                     bool
	WindowSize                int
	MinimumNumberOfCalls      int
	FailureRateThreshold      int
	SlowCallRateThreshold     int
	SlowCallDurationThreshold time.Duration
	FailureCountThreshold     int
	ConsecutiveFailures       int
}

// 2^56 calls: the most a time bucket counts; the products stay in 64 bits.
const huge = 1 << 56

var (
	rate50     = Rule{WindowSize: 20, MinimumNumberOfCalls: 10, FailureRateThreshold: 50}
	rate50Min  = Rule{WindowSize: 20, FailureRateThreshold: 50} // minimum calls: the window, 20
	count3     = Rule{FailureCountThreshold: 3}                 // window 100; minimum calls does not apply
	count3Min5 = Rule{FailureCountThreshold: 3, MinimumNumberOfCalls: 5}
	slow30     = Rule{WindowSize: 20, MinimumNumberOfCalls: 10, SlowCallRateThreshold: 30, SlowCallDurationThreshold: sec}
	consec3    = Rule{ConsecutiveFailures: 3} // no window at all
	both       = Rule{WindowSize: 20, MinimumNumberOfCalls: 10, FailureRateThreshold: 50, ConsecutiveFailures: 3}
	timed      = Rule{Timed: true, WindowSize: 10, FailureRateThreshold: 50} // minimum calls 100
	rate1      = Rule{Timed: true, WindowSize: 10, MinimumNumberOfCalls: 1, FailureRateThreshold: 1, SlowCallRateThreshold: 100, SlowCallDurationThreshold: sec}
	rate100    = Rule{Timed: true, WindowSize: 10, MinimumNumberOfCalls: 1, FailureRateThreshold: 100}
)

// Trips are the Trip cases, each worked out by hand from the rule text.
var Trips = []Trip{
	{"rate: exactly at the threshold trips", rate50, 10, 5, 0, 0, true},
	{"rate: one failure short", rate50, 10, 4, 0, 0, false},
	{"rate: 5 of 11 is below 50%", rate50, 11, 5, 0, 0, false},
	{"rate: 10 of 20", rate50, 20, 10, 0, 0, true},
	{"rate: below the minimum calls", rate50, 9, 9, 0, 0, false},
	{"rate: no failures", rate50, 20, 0, 20, 0, false},
	{"rate: minimum calls defaults to the count window", rate50Min, 19, 19, 0, 0, false},
	{"rate: the call that reaches the minimum", rate50Min, 20, 10, 0, 0, true},
	{"count: at the threshold, minimum not set", count3, 3, 3, 0, 0, true},
	{"count: below it", count3, 3, 2, 0, 0, false},
	{"count: minimum set applies", count3Min5, 3, 3, 0, 0, false},
	{"count: minimum set and reached", count3Min5, 5, 3, 0, 0, true},
	{"slow: exactly 30%", slow30, 10, 0, 3, 0, true},
	{"slow: 20%", slow30, 10, 0, 2, 0, false},
	{"slow: below the minimum", slow30, 9, 0, 9, 0, false},
	{"slow: failures alone do not trip the slow rule", slow30, 10, 10, 0, 0, false},
	{"consecutive: one short", consec3, 0, 0, 0, 2, false},
	{"consecutive: at the threshold", consec3, 0, 0, 0, 3, true},
	{"consecutive: saturated run", consec3, 0, 0, 0, 1<<16 - 1, true},
	{"consecutive: ignores the minimum calls", both, 5, 1, 0, 3, true},
	{"consecutive and rate: neither holds", both, 12, 5, 0, 2, false},
	{"consecutive and rate: the rate holds", both, 12, 6, 0, 0, true},
	{"time window: minimum calls defaults to 100", timed, 99, 99, 0, 0, false},
	{"time window: 50 of 100", timed, 100, 50, 0, 0, true},
	// ceil(2^56 / 100) = 720,575,940,379,280 failures reach 1 %.
	{"1% of 2^56 calls", rate1, huge, 720_575_940_379_280, 0, 0, true},
	{"just under 1% of 2^56 calls", rate1, huge, 720_575_940_379_279, 0, 0, false},
	{"100% slow of 2^56 calls", rate1, huge, 0, huge, 0, true},
	{"100% of 2^56", rate100, huge, huge, 0, 0, true},
	{"one short of 100% of 2^56", rate100, huge, huge - 1, huge - 1, 0, false},
}
