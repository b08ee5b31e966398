package race_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/anishathalye/porcupine"

	"github.com/casbreaker/casbreaker/baseline"
	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
	"github.com/casbreaker/casbreaker/internal/difftest"
)

// The sequential specification for the linearizability checks is the mutex
// baseline itself, driven by one goroutine: the reference model of R1-R15
// that every differential test already holds the lock-free core to.
//
// A model state is the list of operations that changed the breaker so far
// (Allow calls that took a probe slot, Done calls, clock steps); Step
// replays that list on a fresh baseline built from the same config and
// clock start, applies the new operation and compares its output. Reads
// (State, Counts), refused Allow calls and closed-state grants change
// nothing in the baseline, so they are left out of the list: histories that
// differ only in where their reads fall reach equal states, and porcupine's
// cache prunes them. Two states are equal when the breakers their lists
// replay to are (fingerprint): every field of the baseline that can change
// an output of Allow, Done, State or Counts, and the clock. Orders of the
// same operations that end in the same breaker are then one state, not
// one per order, which is what keeps porcupine's exhaustive search of a
// history it finds no order for (an illegal one) from growing with the
// factorial of its concurrency. Sound: equal fingerprints replay to
// breakers that answer every later operation alike.

// linKind is the operation of one history entry: one of difftest's.
type linKind = difftest.Kind

const (
	linAllow     = difftest.Allow
	linDone      = difftest.Done
	linState     = difftest.State
	linCounts    = difftest.Counts
	linAdvance   = difftest.Advance
	linForceOpen = difftest.ForceOpen
	linHalfOpen  = difftest.HalfOpen
	linReconfig  = difftest.Reconfigure
)

// linErrs are the errors a Done may report: success, a failure, a
// cancellation and an error the classifier ignores (R9).
// The last, a failure with a retry-after hint, only the deterministic
// histories of TestTransitionReadsTheClockAfterItsClaim use.
var linErrs = []error{nil, errFail, context.Canceled, errIgnored, core.WithRetryAfter(errFail, linHint)}

// linHint is the retry-after hint of linErrs[4].
const linHint = 3 * time.Second

// linIn is an operation's input. It is comparable, as porcupine's default
// equality and this file's need.
type linIn struct {
	kind linKind
	p    core.Permit   // linDone: the permit, as Allow returned it
	err  int           // linDone: index into linErrs
	d    time.Duration // linAdvance: the clock step; linForceOpen: the open duration
	c    *core.Config  // linReconfig: the new config, one of its family's (a pointer: comparable)
}

// Rejection kinds of an Allow output.
const (
	rejNone = iota
	rejOpen
	rejHalfOpenFull
	rejOther
)

// linOut is an operation's output: what a caller could observe.
type linOut struct {
	p   core.Permit // linAllow
	rej int         // linAllow
	st  core.State  // linState
	c   core.Counts // linCounts
}

func rejKind(err difftest.Err) int {
	switch {
	case err.Nil():
		return rejNone
	case err.Matches(core.ErrOpen):
		return rejOpen
	case err.Matches(core.ErrHalfOpenFull):
		return rejHalfOpenFull
	}
	return rejOther
}

// countsView is what a history keeps of a Counts result.
type countsView func(core.Counts) core.Counts

// fullCounts keeps every field: the snapshot must be one the sequential
// model could return.
func fullCounts(c core.Counts) core.Counts { return c }

// wordCounts keeps the fields the lock-free core reads from its state word in
// one load (state, generation, consecutive failures, probes in flight and
// probe successes) and drops the window's (calls, failures, slow calls, slow
// failures), which it reads from the window afterwards: see
// TestCountsSnapshotDuringTrip for why that part is not linearizable.
func wordCounts(c core.Counts) core.Counts {
	c.Calls, c.Failures, c.SlowCalls, c.SlowFailures = 0, 0, 0, 0
	return c
}

// op is in as the shared interpreter's operation.
func (in linIn) op() difftest.Op {
	op := difftest.Op{Kind: in.kind, Permit: in.p, D: in.d, Config: in.c}
	if in.kind == linDone {
		op.Err = linErrs[in.err]
	}
	return op
}

// apply runs one operation on b (whose clock is clk) through the shared
// interpreter, difftest.Apply, and returns its output, with a Counts
// result passed through view. A history holds no failing ForceOpen or
// Reconfigure and no panicking call: apply panics on any, naming it.
func apply(b breakers.Breaker, clk *core.ManualClock, in linIn, view countsView) linOut {
	o := difftest.Apply(b, clk, in.op())
	if o.Panic != "" || ((in.kind == linForceOpen || in.kind == linReconfig) && !o.Err.Nil()) {
		panic(fmt.Sprintf("%v: %v%s", in, o.Err, o.Panic))
	}
	return linOut{p: o.Permit, rej: rejKind(o.Err), st: o.State, c: view(o.Counts)}
}

