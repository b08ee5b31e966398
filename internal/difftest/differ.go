package difftest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/internal/breakers"
)

// Seen is one notification a side's listener received and, when the
// Differ reads back, what State, Counts and Metrics said inside the
// listener (a listener may call back into its breaker).
type Seen struct {
	core.Transition
	State   core.State
	Counts  core.Counts
	Metrics core.Metrics
}

// Side is one implementation under test: its breaker, its own manual
// clock, and the notifications its listener received. Its methods are
// safe to call while the breaker notifies; on a zero Side they report no
// notifications.
type Side struct {
	Name  string
	B     breakers.Breaker
	Clock *core.ManualClock
	// Gate is the side's own copy of a config's *Gate (nil without one).
	Gate *Gate
	// Probes is the side's own copy of a config's *ProbeGate (nil without
	// one).
	Probes *ProbeGate

	impl breakers.Impl
	mu   sync.Mutex
	seen []Seen
}

// Seen returns a copy of the notifications so far, in delivery order.
func (s *Side) Seen() []Seen { return s.Since(0) }

// Since returns a copy of the notifications from the i-th on (none when
// i is past the last).
func (s *Side) Since(i int) []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Seen(nil), s.seen[min(i, len(s.seen)):]...)
}

// Count is the number of notifications so far.
func (s *Side) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// Differ runs every Op on each implementation of internal/breakers, built
// from one config, each on its own manual clock, and checks after each
// step that they agree and that the observations keep the rules below.
// Make one with New or NewOf (Step on a zero Differ returns an error
// that says so); it is for one goroutine.
type Differ struct {
	Sides    []*Side
	cfg      core.Config
	settings core.Settings // cfg's, for Reconfigure's check
	readBack bool
	hist     []entry // the steps so far, rendered only for a failure
	// The Differ's own tally of what the calls observed, which Metrics
	// must equal (with CollectMetrics).
	admitted, outcomes uint64
	rejected           [4]uint64 // by reason, in Sentinels order
	transitions        [core.NumStates][core.NumStates]uint64
	capped             uint64          // notifications of a trip the open gate refused
	probesHeard        int             // the probe gate calls of every side already compared
	seen               int             // the notifications of Sides[0] already checked
	last               core.Transition // the last of them
}

// New builds one side per implementation from cfg (its Clock and
// OnStateChange are the Differ's), each clock reading start. With
// readBack every listener reads State, Counts and Metrics inside the
// notification, and those readings are compared too. The error is the
// first implementation's refusal of cfg, naming it.
func New(cfg core.Config, start time.Duration, readBack bool) (*Differ, error) {
	return NewOf(breakers.All, cfg, start, readBack)
}

// NewOf is New over the implementations impls instead of every one (a
// test of the Differ itself hands it a broken one).
// Fewer than two implementations compare nothing: the error says so.
func NewOf(impls []breakers.Impl, cfg core.Config, start time.Duration, readBack bool) (*Differ, error) {
	if len(impls) < 2 {
		return nil, fmt.Errorf("difftest.NewOf: %d implementations; a Differ compares two or more", len(impls))
	}
	// The chain of notifications starts from the state the breakers start
	// in, at generation 0.
	d := &Differ{cfg: cfg, readBack: readBack, last: core.Transition{To: cfg.InitialState}}
	d.settings, _ = cfg.Validate() // an invalid cfg is refused below
	for _, im := range impls {
		s, err := newSide(im, cfg, start, readBack, im.New)
		if err != nil {
			return nil, fmt.Errorf("difftest.New: %s refuses the config: %w", im.Name, err)
		}
		d.Sides = append(d.Sides, s)
	}
	return d, nil
}

