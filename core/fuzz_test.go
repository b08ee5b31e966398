package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/window"
)

// stateWordConfigs are the configs FuzzStateWord draws from: no window,
// count window with slow calls and backoff, time window with a failure
// count, and the probe limits at their maximum.
var stateWordConfigs = []Config{
	{ConsecutiveFailures: 3, OpenDuration: time.Second, PermittedCallsInHalfOpen: 2},
	{WindowSize: 5, FailureRateThreshold: 50, MinimumNumberOfCalls: 3, SlowCallRateThreshold: 50,
		SlowCallDurationThreshold: 100 * time.Millisecond, OpenDuration: 500 * time.Millisecond,
		OpenDurationBackoff: 2, MaxOpenDuration: 8 * time.Second, PermittedCallsInHalfOpen: 3, SuccessesToClose: 2},
	{WindowType: TimeBased, WindowSize: 4, FailureCountThreshold: 2, OpenDuration: time.Second + 300*time.Microsecond,
		PermittedCallsInHalfOpen: 1, SuccessesToClose: 3},
	{WindowSize: 3, FailureRateThreshold: 100, ConsecutiveFailures: 2, OpenDuration: time.Millisecond,
		OpenDurationBackoff: 1.5, MaxOpenDuration: time.Minute, PermittedCallsInHalfOpen: 255, SuccessesToClose: 255},
}

