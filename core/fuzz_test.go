package core

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/window"
)

// stateWordConfigs are the configs FuzzStateWord draws from: no window,
// count window with slow calls and backoff, time window with a failure
// count, and the probe limits at their maximum; then the features of issue
// 5 (half-open max wait, ramp-up, retry-after hints, metrics) on the same
// kinds of window, with coarse units of 1 ms and above and durations that
// are not a whole number of units. Config 0 waits forever in half-open;
// 1 to 3 have the default max wait, max(OpenDuration, 1 min).
var stateWordConfigs = []Config{
	{ConsecutiveFailures: 3, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2, MaxWaitInHalfOpen: WaitForever},
	{WindowSize: 5, FailureRateThreshold: 50, MinimumNumberOfCalls: 3, SlowCallRateThreshold: 50,
		SlowCallDurationThreshold: 100 * time.Millisecond, OpenDuration: 500 * time.Millisecond,
		OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Second, PermittedCallsInHalfOpen: 3, SuccessesToClose: 2},
	{WindowType: TimeBased, WindowSize: 4, FailureCountThreshold: 2, OpenDuration: time.Second + 300*time.Microsecond,
		PermittedCallsInHalfOpen: 1, SuccessesToClose: 3},
	{WindowSize: 3, FailureRateThreshold: 100, ConsecutiveFailures: 2, OpenDuration: time.Millisecond,
		OpenDurationBackoff: 1.5, MaxOpenDuration: time.Minute, PermittedCallsInHalfOpen: MaxPermittedInHalf, SuccessesToClose: MaxPermittedInHalf},
	// 4: no window; max wait 500 ms (units of 1 ms), ramp-up 2 s from 20 %
	// (units of 2 ms), hints up to 10 s, metrics.
	{ConsecutiveFailures: 2, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2, SuccessesToClose: 2,
		MaxWaitInHalfOpen: 500 * time.Millisecond, RampUpDuration: 2 * time.Second, RampUpStartPercent: 20,
		MaxRetryAfter: 10 * time.Second, CollectMetrics: true},
	// 5: count window with slow calls and backoff; max wait 3 s + 7 µs
	// (units of 3 ms, rounded up), ramp-up 10 s from 0 % (units of 10 ms),
	// hints up to 2 s (shorter than the longest backed-off open duration),
	// metrics.
	{WindowSize: 4, FailureRateThreshold: 50, MinimumNumberOfCalls: 2, SlowCallRateThreshold: 50,
		SlowCallDurationThreshold: 100 * time.Millisecond, ConsecutiveFailures: 4, OpenDuration: 300 * time.Millisecond,
		OpenDurationBackoff: 2, MaxOpenDuration: 5 * time.Second, PermittedCallsInHalfOpen: 3, SuccessesToClose: 1,
		MaxWaitInHalfOpen: 3*time.Second + 7*time.Microsecond, RampUpDuration: 10 * time.Second,
		MaxRetryAfter: 2 * time.Second, CollectMetrics: true},
	// 6: time window; the smallest max wait, ramp-up and hint bound (1 ms,
	// one unit), a ramp-up starting at 100 %, no metrics.
	{WindowType: TimeBased, WindowSize: 3, FailureCountThreshold: 2, ConsecutiveFailures: 3, OpenDuration: 700 * time.Millisecond,
		PermittedCallsInHalfOpen: 1, MaxWaitInHalfOpen: time.Millisecond, RampUpDuration: time.Millisecond,
		RampUpStartPercent: 100, MaxRetryAfter: time.Millisecond},
	// 7: probe limits at their maximum; the largest max wait, ramp-up and
	// hint bound (a year: units of about 31 s), metrics.
	{WindowSize: 3, FailureRateThreshold: 100, OpenDuration: time.Millisecond, PermittedCallsInHalfOpen: MaxPermittedInHalf,
		SuccessesToClose: MaxPermittedInHalf, FailuresToReopen: MaxPermittedInHalf, MaxWaitInHalfOpen: time.Hour, RampUpDuration: MaxOpenDurationLimit,
		RampUpStartPercent: 99, MaxRetryAfter: MaxOpenDurationLimit, CollectMetrics: true},
	// 8: half-open by a ratio: of five probes at most four in flight, three
	// successes close, the third failure re-opens; hints up to 1 s.
	{ConsecutiveFailures: 1, OpenDuration: time.Second, PermittedCallsInHalfOpen: 4, SuccessesToClose: 3,
		FailuresToReopen: 3, MaxRetryAfter: time.Second, CollectMetrics: true},
}

// The operations of FuzzStateWord, by op mod numWordOps.
const (
	wordAllow = iota
	wordRecord
	wordDone
	wordState
	wordCounts
	wordRecordHint
	wordDoneHint // Done with WithRetryAfter(err, hint)
	wordForceOpen
	wordDisable
	wordMetricsOnly
	wordReset
	wordMetrics
	numWordOps
)

// stateWordInput is one FuzzStateWord input.
type stateWordInput struct {
	raw        uint64
	cfgSel, op uint8
	pgen       uint32
	probe      bool
	outcome    uint8 // mod 3: the outcome; the rest: the hint or ForceOpen duration
	nowMs      int64
	extra      uint8 // bit 0: a permit of another generation; bit 1: coarse deadlines near now
	seed       uint64
}