// newSide is im's side, its breaker built by build from cfg with the
// side's clock, reading start, and listener.
func newSide(im breakers.Impl, cfg core.Config, start time.Duration, readBack bool, build func(core.Config) (breakers.Breaker, error)) (*Side, error) {
	s := &Side{Name: im.Name, Clock: core.NewManualClock(start), impl: im}
	c := cfg
	c.Clock = s.Clock
	if g, ok := cfg.OpenGate.(*Gate); ok {
		s.Gate = g.fork()
		c.OpenGate = s.Gate
	}
	if g, ok := cfg.ProbeGate.(*ProbeGate); ok {
		s.Probes = g.fork()
		c.ProbeGate = s.Probes
	}
	c.OnStateChange = func(tr core.Transition) {
		v := Seen{Transition: tr}
		if readBack {
			v.State, v.Counts, v.Metrics = s.B.State(), s.B.Counts(), s.B.Metrics()
		}
		s.mu.Lock()
		s.seen = append(s.seen, v)
		s.mu.Unlock()
	}
	b, err := build(c)
	if err != nil {
		return nil, err
	}
	s.B = b
	return s, nil
}

// Restart stands for a restart of the process the sides run in. It takes
// every side's snapshot at the wall-clock time at, with the count window's
// calls if withWindow, which must be equal in
// both encodings (MarshalBinary and MarshalJSON) and decode from each to
// itself; then it replaces every side with one its implementation restores
// (breakers.Impl.Restore) from the first side's snapshot, decoded from its
// binary form, at the wall-clock time at+elapsed (negative: a wall clock
// that went back), on a new manual clock reading start. The notification
// chain goes on from the snapshot's state at generation 0, and the
// Differ's tally starts over, as the new breakers' metrics do. The
// restored sides must agree at once (State, Counts, Metrics, RetryAfter).
// It returns the snapshot, or an error that says what broke.
func (d *Differ) Restart(at time.Time, withWindow bool, elapsed, start time.Duration) (core.Snapshot, error) {
	var snap core.Snapshot
	var bin, js []byte
	for i, s := range d.Sides {
		sn, err := s.B.Snapshot(at, withWindow)
		if err != nil {
			return sn, d.fail("%s: Snapshot(%v): %v", s.Name, at, err)
		}
		b, err := sn.MarshalBinary()
		if err != nil {
			return sn, d.fail("%s: MarshalBinary of %+v: %v", s.Name, sn, err)
		}
		j, err := sn.MarshalJSON()
		if err != nil {
			return sn, d.fail("%s: MarshalJSON of %+v: %v", s.Name, sn, err)
		}
		if i == 0 {
			snap, bin, js = sn, b, j
			continue
		}
		if string(b) != string(bin) || string(j) != string(js) {
			return sn, d.fail("snapshots differ: %s %s (%x), %s %s (%x)", d.Sides[0].Name, js, bin, s.Name, j, b)
		}
	}
	var fromBin, fromJSON core.Snapshot
	if err := fromBin.UnmarshalBinary(bin); err != nil || !fromBin.Equal(snap) {
		return snap, d.fail("binary snapshot %x decodes to %+v, %v; want %+v", bin, fromBin, err, snap)
	}
	if err := fromJSON.UnmarshalJSON(js); err != nil || !fromJSON.Equal(snap) {
		return snap, d.fail("JSON snapshot %s decodes to %+v, %v; want %+v", js, fromJSON, err, snap)
	}
	d.hist = append(d.hist, entry{restart: fmt.Sprintf("Restart(%s, %v later, clock %v)", js, elapsed, start)})
	for i, s := range d.Sides {
		n, err := newSide(s.impl, d.cfg, start, d.readBack, func(c core.Config) (breakers.Breaker, error) {
			return s.impl.Restore(c, fromBin, at.Add(elapsed))
		})
		if err != nil {
			return snap, d.fail("%s: Restore from %s: %v", s.Name, js, err)
		}
		d.Sides[i] = n
	}
	d.admitted, d.outcomes, d.rejected, d.transitions, d.capped = 0, 0, [4]uint64{}, [core.NumStates][core.NumStates]uint64{}, 0
	d.seen, d.last, d.probesHeard = 0, core.Transition{To: snap.State}, 0
	if err := d.agree(); err != nil {
		return snap, err
	}
	return snap, d.restored(snap, withWindow, at.Add(elapsed))
}

