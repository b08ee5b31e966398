package observe

import (
	"cmp"
	"slices"
	"sync"
	"weak"

	"github.com/casbreaker/casbreaker/core"
)

// Transitions counts committed transitions by breaker name, from, to and
// reason: the breakdown by reason that core.Metrics does not keep. Set
// core.Config.OnStateChange (of a breaker, or of a registry's template,
// whose listener hears every breaker) to its Listener, and pass it to the
// exporters, whose Readers (NewReader) read it.
//
// One Transitions may serve several Readers, over the same breakers (a
// Prometheus and an OpenTelemetry exporter) or over others (an HTTP and
// a gRPC registry): it forgets a name only when every Reader it serves
// has finished a read that began after the name was last counted or
// read, and none of those reads found it. So the names kept are those of
// the breakers some Source yields (for a registry, bounded by its
// MaxBreakers) plus those that transitioned since each Reader last read;
// an evicted breaker that comes back starts again from zero, which a
// counter's consumer sees as a reset. A Reader that is kept but never
// reads keeps every name; one that is no longer referenced stops
// counting among the readers once the garbage collector has freed it.
//
// The zero value is ready to use and must not be copied after first use.
// Its methods are safe for concurrent use: Listener's function takes a
// mutex of its own (held for a map update), which is never held while a
// breaker's method runs.
type Transitions struct {
	mu      sync.Mutex
	byName  map[string]*named
	reads   uint64 // reads begun, by any reader
	readers []weak.Pointer[readerMark]
}

// readerMark is what a Transitions knows of one of its Readers.
type readerMark struct {
	// done is the number of the latest read, among those the reader has
	// finished, at its beginning: 0 before its first.
	done uint64
}

type named struct {
	counts map[transitionKey]uint64
	stamp  uint64 // reads begun when last counted or read
}

type transitionKey struct {
	from, to core.State
	reason   core.Reason
}

// Listener returns a core.Config.OnStateChange that counts each
// transition and then calls next, if next is not nil (to chain a logger,
// say slogbreaker.Listener). Like every listener it runs on the goroutine
// of a call to the breaker, outside the breaker's critical sections. A
// nil t panics here, with a message that says so, rather than in the
// breaker's first transition.
func (t *Transitions) Listener(next func(core.Transition)) func(core.Transition) {
	if t == nil {
		panic("observe: Listener of a nil *Transitions: declare a Transitions value (its zero value is ready) and take its address")
	}
	return func(tr core.Transition) {
		t.count(tr)
		if next != nil {
			next(tr)
		}
	}
}

func (t *Transitions) count(tr core.Transition) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byName == nil {
		t.byName = make(map[string]*named)
	}
	n := t.byName[tr.Name]
	if n == nil {
		n = &named{counts: make(map[transitionKey]uint64)}
		t.byName[tr.Name] = n
	}
	n.counts[transitionKey{tr.From, tr.To, tr.Reason}]++
	n.stamp = t.reads
}

// join adds a reader and returns its mark, which the reader keeps: once
// the reader is freed, the mark is too, and the reader no longer counts.
func (t *Transitions) join() *readerMark {
	m := &readerMark{}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readers = append(t.readers, weak.Make(m))
	return m
}

// begin starts a read and returns its number.
func (t *Transitions) begin() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads++
	return t.reads
}

// counts returns name's counts, ordered by from, to and reason, and marks
// name read.
func (t *Transitions) counts(name string) []TransitionCount {
	t.mu.Lock()
	n := t.byName[name]
	var out []TransitionCount
	if n != nil {
		n.stamp = t.reads
		out = make([]TransitionCount, 0, len(n.counts))
		for k, c := range n.counts {
			out = append(out, TransitionCount{From: k.from, To: k.to, Reason: k.reason, Count: c})
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b TransitionCount) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// end finishes read number read of the reader of mark, and forgets the
// names last counted or read before the oldest of the readers' latest
// finished reads began. A reader whose breakers include a name reads it
// in each of its reads, after the read began, so that none of those
// names is forgotten; a name no reader found in a read that began after
// it was last counted belongs to no reader's breakers.
func (t *Transitions) end(mark *readerMark, read uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	mark.done = max(mark.done, read)
	oldest := read
	live := t.readers[:0]
	for _, p := range t.readers {
		if m := p.Value(); m != nil {
			oldest = min(oldest, m.done)
			live = append(live, p)
		}
	}
	clear(t.readers[len(live):])
	t.readers = live
	for name, n := range t.byName {
		if n.stamp < oldest {
			delete(t.byName, name)
		}
	}
}