// FuzzStateWord: the packed state word (docs/design.md) and every
// transition on it.
//
// Round trip: for any 64-bit value, unpack then pack gives the value back
// (with the payload bits the state does not carry cleared), and a word
// that went through pack once is a fixed point: no field's extreme leaks
// into a neighbour.
//
// Transitions: a breaker is given any reachable word in any of the six
// states (any generation; backoff step up to the config's last in open and
// half-open, zero elsewhere; a run of failures below the trip threshold;
// closed ramping up with any ramp-up deadline; any open deadline; any probe
// counts within PermittedCallsInHalfOpen and SuccessesToClose and any
// max-wait deadline in half-open), with the coarse deadlines optionally
// placed within a few durations of now, a window with some outcomes in it,
// a clock reading (negative and past the 2^36 ms deadline wrap included)
// and one operation: Allow, Record or Done of a permit of any generation,
// probe or not, with any outcome, RecordHint or Done with
// WithRetryAfter with hints zero, negative, small, at and past the bound
// and huge, State, Counts, Metrics, ForceOpen with valid and invalid
// durations, Disable, MetricsOnly, Reset. The word after it must be exactly
// the one expectTransition (the transition table of docs/design.md,
// written out) gives, with exactly as many notifications as generations
// advanced (0 or 1, with the right from, to, generation and time); the
// operation must return what the table says (permit, rejection and wait,
// error, state, counts), and Metrics must have counted exactly the
// operation's admission or rejection, outcome and transition. Every word
// after it is reachable again.
func FuzzStateWord(f *testing.F) {
	for _, in := range stateWordSeeds() {
		f.Add(in.raw, in.cfgSel, in.op, in.pgen, in.probe, in.outcome, in.nowMs, in.extra, in.seed)
	}
	f.Fuzz(func(t *testing.T, raw uint64, cfgSel, op uint8, pgen uint32, probe bool, outcome uint8, nowMs int64, extra uint8, seed uint64) {
		stateWordInput{raw, cfgSel, op, pgen, probe, outcome, nowMs, extra, seed}.check(t)
	})
}

// plainErrs are errors the default classifier maps to Success, Failure and
// Ignored, in Outcome order; none carries a hint.
var plainErrs = []error{nil, errors.New("failed"), context.Canceled}

// check runs one input and returns the label of the table row it took.
func (in stateWordInput) check(t *testing.T) string {
	t.Helper()
	roundTrip(t, in.raw)
	w := in.inject(t)
	b, u, gen := w.b, w.u, w.gen
	p := Permit{Generation: gen, Probe: in.probe, Start: time.Duration(int64(in.seed>>24)%int64(time.Second)) - 300*time.Millisecond}
	if in.extra&1 != 0 {
		p.Generation = otherGeneration(gen, in.pgen) // most of the time a current permit
	}
	o := Outcome(in.outcome % 3)
	arg := argument{hint: fuzzHint(in.outcome, &b.cfg, in.seed), force: fuzzForceOpen(in.outcome, in.seed)}
	op := in.op % numWordOps
	want := expectTransition(b, u, gen, p, o, arg, op, w.now, w.seeded)
	got := applyWordOp(b, op, p, o, arg)
	after := b.state.Load()
	if after != want.word {
		t.Fatalf("op %d [%s] on %+v (permit %+v, outcome %v, %+v, now %v): word %+v, want %+v",
			op, want.label, u, p, o, arg, w.now, unpack(after), unpack(want.word))
	}
	if got.permit != want.permit || !errors.Is(got.err, want.err) || (errors.Is(want.err, ErrRejected) && RetryAfterOf(got.err) != want.permit.RetryAfter) ||
		(got.err == nil) != (want.err == nil) || got.state != want.state || got.counts != want.counts || got.metrics != (Metrics{}) {
		t.Fatalf("op %d [%s] on %+v (permit %+v, %+v, now %v): returned %+v, want %+v %v %v %+v",
			op, want.label, u, p, arg, w.now, got, want.permit, want.err, want.state, want.counts)
	}
	if m := b.Metrics(); m != want.metrics {
		t.Fatalf("op %d [%s] on %+v (permit %+v, outcome %v, %+v, now %v): metrics %+v, want %+v",
			op, want.label, u, p, o, arg, w.now, m, want.metrics)
	}
	w.notified(t, want)
	if reachable(after, &b.cfg) != after {
		t.Fatalf("[%s] word after %+v is not a reachable word", want.label, unpack(after))
	}
	return want.label
}

// injected is a breaker FuzzStateWord put in a state: the word u (with
// the 64-bit generation gen, named by base), the clock reading now, the
// outcomes seeded in its window, and the notifications it delivers.
type injected struct {
	b         *Breaker
	u         word
	gen, base uint64
	now       time.Duration
	seeded    []seededOutcome
	got       *[]Transition
}

// inject builds the input's breaker and puts it in a reachable word with
// a window holding some outcomes of the word's generation.
func (in stateWordInput) inject(t *testing.T) injected {
	t.Helper()
	cfg := stateWordConfigs[int(in.cfgSel)%len(stateWordConfigs)]
	w := injected{now: time.Duration(in.nowMs%(1<<42))*time.Millisecond + time.Duration(in.extra)*7*time.Microsecond, got: new([]Transition)}
	cfg.Clock = NewManualClock(w.now)
	cfg.OnStateChange = func(tr Transition) { *w.got = append(*w.got, tr) }
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.b = b
	before := reachable(in.raw, &b.cfg)
	if in.extra&2 != 0 {
		before = nearNow(before, &b.cfg, w.now)
	}
	w.u = unpack(before)
	// The breaker generation: any 64-bit value with the word's low bits,
	// named by a base that trails it by any lag below 2^20 (state.go).
	w.gen, w.base = fuzzGenerations(w.u.gen, in.seed)
	w.seeded = in.seedWindow(b, uint32(w.gen), w.now)
	b.state.Store(before)
	b.base.Store(w.base)
	// Notifications are delivered in generation order from the one
	// after the word's: a breaker that got here by transitions would
	// have delivered all the earlier ones.
	b.dispatch.next.Store((w.gen + 1) & seqMask << 1)
	return w
}

// seedWindow puts some outcomes in b's window, of the generation whose
// low bits are g, all in the current second for a time window, and
// returns them.
func (in stateWordInput) seedWindow(b *Breaker, g uint32, now time.Duration) []seededOutcome {
	if b.buckets != nil {
		// The buckets as a breaker that committed its way to the word's
		// generation left them: swept every 2^22 generations on the way
		// (Window.Advance), so that none reads as newer than it.
		for at := uint32(0); (g-at)&(1<<24-1) >= 1<<22; {
			at = (at + 1<<22) & (1<<24 - 1)
			b.buckets.Advance(at)
		}
	}
	var seeded []seededOutcome
	for i := range int(in.seed % 6) {
		o := seededOutcome{fail: in.seed>>(8+i)&1 != 0, slow: in.seed>>(16+i)&1 != 0}
		switch {
		case b.ring != nil:
			b.ring.Reset(g)
			b.ring.Record(g, o.fail, o.slow)
		case b.buckets != nil:
			b.buckets.RecordCurrent(g, now, o.fail, o.slow)
		}
		seeded = append(seeded, o)
	}
	return seeded
}