// mutates reports whether the operation can change the baseline's state.
func mutates(in linIn, out linOut) bool {
	switch in.kind {
	case linAllow:
		return out.rej == rejNone && out.p.Probe // open -> half-open, or a probe slot
	case linDone, linAdvance, linForceOpen, linHalfOpen, linReconfig:
		return true
	}
	return false
}

func (in linIn) String() string { return in.op().String() }

func describe(in linIn, out linOut) string {
	switch in.kind {
	case linAllow:
		if out.rej != rejNone {
			return fmt.Sprintf("Allow() -> reject%d wait=%v", out.rej, out.p.RetryAfter)
		}
		return fmt.Sprintf("Allow() -> g%d probe=%v start=%v", out.p.Generation, out.p.Probe, out.p.Start)
	case linState:
		return "State() -> " + out.st.String()
	case linCounts:
		return fmt.Sprintf("Counts() -> %+v", out.c)
	}
	return in.String()
}

// modelState is a model state: the mutating operations so far, and the
// fingerprint of the breaker they replay to, which is what Equal and Hash
// compare.
type modelState struct {
	ops []linIn
	key string
}

// unobserved are the fields of baseline.Breaker that no output of the
// operations in a history depends on: the locks, the wiring (the same for
// every state of a model: the clock, the listener, the probe gate), what
// the paths before the lock read of the rules (early: derived from cfg,
// which is in), the metrics (never read by a history) and the
// notification queue (no listener in a model). Every other field,
// including any added later, is in the fingerprint: a field missing from
// this list only makes the search longer, never the verdict wrong; a name
// on it that is no field is a mistake TestFingerprintNamesFields catches.
var unobserved = map[string]bool{"mu": true, "reconfig": true, "clock": true, "onChange": true, "probes": true,
	"early": true, "metrics": true, "queue": true, "delivering": true}

// fingerprint encodes the state of b (whose clock is clk) that later
// operations can observe: its fields but the unobserved ones, by
// reflection (they are unexported), and the clock reading. The settings
// are in (a Reconfigure changes them) but for their wiring, whose
// pointers differ between the model's replays, each on a clock of its own.
// It is the model's hot spot (every step replays to a fresh breaker and
// encodes it), so it writes bytes itself: formatted with fmt's %v, it
// took a third of a stress-lin run's time.
func fingerprint(b *baseline.Breaker, clk *core.ManualClock) string {
	buf := make([]byte, 0, 512)
	v := reflect.ValueOf(b).Elem()
	for i := range v.NumField() {
		switch name := v.Type().Field(i).Name; {
		case unobserved[name]:
		case name == "cfg":
			f := v.Field(i) // unexported: read through its address
			s := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(core.Settings)
			s.Clock, s.OnStateChange, s.OpenGate, s.ProbeGate = nil, nil, nil, nil
			buf = encodeValue(buf, reflect.ValueOf(s), 0)
		default:
			buf = encodeValue(buf, v.Field(i), 0)
		}
	}
	return string(binary.AppendVarint(buf, int64(clk.Now())))
}

// encodeValue appends to buf an encoding of v that two values share only
// if they are equal field by field: numbers by value, strings and slices
// by length and elements, pointers and interfaces by what they point to
// (never by address: a replay's breaker is a fresh allocation), functions
// by their code. A map, which the breaker does not hold, is left to fmt,
// which sorts its keys.
func encodeValue(buf []byte, v reflect.Value, depth int) []byte {
	if depth > 16 {
		panic(fmt.Sprintf("fingerprint: %v nests more than 16 deep (a cycle?)", v.Type()))
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(buf, 1)
		}
		return append(buf, 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(buf, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return binary.AppendUvarint(buf, v.Uint())
	case reflect.Float32, reflect.Float64:
		return binary.AppendUvarint(buf, math.Float64bits(v.Float()))
	case reflect.String:
		return append(binary.AppendUvarint(buf, uint64(v.Len())), v.String()...)
	case reflect.Struct:
		for i := range v.NumField() {
			buf = encodeValue(buf, v.Field(i), depth+1)
		}
		return buf
	case reflect.Array:
		for i := range v.Len() {
			buf = encodeValue(buf, v.Index(i), depth+1)
		}
		return buf
	case reflect.Slice:
		if v.IsNil() {
			return append(buf, 0)
		}
		buf = binary.AppendUvarint(append(buf, 1), uint64(v.Len()))
		for i := range v.Len() {
			buf = encodeValue(buf, v.Index(i), depth+1)
		}
		return buf
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(buf, 0)
		}
		if v.Kind() == reflect.Interface {
			buf = append(buf, v.Elem().Type().String()...)
		}
		return encodeValue(append(buf, 1), v.Elem(), depth+1)
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return binary.AppendUvarint(buf, uint64(v.Pointer()))
	}
	return fmt.Appendf(buf, "%v;", v)
}

