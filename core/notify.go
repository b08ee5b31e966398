package core

import (
	"time"

	"github.com/casbreaker/casbreaker/internal/cacheline"
	"go.uber.org/atomic"
)

// Transition is one committed state change, as delivered to
// Config.OnStateChange: exactly one per committed transition, in commit
// order.
//
// At is the breaker clock reading of the call that committed it, taken by
// that call just before its commit: Allow for open -> half-open and a
// max-wait restart, Done, Record or RecordHint for a trip, a re-open or a
// close (Counts, for a trip an outcome has decided but its recorder has not
// committed yet), the manual control itself. Transitions are committed lazily:
// State and Counts report an elapsed open duration as half-open
// without committing anything, so the open -> half-open notification goes
// out only with the next Allow, and its At is that Allow's reading, which
// may be long after the open deadline from which State reported half-open.
//
// Time is the wall-clock time of At, for log lines and for comparing
// transitions across breakers: Clock.Wall(At) when the breaker's Clock is
// a WallClock (the default SystemClock is), the zero time.Time otherwise
// (ManualClock). It is computed when the notification is delivered, from
// At, so it costs nothing without a listener.
type Transition struct {
	Name       string        // Config.Name of the breaker
	From, To   State         // the states before and after
	Reason     Reason        // why: the rule that tripped, the probes' verdict, the max wait, a manual control
	Generation uint64        // the generation the transition committed: 1 for the first transition after New, then +1 each; for ReasonReconfigured the current one, unchanged
	At         time.Duration // the committing call's clock reading (see above)
	Time       time.Time     // the wall-clock time of At, or zero (see above)
	// OpenUntil is, for a transition into Open, the clock reading from
	// which a call may probe: At plus the open duration of this period
	// (backoff, hint or ForceOpen's duration included), rounded up to the
	// whole millisecond, as the breaker keeps it. Zero for every other
	// transition.
	OpenUntil time.Duration
	// Changed names, for ReasonReconfigured, the Config fields whose
	// values Reconfigure changed, comma-separated in Config's order
	// ("FailureRateThreshold,WindowSize"; Settings.Reconfigured says how
	// they are compared); "" for every other transition.
	Changed string
}

// dispatcher delivers transitions in generation order without a lock and
// without ever running a listener inside the CAS that committed the
// transition (R12; sony/gobreaker #37 ran it under its mutex and deadlocked a
// listener that read Counts, and gascity #4839 then dispatched after unlocking
// and let notifications arrive out of order: regressions B13).
//
// Every transition advances the generation by exactly one, and every
// reconfiguration (which keeps it) moves the breaker to a successor that
// counts one more of them, so an event's place in line, seq, is its
// generation plus the reconfigurations before it (taken mod 2^63, the room
// next has beside its busy bit; nothing compares two events 2^62 apart).
// The committing goroutine writes its
// event into slot seq%ringSize and then tries to become the single deliverer by
// setting the busy bit of next. The deliverer hands events to the listener
// strictly in sequence, including events other goroutines publish while it
// runs, so a publisher never waits for a listener. A listener that causes a
// transition publishes it and returns; the deliverer picks it up next.
//
// A slot is only taken by an event within ringSize of the next one to
// deliver: a later event must not take the slot of an earlier one whose
// publisher was descheduled before publishing, or neither could be
// delivered. An event further ahead (ringSize events are waiting on a slow
// listener) goes on the overflow stack instead, one small allocation, and
// the deliverer takes it from there in turn. Nobody ever waits: not even a
// listener that itself commits a transition while the ring is full.
//
// While transitions keep committing, the deliverer keeps delivering them (in
// order, without making publishers wait, the work has to go somewhere);
// transitions are paced by the open duration, so this is a storm only with
// open durations of about a millisecond.
type dispatcher struct {
	// next is [next event in line (seq) to deliver, mod 2^63, << 1 | busy]. It is the first
	// field so go.uber.org/atomic's 64-bit word is aligned on 32-bit
	// platforms; the padding keeps it off the slots' cache line.
	next     atomic.Uint64
	_        [cacheline.Size - 8]byte
	slots    [ringSize]eventSlot
	overflow atomic.Pointer[overflowEvent]
	fn       func(Transition)
	name     string
	clock    Clock // for Transition.Time

	// parked holds overflow events taken off the stack that are not next
	// yet, by generation, so that catching up costs the same per event
	// however far behind the deliverer is (a list scanned per event made
	// a deliverer thousands of events behind fall further behind). Only the
	// deliverer (the holder of the busy bit) touches it. Nil when empty, so
	// that a breaker does not keep a storm's map for the rest of its life.
	parked map[uint64]Transition // by place in line, mod 2^63
}