// returned is what one of FuzzStateWord's operations returned.
type returned struct {
	permit  Permit
	err     error
	state   State
	counts  Counts
	metrics Metrics
}

// applyWordOp runs operation op on b.
func applyWordOp(b *Breaker, op uint8, p Permit, o Outcome, arg argument) (r returned) {
	switch op {
	case wordAllow:
		r.permit, r.err = b.Allow()
	case wordRecord:
		b.Record(p, o)
	case wordDone: // nil, a failure and a cancellation classify to o by default
		b.Done(p, plainErrs[o])
	case wordState:
		r.state = b.State()
	case wordCounts:
		r.counts = b.Counts()
	case wordRecordHint:
		b.RecordHint(p, arg.hint)
	case wordDoneHint:
		b.Done(p, WithRetryAfter(plainErrs[o], arg.hint))
	case wordForceOpen:
		r.err = b.ForceOpen(arg.force)
	case wordDisable:
		b.Disable()
	case wordMetricsOnly:
		b.MetricsOnly()
	case wordReset:
		b.Reset()
	default:
		r.metrics = b.Metrics()
	}
	return r
}

// notified checks the notifications and the generation after the
// operation: as many notifications as generations advanced (0 or 1), with
// the right from, to, generation, time and open deadline, and base
// raised only as a committer raises it.
func (w injected) notified(t *testing.T, want expected) {
	t.Helper()
	b, u, gen, got := w.b, w.u, w.gen, *w.got
	after := b.state.Load()
	a := unpack(after)
	if advanced := (a.gen - u.gen) & genMask; advanced > 1 || int(advanced) != len(got) {
		t.Fatalf("[%s] generation advanced by %d with %d notifications", want.label, advanced, len(got))
	}
	// Which rule a reason names is the differential tests' to check
	// (both implementations decide it); here every notification has one.
	// OpenUntil is the deadline the new word holds (mod 2^36 ms there).
	var until time.Duration
	if len(got) == 1 && a.state == Open {
		until = got[0].OpenUntil
		if uint64(until/time.Millisecond)%deadlineMod != a.deadline || until%time.Millisecond != 0 {
			t.Fatalf("[%s] notification %+v: OpenUntil is not the word's deadline %d ms", want.label, got[0], a.deadline)
		}
	}
	if len(got) == 1 && (got[0].Reason == 0 || got[0] != Transition{From: u.state, To: a.state, Reason: got[0].Reason, Generation: gen + 1, At: want.at, OpenUntil: until}) {
		t.Fatalf("[%s] notification %+v, want %v -> %v at generation %d, t=%v", want.label, got[0], u.state, a.state, gen+1, want.at)
	}
	// A transition's committer raises base to its generation once base
	// trails that by 2^16; nothing else moves it.
	wantGen, wantBase := gen+uint64(len(got)), w.base
	if len(got) == 1 && wantGen-w.base >= baseStep {
		wantBase = wantGen
	}
	if g := b.genOf(stateWord(after)); g != wantGen || b.base.Load() != wantBase {
		t.Fatalf("[%s] generation %d, base %d after the operation, want %d, %d", want.label, g, b.base.Load(), wantGen, wantBase)
	}
}

// fuzzGenerations is the breaker generation FuzzStateWord puts under a word
// whose generation field is low, and the base that names it: any 64-bit
// generation with those low bits (the 2^64 wrap included), and a base any
// lag below 2^20 behind it. Seed 0 gives generation low, base 0: a breaker
// fewer than 2^20 transitions old.
func fuzzGenerations(low uint32, seed uint64) (gen, base uint64) {
	h := seed * 0x9e3779b97f4a7c15
	gen = h&^genMask | uint64(low)
	if h>>62 == 0 {
		gen = uint64(low) // a young breaker, a quarter of the time
	}
	lag := (h >> 20) & genMask
	if h>>40&3 == 0 {
		lag = gen - gen&^genMask // base at the word's own 2^20 boundary
	}
	return gen, gen - lag
}

// otherGeneration is the generation of a permit not granted by FuzzStateWord's
// word, from sel: one within two of gen (gen itself included), one
// exactly k*2^20 away (k = -3..3 but 0: it has the word's low bits and
// must still be stale), or any generation at all.
func otherGeneration(gen uint64, sel uint32) uint64 {
	switch sel % 3 {
	case 0:
		return gen + uint64(sel>>2%5) - 2
	case 1:
		k := int64(sel>>2%6) - 3
		if k >= 0 {
			k++
		}
		return gen + uint64(k)<<genBits
	}
	return uint64(sel) * 0x2545f4914f6cdd1d
}

// roundTrip checks pack/unpack on an arbitrary 64-bit value.
func roundTrip(t *testing.T, raw uint64) {
	t.Helper()
	u := unpack(raw)
	w := pack(u)
	want := raw
	switch u.state {
	case MetricsOnly: // bits 24..43 are unused
		want = raw&^(uint64(payMask)<<payShift) | uint64(u.consec)<<consecShift
	case ForcedOpen, Disabled, 6, 7: // no payload
		want = raw &^ (uint64(payMask) << payShift)
	}
	if w != want {
		t.Fatalf("pack(unpack(%#x)) = %#x, want %#x", raw, w, want)
	}
	if pack(unpack(w)) != w || unpack(w) != u {
		t.Fatalf("%#x is not a fixed point of pack/unpack", w)
	}
	if u.state > 7 || u.step > maxStep || u.gen > genMask || u.deadline > payMask || u.consec > maxConsec ||
		u.expiry > expiryMask || u.rampEnd > rampMask {
		t.Fatalf("unpack(%#x) = %+v has a field out of range", raw, u)
	}
}