// restored checks the first side, just restored from snap at the
// wall-clock time at, against docs/semantics.md's Restarts: a snapshot of
// it taken at once holds the same state, step, run of failures and window
// calls; an open deadline with time left keeps it, rounded up to a whole
// millisecond, and one passed stays passed; a ramp-up with time left goes
// on ramping for it, to within one of its coarse units (rounded up, or
// less than one taken off to stay within the furthest a ramp is set).
func (d *Differ) restored(snap core.Snapshot, withWindow bool, at time.Time) error {
	s0 := d.Sides[0]
	again, err := s0.B.Snapshot(at, withWindow)
	if err != nil {
		return d.fail("%s: Snapshot(%v) right after Restore: %v", s0.Name, at, err)
	}
	same := again.State == snap.State && again.Step == snap.Step &&
		again.ConsecutiveFailures == snap.ConsecutiveFailures && len(again.Window) == len(snap.Window)
	for i, c := range again.Window {
		same = same && c == snap.Window[i]
	}
	if !same {
		return d.fail("%s: restored from %+v, it snapshots as %+v", s0.Name, snap, again)
	}
	if snap.State == core.Open {
		want, got := leftAt(snap.OpenUntil, snap.Taken, at), again.OpenUntil.Sub(at)
		if got < want || got >= want+time.Millisecond || (want == 0 && got != 0) {
			return d.fail("%s: restored open with %v left, it waits %v", s0.Name, want, got)
		}
	}
	want, got := leftAt(snap.RampUntil, snap.Taken, at), time.Duration(0)
	if !again.RampUntil.IsZero() {
		got = again.RampUntil.Sub(at)
	}
	unit := max(time.Millisecond, (d.cfg.RampUpDuration/1024+time.Millisecond-1)/time.Millisecond*time.Millisecond)
	if (want > 0) != (got > 0) || got > want+unit || got < want-unit {
		return d.fail("%s: restored with a ramp-up of %v left, it ramps for %v", s0.Name, want, got)
	}
	return nil
}

// leftAt is the time left at the wall-clock time now of a deadline until
// that a snapshot taken at taken carries (docs/semantics.md, Restarts):
// until - now, never more than until - taken, never below zero; zero for
// no deadline.
func leftAt(until, taken, now time.Time) time.Duration {
	if until.IsZero() {
		return 0
	}
	return max(min(until.Sub(now), until.Sub(taken)), 0)
}

// Config is the config the sides run with: the one New was given, or the
// last one a Reconfigure installed, with the sides' wiring kept.
func (d *Differ) Config() core.Config { return d.cfg }

// Now is the clock reading, the same on every side. It panics on a zero
// Differ.
func (d *Differ) Now() time.Duration { return d.Sides[0].Clock.Now() }

// entry is one step of the history: the operation and what the first
// side observed.
type entry struct {
	op      Op
	obs     Obs
	restart string // a Restart instead, as it reads
}