// eventSlot holds one event. seq is n<<1|1 while the slot holds event n in
// line (of generation gen) and 0 when free; the plain fields are written before seq
// is stored and read after it is loaded, so the atomic publishes them.
//
// A slot is 40 bytes on every platform: on 386, where 8-byte fields align
// to 4, 35 bytes of fields would round up to 36 and leave every other
// slot's seq misaligned for a 64-bit atomic (TestEventSlotIsAligned).
type eventSlot struct {
	seq      atomic.Uint64
	at       int64
	gen      uint64
	until    int64
	from, to State
	why      Reason
	_        [5]byte
}

// seqMask keeps the generation bits that next and seq have room for.
const seqMask = 1<<63 - 1

// ringSize is the number of events the dispatcher's ring holds: how many
// transitions may wait on a listener before the next one allocates. Outside
// a storm of millisecond open durations a listener rarely has even one
// waiting (transitions are paced by the open duration), and a small ring
// keeps a listener's cost per breaker within one small object: 448 bytes
// with 8 slots, where 256 slots took 10.9 KB in every breaker with a
// listener (TestListenerCostsUnderOneKiB).
const ringSize = 8

type overflowEvent struct {
	t    Transition
	seq  uint64 // its place in line (publish)
	next *overflowEvent
}

func newDispatcher(name string, clock Clock, fn func(Transition)) *dispatcher {
	d := &dispatcher{fn: fn, name: name, clock: clock}
	d.next.Store(1 << 1) // the first transition commits generation 1
	return d
}

// publish records the transition that committed generation gen and delivers
// every event that is next in line. Call it after the committing CAS. r is
// the number of reconfigurations before the breaker that committed it
// (Breaker.reconfigs): each has an event of its own in the sequence, so the
// event's place in line is gen + r (mod 2^63).
func (d *dispatcher) publish(r uint64, from, to State, gen uint64, at time.Duration, why Reason, until time.Duration) {
	seq := (gen + r) & seqMask
	s := &d.slots[seq%uint64(len(d.slots))]
	if (seq-d.next.Load()>>1)&seqMask < uint64(len(d.slots)) {
		// Within the window the slot's previous event (seq-ringSize) was
		// delivered, and the deliverer cleared seq before advancing next.
		s.at, s.gen, s.from, s.to, s.why, s.until = int64(at), gen, from, to, why, int64(until)
		s.seq.Store(seq<<1 | 1)
	} else {
		d.park(seq, Transition{Name: d.name, From: from, To: to, Reason: why, Generation: gen, At: at, OpenUntil: until})
	}
	d.deliver(false)
}

// publishReconfigured records the notification of a reconfiguration in
// generation t.Generation, the r-th of the breaker, without delivering it:
// the caller publishes the transition the reconfiguration's verdict
// committed, if any, or calls deliver, so that a listener panicking on
// this one cannot keep the next from being published. It is rare, so it
// takes the overflow stack, which carries a whole Transition, rather than
// widening every slot by Changed.
func (d *dispatcher) publishReconfigured(r uint64, t Transition) {
	t.Name = d.name
	d.park((t.Generation+r)&seqMask, t)
}

// park pushes the event t, number seq in line, on the overflow stack.
func (d *dispatcher) park(seq uint64, t Transition) {
	e := &overflowEvent{t: t, seq: seq}
	for {
		e.next = d.overflow.Load()
		if d.overflow.CompareAndSwap(e.next, e) {
			return
		}
	}
}