// reachable turns any 64-bit value into a word a breaker with settings s can
// hold (and leaves a word that already is one unchanged): one of the six
// states; a backoff step the backoff can reach in open and half-open, and
// zero in the other states (closing and every manual control reset it); in
// closed and metrics-only a run of failures below ConsecutiveFailures (zero
// when it is not tracked); the ramp-up bit and deadline only in closed with
// a ramp-up configured (the deadline zero unless ramping); in half-open
// probe counts within the limits and a max-wait deadline only with a max
// wait configured.
func reachable(raw uint64, s *Settings) uint64 {
	u := unpack(raw)
	u.state = State(uint8(u.state) % NumStates)
	u = unpack(pack(u))
	switch u.state {
	case Open, HalfOpen:
		if u.step > s.lastStep {
			u.step %= s.lastStep + 1
		}
	default:
		u.step = 0
	}
	switch u.state {
	case Closed, MetricsOnly:
		if s.ConsecutiveFailures == 0 {
			u.consec = 0
		} else {
			u.consec %= uint32(s.ConsecutiveFailures)
		}
		if u.state != Closed || s.RampUpDuration == 0 || !u.ramping {
			u.ramping, u.rampEnd = false, 0
		}
	case HalfOpen:
		if s.MaxWaitInHalfOpen == WaitForever {
			u.expiry = 0
		}
		n, need, bad := s.PermittedCallsInHalfOpen, s.SuccessesToClose, s.FailuresToReopen
		inFlight := int(u.inFlight) % (n + 1)
		success := int(u.success) % need
		failure := int(u.failure) % bad
		if room := need + bad - 1 - success - failure; inFlight > room {
			inFlight = room
		}
		u.inFlight, u.success, u.failure = uint8(inFlight), uint8(success), uint8(failure)
	}
	return pack(u)
}

// nearNow moves the coarse deadline of a ramping closed word or a half-open
// word with a max wait to within about one duration of now (the deadline
// field, taken mod a little over two spans, picks where): a random 19- or
// 20-bit deadline is almost always far from now, which only tests the
// sign of the difference.
func nearNow(w uint64, s *Settings, now time.Duration) uint64 {
	u := unpack(w)
	switch {
	case u.state == Closed && u.ramping:
		span := s.rampUp.span
		off := int64(uint64(u.rampEnd)%(2*span+3)) - 1 // -1 (over) .. 2 spans (clock went back)
		u.rampEnd = uint32(uint64(int64(s.rampUnits(now))+off) & rampMask)
	case u.state == HalfOpen && s.MaxWaitInHalfOpen > 0:
		span := s.halfOpenWait.span
		off := int64(uint64(u.expiry)%(3*span+3)) - int64(span) - 1 // a span past .. two spans ahead (clock went back)
		u.expiry = uint32(uint64(int64(s.halfOpenUnits(now))+off) & expiryMask)
	}
	return pack(u)
}

// argument is an operation's duration: the hint of RecordHint and of
// Done with WithRetryAfter, and the duration of ForceOpen.
type argument struct {
	hint, force time.Duration
}

// fuzzHint decodes a retry-after hint from the bits of the outcome byte
// above the outcome: zero, negative, a nanosecond, small, at and a
// nanosecond past the bound, huge, or within a nanosecond of the open
// duration.
func fuzzHint(sel uint8, s *Settings, seed uint64) time.Duration {
	switch sel / 3 % 8 {
	case 0:
		return 0
	case 1:
		return -time.Duration(seed%uint64(time.Hour)) - 1
	case 2:
		return 1
	case 3:
		return time.Duration(seed % uint64(3*time.Second))
	case 4:
		return s.MaxRetryAfter
	case 5:
		return s.MaxRetryAfter + 1
	case 6:
		return math.MaxInt64
	}
	return s.openDuration(0) + time.Duration(seed%3) - 1
}

// fuzzForceOpen decodes ForceOpen's duration likewise: zero, a nanosecond,
// small, the limit, and the invalid: -1 ns, the most negative, a
// nanosecond past the limit, the largest.
func fuzzForceOpen(sel uint8, seed uint64) time.Duration {
	switch sel / 3 % 8 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return time.Duration(seed % uint64(3*time.Second))
	case 3:
		return MaxOpenDurationLimit
	case 4:
		return -1
	case 5:
		return math.MinInt64
	case 6:
		return MaxOpenDurationLimit + 1
	}
	return math.MaxInt64
}

type expected struct {
	word    uint64
	permit  Permit
	err     error
	state   State
	counts  Counts
	metrics Metrics       // the counters after the operation, from zero
	at      time.Duration // time of the notification, if any
	label   string        // the row of the table
}

// wrapped is the difference a - b of two coarse deadlines of bits bits,
// read as a signed number: the rule docs/design.md gives for comparing
// them (exact within half the range).
func wrapped(a, b uint64, bits uint) int64 {
	d := (a - b) & (1<<bits - 1)
	if d >= 1<<(bits-1) {
		return int64(d) - 1<<bits
	}
	return int64(d)
}

// passed is the rule for a coarse deadline remaining units ahead of the
// clock, with span the configured duration in units: it has passed when it
// is not ahead, or when it is further ahead than any deadline is ever set
// (span+1 units, rounding included), which only a deadline that passed so
// long ago that the word's difference wrapped, or a clock that went
// backwards by more than the duration, can be.
func passed(remaining int64, span uint64) bool {
	return remaining <= 0 || remaining > int64(span)+1
}