// linModel builds the porcupine model for breakers made from cfg (its Clock
// and OnStateChange are replaced) with a manual clock starting at start.
// replays counts the Step calls, so a test can say how much was checked.
func linModel(cfg core.Config, start time.Duration, view countsView, steps *atomic.Int64) porcupine.Model {
	cfg.OnStateChange = nil
	// fresh is the model's breaker before any operation, on its own clock.
	fresh := func() (*baseline.Breaker, *core.ManualClock) {
		clk := core.NewManualClock(start)
		c := cfg
		c.Clock = clk
		b, err := baseline.New(c)
		if err != nil {
			panic(err)
		}
		return b, clk
	}
	return porcupine.Model{
		Init: func() any {
			b, clk := fresh()
			return modelState{key: fingerprint(b, clk)}
		},
		Step: func(state, input, output any) (bool, any) {
			steps.Add(1)
			s, in, out := state.(modelState), input.(linIn), output.(linOut)
			b, clk := fresh()
			for _, op := range s.ops {
				apply(b, clk, op, view)
			}
			if apply(b, clk, in, view) != out {
				return false, nil
			}
			if !mutates(in, out) {
				return true, s
			}
			return true, modelState{ops: append(slices.Clip(s.ops), in), key: fingerprint(b, clk)}
		},
		Equal: func(a, b any) bool { return a.(modelState).key == b.(modelState).key },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(modelState).key))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string { return describe(input.(linIn), output.(linOut)) },
		DescribeState: func(state any) string {
			var ops []string
			for _, in := range state.(modelState).ops {
				ops = append(ops, in.String())
			}
			return "[" + strings.Join(ops, "; ") + "]"
		},
	}
}

// historian records a concurrent history: every operation's call and return
// are stamped from one atomic counter, so the stamps order them as they
// really happened. Each client appends to its own list, so recording adds
// no lock between clients.
type historian struct {
	stamp   atomic.Int64
	clients [][]porcupine.Operation
	b       breakers.Breaker
	clk     *core.ManualClock
	view    countsView
}

func newHistorian(b breakers.Breaker, clk *core.ManualClock, view countsView, clients int) *historian {
	return &historian{b: b, clk: clk, view: view, clients: make([][]porcupine.Operation, clients)}
}

// do runs in on the breaker as client c and records it.
func (h *historian) do(c int, in linIn) linOut {
	call := h.stamp.Add(1)
	out := apply(h.b, h.clk, in, h.view)
	ret := h.stamp.Add(1)
	h.clients[c] = append(h.clients[c], porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
	return out
}

func (h *historian) history() []porcupine.Operation {
	var all []porcupine.Operation
	for _, ops := range h.clients {
		all = append(all, ops...)
	}
	return all
}

// describeHistory renders a history in call order, for a failure message.
func describeHistory(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var sb strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&sb, "  client %d [%3d,%3d] %s\n", op.ClientId, op.Call, op.Return, describe(op.Input.(linIn), op.Output.(linOut)))
	}
	return sb.String()
}

// The fingerprint leaves out only fields baseline.Breaker has, and two
// breakers built alike, each on a clock of its own, are one state (so
// the model's cache can prune orders that reach the same breaker).
func TestFingerprintNamesFields(t *testing.T) {
	typ := reflect.TypeFor[baseline.Breaker]()
	for name := range unobserved {
		if _, ok := typ.FieldByName(name); !ok {
			t.Errorf("unobserved names %q, which baseline.Breaker has no field of", name)
		}
	}
	mk := func() string {
		clk := core.NewManualClock(0)
		b, err := baseline.New(core.Config{ConsecutiveFailures: 1, OpenDuration: time.Second, Clock: clk, Classifier: classify})
		if err != nil {
			t.Fatal(err)
		}
		return fingerprint(b, clk)
	}
	if a, b := mk(), mk(); a != b {
		t.Errorf("two fresh breakers fingerprint differently:\n%s\n%s", a, b)
	}
}