// Step runs op on every side and returns the first side's observation.
// The error, which prints the config and the history, says what broke:
//
//   - the sides observed op differently (permit, error by sentinel, wait
//     and text, value, panic, or what a read returned);
//   - Allow refused for none of the four reasons, or with a rejection
//     whose wait (core.RetryAfterOf) is not the permit's RetryAfter;
//   - after op, State, Counts, Metrics, RetryAfter or the notifications
//     (with what the listeners read inside them) differ between the sides;
//   - right after a refused Allow, RetryAfter is not the rejection's wait
//     (WaitForever for ErrForcedOpen);
//   - a notification does not follow the one before it (its From is the
//     last one's To, from Config.InitialState at first, and its
//     generation the next);
//   - without CollectMetrics Metrics is not zero; with it, Metrics do not
//     count what the calls observed: each grant and each rejection by
//     reason, one outcome per Record, RecordHint, Done and admitted Do,
//     each transition by from and to;
//   - with a *ProbeGate as Config.ProbeGate, the sides' gates did not
//     hear the same calls (each AdmitProbe with its answer, each ProbeDone
//     with its outcome) in the same order;
//   - with a *Gate as Config.OpenGate, a side's gate does not hold one
//     slot exactly while its breaker is open, half-open or forced open
//     (core.OpenGate), or was released with none held;
//   - a manual control did not land where it says: a ForceOpen that
//     failed did not match core.ErrInvalidArgument exactly when its
//     duration is outside 0..core.MaxOpenDurationLimit, or changed
//     something; one that succeeded, or Disable, MetricsOnly or Reset,
//     did not make one transition to its state at the next generation
//     with nothing counted.
func (d *Differ) Step(op Op) (Obs, error) {
	if len(d.Sides) == 0 {
		return Obs{}, fmt.Errorf("difftest: Step on a zero Differ; make one with difftest.New")
	}
	var before core.Counts
	var beforeM core.Metrics
	var beforeN int
	switch op.Kind {
	case ForceOpen, Disable, MetricsOnly, Reset, HalfOpen, Reconfigure: // control compares with before
		before, beforeM, beforeN = d.Sides[0].B.Counts(), d.Sides[0].B.Metrics(), d.Sides[0].Count()
	}
	obs := Apply(d.Sides[0].B, d.Sides[0].Clock, op)
	for _, s := range d.Sides[1:] {
		if o := Apply(s.B, s.Clock, op); o != obs {
			return obs, d.fail("%v: %s %s, %s %s", op, d.Sides[0].Name, summary(op, obs), s.Name, summary(op, o))
		}
	}
	d.hist = append(d.hist, entry{op: op, obs: obs})
	if op.Kind == Allow && !obs.Err.Nil() && (obs.Err.Reason() == nil || obs.Err.Wait != obs.Permit.RetryAfter) {
		return obs, d.fail("Allow refused with %v and %+v: want one of the four reasons, asking for the permit's RetryAfter", obs.Err, obs.Permit)
	}
	if err := d.waitOf(op, obs); err != nil {
		return obs, err
	}
	d.tally(op, obs)
	if err := d.agree(); err != nil {
		return obs, err
	}
	if err := d.chain(); err != nil {
		return obs, err
	}
	if err := d.control(op, obs, before, beforeM, beforeN); err != nil {
		return obs, err
	}
	if err := d.gates(); err != nil {
		return obs, err
	}
	return obs, d.metrics()
}

// waitOf checks RetryAfter right after a refused Allow, on the same clock
// reading: the rejection's wait, or WaitForever for ErrForcedOpen, which
// carries none.
func (d *Differ) waitOf(op Op, obs Obs) error {
	if op.Kind != Allow || obs.Err.Nil() || obs.Err.Matches(ErrProbeRefused) {
		return nil // a probe gate's wait is the gate's: the breaker does not know it
	}
	want := obs.Permit.RetryAfter
	if obs.Err.Matches(core.ErrForcedOpen) {
		want = core.WaitForever
	}
	if got := d.Sides[0].B.RetryAfter(); got != want {
		return d.fail("RetryAfter right after Allow refused with %v: %v, want %v", obs.Err, got, want)
	}
	return nil
}

// summary is what op observed: every field Apply sets for its kind.
func summary(op Op, o Obs) string {
	switch op.Kind {
	case Allow:
		if o.Err.Nil() {
			return fmt.Sprintf("%+v", o.Permit)
		}
		return fmt.Sprintf("%v (permit %+v)", o.Err, o.Permit)
	case Metrics:
		return fmt.Sprintf("%+v", o.Metrics)
	case Do:
		return fmt.Sprintf("%d, %v%s", o.Value, o.Err, panicked(o))
	case ForceOpen:
		return o.Err.String()
	case State:
		return o.State.String()
	case Counts:
		return fmt.Sprintf("%+v", o.Counts)
	}
	return "ok" + panicked(o)
}

func panicked(o Obs) string {
	if o.Panic != "" {
		return ", panic " + o.Panic
	}
	return ""
}