// expectTransition is the transition table of docs/design.md, written
// out: what op does to a breaker holding word u at clock now, and what
// the metrics count for it.
func expectTransition(b *Breaker, u word, gen uint64, p Permit, o Outcome, arg argument, op uint8, now time.Duration, seeded []seededOutcome) expected {
	x := &table{b: b, s: &b.cfg, u: u, gen: gen, p: p, now: now, nz: max(now, 0), seeded: seeded, e: expected{word: pack(u)}}
	switch op {
	case wordAllow:
		x.allow()
	case wordRecord, wordDone: // the plain errors map to the same outcomes
		x.record(o)
	case wordRecordHint:
		x.recordHint(arg.hint)
	case wordDoneHint:
		// WithRetryAfter(nil, d) is nil: a success. A failure's hint is read
		// only with hints on, and only when positive.
		if o == Failure && x.s.MaxRetryAfter > 0 && arg.hint > 0 {
			x.recordHint(arg.hint)
		} else {
			x.record(o)
		}
		x.e.label = "done-hint/" + x.e.label
	case wordState:
		x.e.label, x.e.state = "state/"+u.state.String(), u.state
		if u.state == Open && untilDeadline(u.deadline, now) == 0 {
			x.e.state = HalfOpen
		}
	case wordCounts:
		x.counts()
	case wordForceOpen:
		x.forceOpen(arg.force)
	case wordDisable, wordMetricsOnly, wordReset:
		// A fresh word of the control's state at the next generation
		// (Reset: closed with no ramp-up).
		to := map[uint8]State{wordDisable: Disabled, wordMetricsOnly: MetricsOnly, wordReset: Closed}[op]
		x.e.label = map[uint8]string{wordDisable: "disable", wordMetricsOnly: "metrics-only", wordReset: "reset"}[op] + "/from-" + u.state.String()
		x.to(word{state: to, gen: lowGen(gen + 1)}, now)
	default:
		x.e.label = "metrics"
	}
	if !x.s.CollectMetrics {
		x.e.metrics = Metrics{}
	}
	return x.e
}

// table is expectTransition's working state: the breaker and its
// settings, the word before the operation (changed as the row is worked
// out) and its generation, the permit, the clock (nz: a negative reading
// counts as zero for deadlines), the outcomes already in the window, and
// the expectation so far.
type table struct {
	b       *Breaker
	s       *Settings
	u       word
	gen     uint64
	p       Permit
	now, nz time.Duration
	seeded  []seededOutcome
	e       expected
}

// start is a permit's Start at t: the reading, when slow calls are judged.
func (x *table) start(t time.Duration) time.Duration {
	if x.s.slowEnabled() {
		return t
	}
	return 0
}

func (x *table) admit(label string, p Permit) {
	x.e.label, x.e.permit = label, p
	x.e.metrics.Admitted++
}

func (x *table) reject(label string, p Permit, err error) {
	x.e.label, x.e.permit, x.e.err = label, p, err
	m := &x.e.metrics
	switch err {
	case ErrOpen:
		m.RejectedOpen++
	case ErrHalfOpenFull:
		m.RejectedHalfOpenFull++
	case ErrForcedOpen:
		m.RejectedForcedOpen++
	case ErrRampingUp:
		m.RejectedRampUp++
	}
}

// to commits the transition to n at the time at.
func (x *table) to(n word, at time.Duration) {
	x.e.word, x.e.at = pack(n), at
	x.e.metrics.Transitions[x.u.state][n.state]++
}

func (x *table) acted(o Outcome, slow bool) {
	m := &x.e.metrics
	switch o {
	case Success:
		m.Successes++
	case Failure:
		m.Failures++
	default:
		m.Ignored++
	}
	if slow {
		m.SlowCalls++
	}
}

func (x *table) dropped(label string) {
	x.e.label = label
	x.e.metrics.Dropped++
}

// openFor is the open duration at backoff step with a hint, which is kept
// in whole milliseconds, rounded up, like ForceOpen's d.
func (x *table) openFor(step uint8, hint time.Duration) time.Duration {
	return max(x.s.openDuration(step), (hint+time.Millisecond-1)/time.Millisecond*time.Millisecond)
}

// trip is the transition to open at the first backoff step, for d.
func (x *table) trip(d time.Duration) {
	x.to(word{state: Open, gen: lowGen(x.gen + 1), deadline: deadline(x.now, d)}, x.now)
}

// window is the window's counts with the seeded outcomes and then more,
// as many of the last as a count window holds; zero without a window.
func (x *table) window(more ...seededOutcome) window.Counts {
	if x.b.ring == nil && x.b.buckets == nil {
		return window.Counts{}
	}
	all := append(append([]seededOutcome(nil), x.seeded...), more...)
	if x.b.ring != nil && len(all) > x.b.ring.Size() {
		all = all[len(all)-x.b.ring.Size():]
	}
	return sumOutcomes(all)
}

// record is Record(p, o).
func (x *table) record(o Outcome) {
	u, s := &x.u, x.s
	if x.p.Probe {
		x.recordProbe(o)
		return
	}
	if (u.state != Closed && u.state != MetricsOnly) || x.gen != x.p.Generation {
		x.dropped("record/stale-" + u.state.String())
		return
	}
	if o == Ignored {
		x.e.label = "record/ignored"
		x.acted(Ignored, false)
		return
	}
	fail := o == Failure
	slow := s.isSlow(x.now - x.p.Start)
	x.acted(o, slow)
	c := x.window(seededOutcome{fail: fail, slow: slow})
	consec := uint64(u.consec)
	switch {
	case s.ConsecutiveFailures == 0: // not tracked: the word keeps what it had
	case !fail:
		consec = 0
	case consec < maxConsec:
		consec++
	}
	switch {
	case !s.shouldTrip(c, consec):
		x.e.label = "record/count-" + u.state.String()
		u.consec = uint32(consec) // the ramp-up bits ride along
		x.e.word = pack(*u)
	case u.state == MetricsOnly: // "would have opened"
		x.e.label = "record/metrics-only-trip"
		x.to(word{state: MetricsOnly, gen: lowGen(x.gen + 1)}, x.now)
	default:
		x.e.label = "record/trip"
		x.trip(s.openDuration(0))
	}
}

// recordProbe is Record(p, o) of a probe permit.
func (x *table) recordProbe(o Outcome) {
	u, s := &x.u, x.s
	if u.state != HalfOpen || x.gen != x.p.Generation || u.inFlight == 0 {
		x.dropped("record/probe-stale")
		return
	}
	u.inFlight--
	x.acted(o, false) // probes are not judged slow (R7)
	switch {
	case o == Ignored:
		x.e.label, x.e.word = "record/probe-ignored", pack(*u)
	case o == Success && int(u.success)+1 < s.SuccessesToClose:
		u.success++
		x.e.label, x.e.word = "record/probe-success", pack(*u)
	case o == Failure && int(u.failure)+1 < s.FailuresToReopen:
		u.failure++
		x.e.label, x.e.word = "record/probe-failure", pack(*u)
	case o == Success:
		closed := word{state: Closed, gen: lowGen(x.gen + 1)}
		x.e.label = "record/close"
		if s.RampUpDuration > 0 {
			x.e.label = "record/close-ramp"
			closed.ramping, closed.rampEnd = true, uint32(s.rampDeadline(x.now)&rampMask)
		}
		x.to(closed, x.now)
	default:
		step := s.nextStep(u.step)
		x.e.label = "record/reopen"
		x.to(word{state: Open, step: step, gen: lowGen(x.gen + 1), deadline: deadline(x.now, s.openDuration(step))}, x.now)
	}
}