// FuzzStateWord: the packed state word (docs/design.md) and every
// transition on it.
//
// Round trip: for any 64-bit value, unpack then pack gives the value back
// (in half-open, with the unused payload bits 24..43 cleared), and a word
// that went through pack once is a fixed point: no field's extreme leaks
// into a neighbour.
//
// Transitions: a breaker is given any reachable word (any generation,
// backoff step up to the config's last, any run of failures or open
// deadline, any probe counts within PermittedCallsInHalfOpen and
// SuccessesToClose), a window with some outcomes in it, a clock reading
// (negative and past the 2^36 ms deadline wrap included) and one operation:
// Allow, Record or Done of a permit of any generation, probe or not, with
// any outcome, State or Counts. The word after it must be exactly the one
// the transition table of docs/design.md gives, with exactly as many
// notifications as generations advanced (0 or 1, with the right from, to,
// generation and time), and the operation must return what the table says
// (permit, rejection and wait, state). Every word after it is reachable
// again: state 0..2, step at most the last, half-open with inFlight <= N,
// inFlight + successes <= S and its unused bits zero.
func FuzzStateWord(f *testing.F) {
	f.Add(uint64(0), uint8(0), uint8(0), uint32(0), false, uint8(1), int64(0), uint8(0), uint64(0))
	f.Add(^uint64(0), uint8(1), uint8(1), uint32(7), true, uint8(0), int64(1<<36), uint8(3), uint64(0x5555))
	f.Add(uint64(0x0000_1000_0000_0101), uint8(2), uint8(2), uint32(1), false, uint8(1), int64(5000), uint8(9), uint64(0xff))
	f.Add(uint64(0x0003_3000_0000_2a02), uint8(1), uint8(3), uint32(3), true, uint8(1), int64(-7), uint8(1), uint64(1))
	f.Add(uint64(0xfffff_000_0000_0002), uint8(3), uint8(1), uint32(0xfffff), true, uint8(0), int64(999), uint8(4), uint64(0xabc))
	f.Fuzz(func(t *testing.T, raw uint64, cfgSel, op uint8, pgen uint32, probe bool, outcome uint8, nowMs int64, extra uint8, seed uint64) {
		roundTrip(t, raw)

		cfg := stateWordConfigs[int(cfgSel)%len(stateWordConfigs)]
		now := time.Duration(nowMs%(1<<42))*time.Millisecond + time.Duration(extra)*7*time.Microsecond
		clock := NewManualClock(now)
		var got []Transition
		cfg.Clock = clock
		cfg.OnStateChange = func(tr Transition) { got = append(got, tr) }
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := reachable(raw, &b.s)
		u := unpack(before)
		// Some outcomes already in the window of the word's generation, all
		// in the current second for a time window.
		var seeded []seededOutcome
		for i := range int(seed % 6) {
			o := seededOutcome{fail: seed>>(8+i)&1 != 0, slow: seed>>(16+i)&1 != 0}
			switch {
			case b.ring != nil:
				b.ring.Reset(u.gen)
				b.ring.Record(u.gen, o.fail, o.slow)
			case b.buckets != nil:
				b.buckets.RecordCurrent(u.gen, now, o.fail, o.slow)
			}
			seeded = append(seeded, o)
		}
		b.state.Store(before)
		// Notifications are delivered in generation order from the one
		// after the word's: a breaker that got here by transitions would
		// have delivered all the earlier ones.
		b.dispatch.next.Store(uint64(nextGen(u.gen)) << 1)

		p := Permit{Generation: pgen & genMask, Probe: probe, Start: time.Duration(int64(seed>>24)%int64(time.Second)) - 300*time.Millisecond}
		if extra&1 == 0 {
			p.Generation = u.gen // a current permit, most of the time
		}
		o := Outcome(outcome % 3)
		want := expectTransition(b, u, p, o, op%5, now, seeded)

		var (
			gotP   Permit
			gotErr error
			gotSt  State
		)
		switch op % 5 {
		case 0:
			gotP, gotErr = b.Allow()
		case 1:
			b.Record(p, o)
		case 2: // nil, a failure and a cancellation classify to o by default
			b.Done(p, []error{nil, errors.New("failed"), context.Canceled}[o])
		case 3:
			gotSt = b.State()
		default:
			_ = b.Counts()
		}
		after := b.state.Load()
		if after != want.word {
			t.Fatalf("op %d on %+v (permit %+v, outcome %v, now %v): word %+v, want %+v", op%5, u, p, o, now, unpack(after), unpack(want.word))
		}
		if gotP != want.permit || !errors.Is(gotErr, want.err) || (gotErr == nil) != (want.err == nil) || gotSt != want.state {
			t.Fatalf("op %d on %+v (now %v): returned %+v %v %v, want %+v %v %v", op%5, u, now, gotP, gotErr, gotSt, want.permit, want.err, want.state)
		}
		a := unpack(after)
		if advanced := (a.gen - u.gen) & genMask; advanced > 1 || int(advanced) != len(got) {
			t.Fatalf("generation advanced by %d with %d notifications", advanced, len(got))
		}
		if len(got) == 1 && (got[0] != Transition{From: u.state, To: a.state, Generation: a.gen, At: want.at}) {
			t.Fatalf("notification %+v, want %v -> %v at generation %d, t=%v", got[0], u.state, a.state, a.gen, want.at)
		}
		if reachable(after, &b.s) != after {
			t.Fatalf("word after %+v is not a reachable word", a)
		}
	})
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
// hold: a real state, a step the backoff can reach, probe counts within the
// limits (and the word unchanged if it already is one).
func reachable(raw uint64, s *Settings) uint64 {
	u := unpack(raw)
	u.state = State(uint8(u.state) % 3)
	u = unpack(pack(u))
	if u.step > s.lastStep {
		u.step %= s.lastStep + 1
	}
	// No ramp-up and no max wait in these configs.
	u.ramping, u.rampEnd, u.expiry = false, 0, 0
	if u.state == HalfOpen {
		n, need := s.PermittedCallsInHalfOpen, s.SuccessesToClose
		inFlight := int(u.inFlight) % (n + 1)
		success := int(u.success) % need
		if inFlight+success > need {
			inFlight = need - success
		}
		u.inFlight, u.success = uint8(inFlight), uint8(success)
	}
	return pack(u)
}

type expected struct {
	word   uint64
	permit Permit
	err    error
	state  State
	at     time.Duration // time of the notification, if any
}

// expectTransition is the transition table of docs/design.md, written
// out: what op does to a breaker holding word u at clock now.
func expectTransition(b *Breaker, u word, p Permit, o Outcome, op uint8, now time.Duration, seeded []seededOutcome) expected {
	s := &b.s
	w := pack(u)
	e := expected{word: w}
	switch op {
	case 0: // Allow
		start := func(t time.Duration) time.Duration {
			if s.SlowEnabled() {
				return t
			}
			return 0
		}
		switch u.state {
		case Closed:
			e.permit = Permit{Generation: u.gen, Start: start(now)}
		case Open:
			nz := max(now, 0)
			if wait := untilDeadline(u.deadline, nz); wait > 0 {
				e.permit, e.err = Permit{Wait: wait}, ErrOpen
				break
			}
			g := nextGen(u.gen)
			e.word = pack(word{state: HalfOpen, step: u.step, gen: g, inFlight: 1})
			e.permit, e.at = Permit{Generation: g, Probe: true, Start: start(nz)}, nz
		case HalfOpen:
			if int(u.inFlight) >= s.PermittedCallsInHalfOpen || int(u.inFlight)+int(u.success) >= s.SuccessesToClose {
				e.err = ErrHalfOpenFull
				break
			}
			u.inFlight++
			e.word = pack(u)
			e.permit = Permit{Generation: u.gen, Probe: true, Start: start(now)}
		}
	case 1, 2: // Record, Done (the errors map to the same outcomes)
		if p.Probe {
			if u.state != HalfOpen || u.gen != p.Generation || u.inFlight == 0 {
				break
			}
			u.inFlight--
			switch {
			case o == Ignored:
				e.word = pack(u)
			case o == Success && int(u.success)+1 < s.SuccessesToClose:
				u.success++
				e.word = pack(u)
			case o == Success:
				e.word = pack(word{state: Closed, gen: nextGen(u.gen)})
				e.at = now
			default:
				step := s.NextStep(u.step)
				e.word = pack(word{state: Open, step: step, gen: nextGen(u.gen), deadline: deadline(now, s.OpenDuration(step))})
				e.at = now
			}
			break
		}
		if o == Ignored || u.state != Closed || u.gen != p.Generation {
			break
		}
		fail := o == Failure
		slow := s.IsSlow(now - p.Start)
		var c window.Counts
		if b.ring != nil || b.buckets != nil {
			all := append(append([]seededOutcome(nil), seeded...), seededOutcome{fail: fail, slow: slow})
			if b.ring != nil && len(all) > b.ring.Size() {
				all = all[len(all)-b.ring.Size():]
			}
			c = sumOutcomes(all)
		}
		consec := uint64(u.consec)
		switch {
		case s.ConsecutiveFailures == 0: // not tracked: the word keeps what it had
		case !fail:
			consec = 0
		case consec < maxConsec:
			consec++
		}
		if s.ShouldTrip(c, consec) {
			e.word = pack(word{state: Open, gen: nextGen(u.gen), deadline: deadline(now, s.OpenDuration(0))})
			e.at = now
		} else {
			u.consec = uint32(consec)
			e.word = pack(u)
		}
	case 3: // State
		e.state = u.state
		if u.state == Open && untilDeadline(u.deadline, now) == 0 {
			e.state = HalfOpen
		}
	}
	return e
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
			c.Slow++
		}
		if o.fail && o.slow {
			c.SlowFailures++
		}
	}
	return c
}
