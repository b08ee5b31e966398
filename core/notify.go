package core

import (
	"runtime"
	"time"

	"go.uber.org/atomic"
)

// Transition is one committed state change, as delivered to
// Config.OnStateChange (R12).
type Transition struct {
	Name       string        // Config.Name of the breaker
	From, To   State         // the states before and after
	Generation uint32        // the generation the transition committed (mod 2^20)
	At         time.Duration // the breaker clock reading when it committed
}

// dispatcher delivers transitions in generation order without a lock and
// without ever running a listener inside the CAS that committed the
// transition (R12; sony/gobreaker #37 ran it under its mutex and deadlocked a
// listener that read Counts, and gascity #4839 then dispatched after unlocking
// and let notifications arrive out of order: regressions B13).
//
// Every transition advances the generation by exactly one, so the generation
// is also the event's sequence number. The committing goroutine writes its
// event into slot gen%256 and then tries to become the single deliverer by
// setting the busy bit of next. The deliverer hands events to the listener
// strictly in sequence, including events other goroutines publish while it
// runs, so a publisher never waits for a listener. A listener that causes a
// transition publishes it and returns; the deliverer picks it up next.
//
// Bounds: when 256 events await delivery, the next committing goroutine
// yields until the deliverer is within 256 of it. That cannot deadlock unless
// one listener call itself causes 256 transitions. While transitions keep
// committing, the deliverer keeps delivering them (in-order delivery without
// making publishers wait has to put the work somewhere); transitions are
// paced by the open duration, so this is a storm only with open durations of
// about a millisecond.
type dispatcher struct {
	// next is [next generation to deliver << 1 | busy]. It is the first
	// field so go.uber.org/atomic's 64-bit word is aligned on 32-bit
	// platforms; the padding keeps it off the slots' cache line.
	next  atomic.Uint64
	_     [56]byte
	slots [256]eventSlot
	fn    func(Transition)
	name  string
}

// eventSlot holds one event. seq is gen<<1|1 while the slot holds the event
// of generation gen and 0 when free; the plain fields are written before seq
// is stored and read after it is loaded, so the atomic publishes them.
type eventSlot struct {
	seq      atomic.Uint64
	at       int64
	gen      uint32
	from, to State
}

func newDispatcher(name string, fn func(Transition)) *dispatcher {
	d := &dispatcher{fn: fn, name: name}
	d.next.Store(uint64(nextGen(0)) << 1)
	return d
}

// publish records the transition that committed generation gen and delivers
// every event that is next in line. Call it after the committing CAS.
func (d *dispatcher) publish(from, to State, gen uint32, at time.Duration) {
	s := &d.slots[gen%uint32(len(d.slots))]
	// Wait until gen is within 256 of the next event to deliver, not merely
	// for a free slot: if the publisher of gen-256 was descheduled before
	// publishing, its slot is free, but taking it would strand both events.
	for (gen-uint32(d.next.Load()>>1))&genMask >= uint32(len(d.slots)) || s.seq.Load() != 0 {
		runtime.Gosched()
	}
	s.at, s.gen, s.from, s.to = int64(at), gen, from, to
	s.seq.Store(uint64(gen)<<1 | 1)
	d.deliver()
}

func (d *dispatcher) deliver() {
	for {
		n := d.next.Load()
		if n&1 != 0 {
			return // another goroutine is delivering and will see our event
		}
		gen := uint32(n >> 1)
		if d.slots[gen%uint32(len(d.slots))].seq.Load() != uint64(gen)<<1|1 {
			return // the next event in line is not published yet; its publisher delivers it
		}
		if d.next.CompareAndSwap(n, n|1) {
			d.drain(gen)
		}
	}
}

// drain runs as the only deliverer, from generation gen on, and clears the
// busy bit when the next event is not there. The caller's loop then looks
// once more, so an event published just before the bit cleared is not left
// behind (its publisher saw busy and returned).
func (d *dispatcher) drain(gen uint32) {
	returned := false
	defer func() {
		// A panicking listener must not leave the busy bit set forever. Only
		// then: after a normal return another goroutine may already be the
		// deliverer, and its busy bit is not ours to clear.
		if !returned {
			d.next.Store(uint64(gen) << 1)
		}
	}()
	for {
		s := &d.slots[gen%uint32(len(d.slots))]
		if s.seq.Load() != uint64(gen)<<1|1 {
			returned = true
			d.next.Store(uint64(gen) << 1)
			return
		}
		t := Transition{Name: d.name, From: s.from, To: s.to, Generation: s.gen, At: time.Duration(s.at)}
		s.seq.Store(0)
		gen = nextGen(gen)
		d.next.Store(uint64(gen)<<1 | 1)
		d.fn(t)
	}
}