// recordHint is RecordHint(p, d).
func (x *table) recordHint(d time.Duration) {
	u, s, p := &x.u, x.s, x.p
	var h time.Duration // bounded by MaxRetryAfter; zero: no hint
	if s.MaxRetryAfter > 0 && d > 0 {
		h = min(d, s.MaxRetryAfter)
	}
	switch {
	case h == 0:
		x.record(Failure)
		x.e.label = "hint/plain:" + x.e.label
	case x.gen != p.Generation:
		x.dropped("hint/stale")
	case !p.Probe && u.state == Closed:
		x.acted(Failure, false)
		x.e.label = "hint/trip"
		x.trip(x.openFor(0, h))
	case !p.Probe && u.state == MetricsOnly:
		x.acted(Failure, false)
		x.e.label = "hint/metrics-only-trip"
		x.to(word{state: MetricsOnly, gen: lowGen(x.gen + 1)}, x.now)
	case p.Probe && u.state == HalfOpen && u.inFlight > 0:
		x.acted(Failure, false)
		step := s.nextStep(u.step)
		x.e.label = "hint/reopen"
		x.to(word{state: Open, step: step, gen: lowGen(x.gen + 1), deadline: deadline(x.now, x.openFor(step, h))}, x.now)
	default: // a current generation, but no call of it to fail
		x.dropped("hint/drop-" + u.state.String())
	}
}

// allow is Allow().
func (x *table) allow() {
	u, s, gen, nz := &x.u, x.s, x.gen, x.nz
	switch u.state {
	case Closed:
		x.allowClosed()
	case Open:
		if wait := untilDeadline(u.deadline, nz); wait > 0 {
			x.reject("allow/open", Permit{RetryAfter: wait}, ErrOpen)
			return
		}
		x.to(word{state: HalfOpen, step: u.step, gen: lowGen(gen + 1), inFlight: 1, expiry: uint32(s.halfOpenDeadline(nz) & expiryMask)}, nz)
		x.admit("allow/open->half-open", Permit{Generation: gen + 1, Probe: true}) // a probe carries no Start
	case HalfOpen:
		x.allowHalfOpen()
	case ForcedOpen:
		x.reject("allow/forced-open", Permit{}, ErrForcedOpen)
	case Disabled:
		x.admit("allow/disabled", Permit{Generation: gen}) // no clock read
	case MetricsOnly:
		x.admit("allow/metrics-only", Permit{Generation: gen, Start: x.start(x.now)})
	}
}

// allowClosed is Allow() in closed: admitted, or by share while ramping
// up.
func (x *table) allowClosed() {
	u, s, now := &x.u, x.s, x.now
	if !u.ramping {
		x.admit("allow/closed", Permit{Generation: x.gen, Start: x.start(now)})
		return
	}
	left := wrapped(uint64(u.rampEnd), s.rampUnits(now), rampBits)
	switch {
	case passed(left, s.rampUp.span): // the ramp is over: the flag is cleared, same generation
		u.ramping, u.rampEnd = false, 0
		x.e.word = pack(*u)
		x.admit("allow/ramp-end", Permit{Generation: x.gen, Start: x.start(now)})
	case s.rampAdmits(uint64(left), now):
		x.admit("allow/ramp-admit", Permit{Generation: x.gen, Start: x.start(now)})
	default:
		x.reject("allow/ramp-shed", Permit{}, ErrRampingUp)
	}
}

// allowHalfOpen is Allow() in half-open: a probe while slots are left,
// else refused until the max wait passes, then a new generation.
func (x *table) allowHalfOpen() {
	u, s, gen, nz := &x.u, x.s, x.gen, x.nz
	// A probe while fewer than the permitted calls are in flight and one
	// more outcome could still come before the verdict (at the last needed
	// success or the last tolerated failure's successor).
	if int(u.inFlight) < s.PermittedCallsInHalfOpen &&
		int(u.inFlight)+1+int(u.success)+int(u.failure) <= s.SuccessesToClose+s.FailuresToReopen-1 {
		u.inFlight++
		x.e.word = pack(*u)
		x.admit("allow/probe", Permit{Generation: gen, Probe: true})
		return
	}
	if s.MaxWaitInHalfOpen == WaitForever {
		x.reject("allow/half-open-full", Permit{RetryAfter: s.HalfOpenFullWait}, ErrHalfOpenFull)
		return
	}
	if left := wrapped(uint64(u.expiry), s.halfOpenUnits(nz), expiryBits); !passed(left, s.halfOpenWait.span) {
		// The wait to the expiry boundary: left whole units from the
		// start of the current one.
		unit := s.halfOpenWait.unit
		x.reject("allow/half-open-full", Permit{RetryAfter: min(time.Duration(left)*unit-nz%unit, s.HalfOpenFullWait)}, ErrHalfOpenFull)
		return
	}
	// The max wait has passed: a new generation, whose first probe this
	// call is.
	x.to(word{state: HalfOpen, step: u.step, gen: lowGen(gen + 1), inFlight: 1, expiry: uint32(s.halfOpenDeadline(nz) & expiryMask)}, nz)
	x.admit("allow/half-open-restart", Permit{Generation: gen + 1, Probe: true})
}