func (d *Differ) fail(format string, args ...any) error {
	var sb strings.Builder
	for _, e := range d.hist {
		if e.restart != "" {
			fmt.Fprintf(&sb, "\n  %s", e.restart)
			continue
		}
		fmt.Fprintf(&sb, "\n  %v = %s", e.op, summary(e.op, e.obs))
	}
	return fmt.Errorf("%s\nconfig %+v\nhistory:%s", fmt.Sprintf(format, args...), d.cfg, sb.String())
}

// tally counts what op observed, as Metrics must.
func (d *Differ) tally(op Op, o Obs) {
	switch op.Kind {
	case Allow:
		d.grant(o.Err)
	case Record, RecordHint, Done:
		d.outcomes++
	case Do:
		if !op.Cancelled {
			d.grant(o.Err)
			if !o.Err.Matches(core.ErrRejected) {
				d.outcomes++
			}
		}
	}
}

func (d *Differ) grant(e Err) {
	if !e.Matches(core.ErrRejected) {
		d.admitted++
		return
	}
	for i, r := range Sentinels[:4] {
		if e.Matches(r) {
			d.rejected[i]++
		}
	}
}

// agree compares what every side reads after a step: the notifications
// from the first one not yet checked on (earlier ones agreed and do not
// change).
func (d *Differ) agree() error {
	s0 := d.Sides[0]
	c0, st0, m0, n0 := s0.B.Counts(), s0.B.State(), s0.B.Metrics(), s0.Since(d.seen)
	w0 := s0.B.RetryAfter()
	for _, s := range d.Sides[1:] {
		c, st, m, n := s.B.Counts(), s.B.State(), s.B.Metrics(), s.Since(d.seen)
		switch w := s.B.RetryAfter(); {
		case c != c0:
			return d.fail("Counts: %s %+v, %s %+v", s0.Name, c0, s.Name, c)
		case st != st0:
			return d.fail("State: %s %v, %s %v", s0.Name, st0, s.Name, st)
		case m != m0:
			return d.fail("Metrics: %s %+v, %s %+v", s0.Name, m0, s.Name, m)
		case w != w0:
			return d.fail("RetryAfter: %s %v, %s %v", s0.Name, w0, s.Name, w)
		}
		for i := range max(len(n), len(n0)) {
			if i >= len(n) || i >= len(n0) || n[i] != n0[i] {
				return d.fail("notification %d (%d and %d in all): %s %+v, %s %+v", d.seen+i, d.seen+len(n0), d.seen+len(n), s0.Name, at(n0, i), s.Name, at(n, i))
			}
		}
	}
	return nil
}

// callAt is the i-th of calls, or "none".
func callAt(calls []probeCall, i int) any {
	if i < len(calls) {
		return calls[i]
	}
	return "none"
}

func at(s []Seen, i int) Seen {
	if i < len(s) {
		return s[i]
	}
	return Seen{}
}

// chain checks the notifications that came since the last step.
func (d *Differ) chain() error {
	for _, s := range d.Sides[0].Since(d.seen) {
		if !Follows(d.last, s.Transition) {
			return d.fail("notification %d %+v does not follow %+v", d.seen, s.Transition, d.last)
		}
		if s.Reason != core.ReasonReconfigured { // no transition in Metrics (R18)
			d.transitions[s.From][s.To]++
		}
		if s.Reason == core.ReasonCapped {
			d.capped++
		}
		d.last = s.Transition
		d.seen++
	}
	return nil
}

