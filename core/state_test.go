package core

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/internal/cacheline"
)

// Every field of the state word survives pack/unpack at its limits, and no
// field's extreme leaks into a neighbour.
func TestStateWordRoundTrip(t *testing.T) {
	for _, st := range []State{Closed, Open, HalfOpen, ForcedOpen, Disabled, MetricsOnly, 7} {
		for _, step := range []uint8{0, 1, maxStep} {
			for _, gen := range []uint32{0, 1, genMask - 1, genMask} {
				var payloads []word
				switch st {
				case HalfOpen:
					for _, i := range []uint8{0, 1, maxProbes} {
						for _, s := range []uint8{0, 1, maxProbes} {
							for _, e := range []uint32{0, 1, expiryMask} {
								payloads = append(payloads, word{inFlight: i, success: s, expiry: e})
							}
						}
					}
				case Open:
					for _, p := range []uint64{0, 1, payMask - 1, payMask} {
						payloads = append(payloads, word{deadline: p})
					}
				case Closed, MetricsOnly:
					for _, c := range []uint32{0, 1, maxConsec} {
						payloads = append(payloads, word{consec: c})
						if st == Closed {
							for _, r := range []uint32{0, 1, rampMask} {
								payloads = append(payloads, word{consec: c, ramping: true, rampEnd: r})
							}
						}
					}
				default:
					payloads = append(payloads, word{})
				}
				for _, p := range payloads {
					u := p
					u.state, u.step, u.gen = st, step, gen
					require.Equal(t, u, unpack(pack(u)), "%+v", u)
				}
			}
		}
	}
}

// The generation increment carries out of the word, never into the payload.
func TestGenerationWraps(t *testing.T) {
	w := pack(word{state: Open, step: maxStep, gen: genMask, deadline: payMask})
	u := unpack(w + genOne)
	require.Equal(t, word{state: Open, step: maxStep, gen: 0, deadline: payMask}, u)
	require.Equal(t, uint32(0), lowGen(genMask+1))
}

// fullGen names the word's generation from any base that trails it by less
// than 2^20, across the word's 2^20 wrap and the 64-bit wrap alike; a base
// ahead of it (a reader that loaded base after the word moved on) gives a
// generation 2^20 newer, which ofWord therefore rejects.
func TestFullGen(t *testing.T) {
	for _, g := range []uint64{0, 1, genMask, genMask + 1, 5<<genBits + 77, 1<<63 - 1, ^uint64(0) - genMask, ^uint64(0)} {
		w := word{state: Closed, gen: lowGen(g)}.packed()
		for _, lag := range []uint64{0, 1, baseStep, genMask - 1, genMask} {
			require.Equal(t, g, fullGen(g-lag, w), "generation %d, lag %d", g, lag)
		}
		require.Equal(t, g+genSpan, fullGen(g+1, w), "base one ahead of generation %d", g)
	}
}

func TestDeadline(t *testing.T) {
	ms := time.Millisecond
	// Rounded up to the millisecond, never shortened.
	require.Equal(t, uint64(10_001), deadline(time.Second+500*time.Microsecond, 9*time.Second))
	require.Equal(t, uint64(10_000), deadline(time.Second, 9*time.Second))
	dl := deadline(time.Second, 9*time.Second)
	require.Equal(t, time.Duration(1), untilDeadline(dl, 10*time.Second-1))
	require.Zero(t, untilDeadline(dl, 10*time.Second))
	require.Zero(t, untilDeadline(dl, 11*time.Second))
	require.Equal(t, 9*time.Second, untilDeadline(dl, time.Second))
	// A clock that went backwards only lengthens the wait (R14).
	require.Equal(t, 10*time.Second, untilDeadline(dl, 0))
	require.Equal(t, 10*time.Second, untilDeadline(dl, -5*time.Second))
	// Exact across the 2^36 ms wrap of the payload.
	wrap := time.Duration(deadlineMod) * ms
	dl = deadline(wrap-ms, 2*ms)
	require.Equal(t, uint64(1), dl)
	require.Equal(t, 2*ms, untilDeadline(dl, wrap-ms))
	require.Equal(t, ms, untilDeadline(dl, wrap))
	require.Zero(t, untilDeadline(dl, wrap+ms))
	// Exact while consulted within 2^35 ms of the deadline.
	require.Zero(t, untilDeadline(deadline(0, ms), time.Duration(1<<35-1)*ms))
}

func TestStateString(t *testing.T) {
	require.Equal(t, "closed", Closed.String())
	require.Equal(t, "open", Open.String())
	require.Equal(t, "half-open", HalfOpen.String())
	require.Equal(t, "forced-open", ForcedOpen.String())
	require.Equal(t, "disabled", Disabled.String())
	require.Equal(t, "metrics-only", MetricsOnly.String())
	require.Equal(t, "state(6)", State(6).String())
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = HalfOpen.String() }))
}

// The exported limits are written as numbers for the docs; they must match
// the widths of the state word.
func TestLimitsMatchWord(t *testing.T) {
	require.Equal(t, maxProbes, MaxPermittedInHalf)
	require.Equal(t, maxStep, MaxBackoffSteps)
	require.Equal(t, uint64(maxConsec), uint64(MaxConsecutiveFailures))
}

// The state word has its cache line to itself: it is the first word of the
// Breaker and padded to 64 bytes, and every Breaker New returns starts at
// most 8 bytes into a line. Those 8 bytes are the allocation header the Go
// runtime (1.22 and later) puts before an object of more than 512 bytes
// that holds pointers, in a slot whose size class is a whole number of
// lines; the header is written once, at allocation. So the line holds the
// header, the state word, base beside it and the padding, and nothing
// another goroutine writes but the breaker's own transitions. A Breaker in
// a size class that is not a whole number of lines fails here.
func TestStateWordOwnsItsLine(t *testing.T) {
	const line = cacheline.Size
	if unsafe.Offsetof(Breaker{}.state) != 0 {
		t.Fatal("state is not the Breaker's first field")
	}
	var keep []*Breaker
	for i := range 64 {
		b, err := New(Config{WindowSize: 1 + i, FailureRateThreshold: 50})
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, b)
		if off := uintptr(unsafe.Pointer(&b.state)) % line; off > 8 {
			t.Fatalf("Breaker %d (%d bytes): the state word is %d bytes into its line, sharing it with another object",
				i, unsafe.Sizeof(Breaker{}), off)
		}
	}
	runtime.KeepAlive(keep) // every object stays allocated, so none is placed where another was
}

// Every dispatcher slot's seq, and the state word's neighbour base, are
// 64-bit aligned on every platform (386 included, where a misaligned 64-bit
// atomic panics): the slots are a multiple of 8 bytes and seq comes first.
func TestEventSlotIsAligned(t *testing.T) {
	require.Equal(t, uintptr(40), unsafe.Sizeof(eventSlot{}))
	require.Zero(t, unsafe.Offsetof(eventSlot{}.seq))
	require.Equal(t, uintptr(8), unsafe.Offsetof(Breaker{}.base))
	require.Equal(t, uintptr(cacheline.Size), unsafe.Offsetof(Breaker{}.cfg), "state and base alone on their cache line")
	require.Equal(t, uintptr(cacheline.Size), unsafe.Offsetof(dispatcher{}.slots), "the deliverer's word alone on its line")
}

// unpack and pack translate raw uint64 words, for the tests that build them.
func unpack(w uint64) word { return stateWord(w).fields() }
func pack(u word) uint64   { return uint64(u.packed()) }