// counts is Counts(), which commits a trip the seeded outcomes owe first.
func (x *table) counts() {
	u, s, gen, now := &x.u, x.s, x.gen, x.now
	x.e.label = "counts/" + u.state.String()
	c := &x.e.counts
	c.State, c.Generation = u.state, gen
	switch u.state {
	case Open:
		if untilDeadline(u.deadline, now) == 0 {
			c.State = HalfOpen
		}
	case HalfOpen:
		c.ProbesInFlight, c.ProbeSuccesses, c.ProbeFailures = int(u.inFlight), int(u.success), int(u.failure)
	case Closed, MetricsOnly:
		c.ConsecutiveFailures = uint64(u.consec)
		if x.b.buckets != nil && len(x.seeded) > 0 && s.rule.Trips(sumOutcomes(x.seeded)) {
			// The seeded outcomes, all of the current second, trip the
			// rule: the trip is owed, and Counts commits it before it
			// reads (Breaker.Counts).
			x.e.label = "counts/owed-trip-" + u.state.String()
			c.Generation, c.ConsecutiveFailures = gen+1, 0
			if u.state == MetricsOnly {
				x.to(word{state: MetricsOnly, gen: lowGen(gen + 1)}, now)
				return
			}
			x.trip(s.openDuration(0))
			c.State = Open
			if untilDeadline(deadline(now, s.openDuration(0)), now) == 0 {
				c.State = HalfOpen
			}
			return
		}
		wc := x.window()
		c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = wc.Calls, wc.Failures, wc.SlowCalls, wc.SlowFailures
	}
}

// forceOpen is ForceOpen(d).
func (x *table) forceOpen(d time.Duration) {
	from := x.u.state.String()
	switch {
	case d < 0 || d > MaxOpenDurationLimit:
		x.e.label, x.e.err = "force-open/invalid", ErrInvalidArgument
	case d == 0:
		x.e.label = "force-open/0-from-" + from
		x.to(word{state: ForcedOpen, gen: lowGen(x.gen + 1)}, x.now)
	default:
		x.e.label = "force-open/d-from-" + from
		x.trip((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond) // d kept in whole ms, rounded up
	}
}

// seededOutcome is one outcome put in a window before the operation.
type seededOutcome struct{ fail, slow bool }

func sumOutcomes(os []seededOutcome) window.Counts {
	var c window.Counts
	for _, o := range os {
		c.Calls++
		if o.fail {
			c.Failures++
		}
		if o.slow {
			c.SlowCalls++
		}
		if o.fail && o.slow {
			c.SlowFailures++
		}
	}
	return c
}

// stateWordSeeds are FuzzStateWord's seeds: five raw words (zero, all
// ones, and three mixed bit patterns), then a word in each state the
// optional features add and each row of the table they add (config 4 unless
// said otherwise: two failures in a row trip, two probes, two successes
// close, max wait 500 ms in units of 1 ms, ramp-up 2 s from 20 % in units
// of 2 ms, hints up to 10 s). extra 2 places the coarse deadlines near now
// (nearNow): a ramp-up deadline field r means r mod 2003 - 1 units from
// now, a max-wait field x means x mod 1503 - 501 units.
func stateWordSeeds() []stateWordInput {
	const g = 5
	seeds := []stateWordInput{
		{0, 0, 0, 0, false, 1, 0, 0, 0},
		{^uint64(0), 1, 1, 7, true, 0, 1 << 36, 3, 0x5555},
		{0x0000_1000_0000_0101, 2, 2, 1, false, 1, 5000, 9, 0xff},
		{0x0003_3000_0000_2a02, 1, 3, 3, true, 1, -7, 1, 1},
		{0xfffff_000_0000_0002, 3, 1, 0xfffff, true, 0, 999, 4, 0xabc},
	}
	add := func(u word, op uint8, probe bool, outcome uint8, nowMs int64) {
		u.gen = g
		seeds = append(seeds, stateWordInput{raw: pack(u), cfgSel: 4, op: op, probe: probe, outcome: outcome, nowMs: nowMs, extra: 2})
	}
	ramping := func(r uint32) word { return word{state: Closed, ramping: true, rampEnd: r} }
	full := func(x uint32) word { return word{state: HalfOpen, step: 1, inFlight: 2, expiry: x} }
	// Allow while ramping up: over (-1 unit), halfway (admitted and shed
	// at different readings: 37 ms apart, since readings a whole number of
	// milliseconds apart hash to an arithmetic progression that moves only
	// about 1.1 % of the range per millisecond), at the start (a span and a
	// unit ahead, the most a ramp is ever set), further ahead (impossible
	// but for a clock that went back or a wrapped difference: over).
	add(ramping(0), wordAllow, false, 0, 10_000)
	for i := range int64(8) {
		add(ramping(501), wordAllow, false, 0, 10_000+37*i)
	}
	add(ramping(1002), wordAllow, false, 0, 10_000)
	add(ramping(1003), wordAllow, false, 0, 10_000)
	add(ramping(1800), wordAllow, false, 0, 10_000)
	// A full half-open breaker: the max wait passed a span ago, exactly
	// now, not yet (a unit, and a span and a unit ahead), or impossibly far
	// ahead (passed).
	add(full(0), wordAllow, false, 0, 20_000)
	add(full(501), wordAllow, false, 0, 20_000)
	add(full(502), wordAllow, false, 0, 20_000)
	add(full(1002), wordAllow, false, 0, 20_000)
	add(full(1003), wordAllow, false, 0, 20_000)
	// open -> half-open with a max-wait deadline; the last success closes
	// with a ramp-up.
	add(word{state: Open, step: 2, deadline: 30_000}, wordAllow, false, 0, 30_000)
	add(word{state: HalfOpen, inFlight: 1, success: 1, expiry: 77}, wordRecord, true, 0, 30_000)
	// Allow and Record in the manual states; metrics-only counting and
	// "would have opened".
	for _, st := range []State{ForcedOpen, Disabled, MetricsOnly} {
		add(word{state: st}, wordAllow, false, 0, 40_000)
		add(word{state: st}, wordRecord, false, 1, 40_000)
	}
	add(word{state: MetricsOnly, consec: 1}, wordRecord, false, 1, 40_000)
	add(word{state: MetricsOnly, consec: 1}, wordDone, false, 0, 40_000)
	// RecordHint of a hint at the bound, 10 s (outcome 12), in every
	// state; of a zero hint (outcome 1); of a huge one (outcome 18) on a
	// probe; of one a nanosecond below the open duration (outcome 21);
	// Done of a failure with a hint at the bound (outcome 13), and of a
	// success (outcome 12).
	for _, st := range []State{Closed, Open, HalfOpen, ForcedOpen, Disabled, MetricsOnly} {
		u := word{state: st, deadline: 50_000, inFlight: 1}
		add(u, wordRecordHint, st == HalfOpen, 12, 50_000)
	}
	add(word{state: Closed}, wordRecordHint, false, 1, 50_000)
	add(word{state: HalfOpen, inFlight: 2}, wordRecordHint, true, 18, 50_000)
	add(word{state: Closed, consec: 1}, wordRecordHint, false, 21, 50_000)
	add(word{state: Closed, ramping: true, rampEnd: 700}, wordDoneHint, false, 13, 50_000)
	add(word{state: HalfOpen, inFlight: 1}, wordDoneHint, true, 13, 50_000)
	add(word{state: MetricsOnly}, wordDoneHint, false, 12, 50_000)
	// The manual controls from each state: ForceOpen(0) (outcome 0),
	// ForceOpen of the limit (outcome 9), Disable, MetricsOnly, Reset; and
	// State, Counts. Then ForceOpen's invalid durations (outcomes 12, 15,
	// 18, 21) and a nanosecond (outcome 3), and Metrics.
	for _, st := range []State{Closed, Open, HalfOpen, ForcedOpen, Disabled, MetricsOnly} {
		u := word{state: st, deadline: 60_000, inFlight: 1, ramping: st == Closed, rampEnd: 3}
		add(u, wordForceOpen, false, 0, 60_000)
		add(u, wordForceOpen, false, 9, 60_000)
		add(u, wordDisable, false, 0, 60_000)
		add(u, wordMetricsOnly, false, 0, 60_000)
		add(u, wordReset, false, 0, 60_000)
		add(u, wordState, false, 0, 60_000)
		add(u, wordCounts, false, 0, 60_000)
	}
	for _, sel := range []uint8{12, 15, 18, 21, 3} {
		add(word{state: Closed}, wordForceOpen, false, sel, 60_000)
	}
	add(word{state: Closed}, wordMetrics, false, 0, 60_000)
	// Config 5 (count window, slow calls, ramp-up from 0 % in units of 10
	// ms, max wait in units of 3 ms): a metrics-only window that trips on
	// its rate, and a ramping window that counts.
	seeds = append(seeds,
		stateWordInput{raw: pack(word{state: MetricsOnly, gen: 9}), cfgSel: 5, op: wordRecord, outcome: 1, nowMs: 70_000, seed: 0x0303_0303_0f0f_0305},
		stateWordInput{raw: pack(word{state: Closed, gen: 9, ramping: true, rampEnd: 1500}), cfgSel: 5, op: wordRecord, outcome: 0, nowMs: 70_000, extra: 2, seed: 0x0303_0303_0000_0302},
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: 3, expiry: 1200}), cfgSel: 5, op: wordAllow, nowMs: 70_000, extra: 2},
		stateWordInput{raw: pack(word{state: Closed, gen: 9, ramping: true, rampEnd: 1}), cfgSel: 6, op: wordAllow, nowMs: 70_000, extra: 2},
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: MaxPermittedInHalf, expiry: 3}), cfgSel: 7, op: wordAllow, nowMs: 70_000, extra: 2},
		// Config 8 (three successes close, the third failure re-opens): a
		// tolerated failure, the failure that re-opens, a hinted failure
		// that re-opens at once, a probe admitted beside a tolerated
		// failure, and a full generation (four outcomes counted or in flight).
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: 2, success: 1, failure: 1}), cfgSel: 8, op: wordRecord, probe: true, outcome: 1, nowMs: 70_000},
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: 1, success: 2, failure: 2}), cfgSel: 8, op: wordRecord, probe: true, outcome: 1, nowMs: 70_000},
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: 1, failure: 1}), cfgSel: 8, op: wordRecordHint, probe: true, outcome: 7, nowMs: 70_000},
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: 1, success: 1, failure: 1}), cfgSel: 8, op: wordAllow, nowMs: 70_000},
		stateWordInput{raw: pack(word{state: HalfOpen, gen: 9, inFlight: 3, success: 1, failure: 1}), cfgSel: 8, op: wordAllow, nowMs: 70_000},
	)
	return seeds
}