// control checks where a manual control landed.
func (d *Differ) control(op Op, o Obs, before core.Counts, beforeM core.Metrics, beforeN int) error {
	var want core.State
	switch op.Kind {
	case ForceOpen:
		invalid := op.D < 0 || op.D > core.MaxOpenDurationLimit
		if invalid != o.Err.Matches(core.ErrInvalidArgument) || invalid != !o.Err.Nil() {
			return d.fail("ForceOpen(%v) = %v; want core.ErrInvalidArgument: %v", op.D, o.Err, invalid)
		}
		if invalid {
			return d.unchanged(op, before, beforeM, beforeN)
		}
		want = core.Open
		if op.D == 0 {
			want = core.ForcedOpen
		}
	case Disable:
		want = core.Disabled
	case MetricsOnly:
		want = core.MetricsOnly
	case Reset:
		want = core.Closed
	case HalfOpen:
		want = core.HalfOpen
	case Reconfigure:
		return d.reconfigured(op, o, before, beforeM, beforeN)
	default:
		return nil
	}
	return d.landed(op, want, before)
}

// unchanged checks that a failed op changed neither the counts, nor the
// metrics, nor the notifications.
func (d *Differ) unchanged(op Op, before core.Counts, beforeM core.Metrics, beforeN int) error {
	s := d.Sides[0]
	if c, m, n := s.B.Counts(), s.B.Metrics(), s.Count(); c != before || m != beforeM || n != beforeN {
		return d.fail("%v failed but changed the breaker: %+v -> %+v, metrics %+v -> %+v, %d -> %d notifications",
			op, before, c, beforeM, m, beforeN, n)
	}
	return nil
}

// landed checks that a manual control made one transition to want at the
// next generation, with nothing counted.
func (d *Differ) landed(op Op, want core.State, before core.Counts) error {
	c := d.Sides[0].B.Counts()
	if c.Generation != before.Generation+1 || c.State != want ||
		c.Calls != 0 || c.ConsecutiveFailures != 0 || c.ProbesInFlight != 0 || c.ProbeSuccesses != 0 {
		return d.fail("%v to %v: counts %+v -> %+v", op, want, before, c)
	}
	if d.last.To != want || d.last.Generation != c.Generation {
		return d.fail("%v to %v: the last notification is %+v", op, want, d.last)
	}
	return nil
}

// gates checks each side's open gate against its breaker's state, and that
// the sides' probe gates heard the same calls.
func (d *Differ) gates() error {
	if p0 := d.Sides[0].Probes; p0 != nil {
		heard := p0.since(d.probesHeard)
		for _, s := range d.Sides[1:] {
			other := s.Probes.since(d.probesHeard)
			for i := range max(len(heard), len(other)) {
				if i >= len(heard) || i >= len(other) || heard[i] != other[i] {
					return d.fail("probe gate call %d: %s %v, %s %v", d.probesHeard+i, d.Sides[0].Name, callAt(heard, i), s.Name, callAt(other, i))
				}
			}
		}
		d.probesHeard += len(heard)
	}
	for _, s := range d.Sides {
		if s.Gate == nil {
			continue
		}
		if err := s.Gate.check(s.B.State()); err != nil {
			return d.fail("%s: %v", s.Name, err)
		}
	}
	return nil
}

// metrics checks Metrics against the Differ's own tally.
func (d *Differ) metrics() error {
	m := d.Sides[0].B.Metrics()
	if !d.cfg.CollectMetrics {
		if m != (core.Metrics{}) {
			return d.fail("Metrics without CollectMetrics: %+v", m)
		}
		return nil
	}
	want := core.Metrics{Admitted: d.admitted, RejectedOpen: d.rejected[0], RejectedHalfOpenFull: d.rejected[1],
		RejectedForcedOpen: d.rejected[2], RejectedRampUp: d.rejected[3], Capped: d.capped, Transitions: d.transitions}
	got := m
	got.Successes, got.Failures, got.Ignored, got.SlowCalls, got.Dropped = 0, 0, 0, 0, 0
	if got != want {
		return d.fail("Metrics disagree with what the calls observed:\ngot  %+v\nwant %+v", m, want)
	}
	if n := m.Successes + m.Failures + m.Ignored + m.Dropped; n != d.outcomes || m.SlowCalls > m.Successes+m.Failures {
		return d.fail("Metrics count %d outcomes (%+v); the calls handed over %d", n, m, d.outcomes)
	}
	return nil
}