// deliver becomes the deliverer, if nobody is, and delivers every event that
// is next in line. quiet is for a goroutine already unwinding from a
// listener's panic: a listener that panics again is recovered (drain).
func (d *dispatcher) deliver(quiet bool) {
	for {
		n := d.next.Load()
		if n&1 != 0 {
			return // another goroutine is delivering and will see our event
		}
		seq := n >> 1
		if d.slots[seq%uint64(len(d.slots))].seq.Load() != seq<<1|1 && d.overflow.Load() == nil {
			return // the next event in line is not published yet; its publisher delivers it
		}
		if d.next.CompareAndSwap(n, n|1) {
			d.drain(seq, quiet)
		}
	}
}

// drain runs as the only deliverer, from event seq (mod 2^63) on, and clears the
// busy bit when the next event is not there. The caller's loop then looks
// once more, so an event published just before the bit cleared is not left
// behind (its publisher saw busy and returned).
//
// When a listener panics, this goroutine is still the deliverer, and the
// events published while the listener ran were left to it: their
// publishers saw the busy bit and returned, and some may be parked, where
// no other goroutine looks. So drain's clean-up goes on delivering, quietly,
// before the panic goes on to the caller, instead of leaving them to some
// later transition that may never come. Quietly: a listener that panics
// again there is recovered, its panic dropped (the first is already on its
// way), so that the rest are still delivered, and so that a listener that
// panics on each of a million queued events does not nest a million panics
// on one stack.
func (d *dispatcher) drain(seq uint64, quiet bool) {
	returned := false
	defer func() {
		// Only after a panic (or runtime.Goexit): after a normal return
		// another goroutine may already be the deliverer.
		if !returned {
			d.drain(seq, true)
			d.deliver(true)
		}
	}()
	for {
		t, ok := d.take(seq)
		if !ok {
			returned = true
			d.next.Store(seq << 1)
			return
		}
		seq = (seq + 1) & seqMask
		d.next.Store(seq<<1 | 1)
		if quiet {
			callRecovered(d.fn, t)
		} else {
			d.fn(t)
		}
	}
}

// callRecovered calls fn(t) and drops any panic it raises.
func callRecovered(fn func(Transition), t Transition) {
	defer func() { _ = recover() }()
	fn(t)
}

// take removes event seq (mod 2^63) from its slot or
// from the overflow events, if it has been published.
func (d *dispatcher) take(seq uint64) (Transition, bool) {
	s := &d.slots[seq%uint64(len(d.slots))]
	if s.seq.Load() == seq<<1|1 {
		t := Transition{Name: d.name, From: s.from, To: s.to, Reason: s.why, Generation: s.gen, At: time.Duration(s.at), OpenUntil: time.Duration(s.until)}
		s.seq.Store(0)
		t.Time = wallOf(d.clock, t.At)
		return t, true
	}
	for e := d.overflow.Swap(nil); e != nil; e = e.next {
		if d.parked == nil {
			d.parked = make(map[uint64]Transition)
		}
		d.parked[e.seq] = e.t
	}
	t, ok := d.parked[seq]
	if ok {
		delete(d.parked, seq)
		if len(d.parked) == 0 {
			d.parked = nil
		}
		t.Time = wallOf(d.clock, t.At)
	}
	return t, ok
}

// clockIfListening reads the clock only when someone will see the reading.
func (b *Breaker) clockIfListening() time.Duration {
	if b.dispatch == nil {
		return 0
	}
	return b.now()
}

func (b *Breaker) notify(from, to State, gen uint64, at time.Duration, why Reason) {
	b.committed(from, to, gen)
	if b.dispatch != nil {
		b.dispatch.publish(b.reconfigs, from, to, gen, at, why, 0)
	}
}

// notifyOpen is notify for a transition into Open committed at reading at
// for the open duration d: the notification's OpenUntil is the deadline
// the commit set, computed the same way (deadlineMillis).
func (b *Breaker) notifyOpen(from State, gen uint64, at time.Duration, why Reason, d time.Duration) {
	b.committed(from, Open, gen)
	if b.dispatch != nil {
		until := time.Duration(deadlineMillis(at, d)) * time.Millisecond
		b.dispatch.publish(b.reconfigs, from, Open, gen, at, why, until)
	}
}

// tripReasonIfListening is tripReason when someone will see it, and 0
// otherwise, so that a breaker without a listener pays nothing for it.
func (b *Breaker) tripReasonIfListening(gen uint64, h time.Duration) Reason {
	if b.dispatch == nil {
		return 0
	}
	return b.tripReason(gen, h)
}