// TestStateWordSeedsReach: FuzzStateWord's seeds take every row of the
// transition table that the optional features (max wait, ramp-up, hints,
// manual controls) add, so that a fuzz run (and every `go test`) starts
// from words in all six states and each of those transitions.
func TestStateWordSeedsReach(t *testing.T) {
	reached := map[string]int{}
	for _, in := range stateWordSeeds() {
		reached[in.check(t)]++
	}
	t.Logf("rows reached: %v", reached)
	for _, want := range []string{
		"allow/ramp-end", "allow/ramp-admit", "allow/ramp-shed", "allow/open->half-open", "allow/half-open-restart",
		"allow/half-open-full", "allow/forced-open", "allow/disabled", "allow/metrics-only",
		"record/close-ramp", "record/probe-failure", "record/reopen", "record/metrics-only-trip", "record/count-metrics-only", "record/stale-forced-open", "record/stale-disabled",
		"hint/trip", "hint/metrics-only-trip", "hint/reopen", "hint/drop-open", "hint/drop-forced-open", "hint/drop-disabled",
		"hint/plain:record/count-closed", "done-hint/hint/trip", "done-hint/hint/reopen", "done-hint/record/count-metrics-only",
		"force-open/invalid", "metrics",
	} {
		if reached[want] == 0 {
			t.Errorf("no seed takes row %s", want)
		}
	}
	for _, st := range []State{Closed, Open, HalfOpen, ForcedOpen, Disabled, MetricsOnly} {
		for _, row := range []string{"force-open/0-from-", "force-open/d-from-", "disable/from-", "metrics-only/from-",
			"reset/from-", "state/", "counts/"} {
			if reached[row+st.String()] == 0 {
				t.Errorf("no seed takes row %s%v", row, st)
			}
		}
	}
}
