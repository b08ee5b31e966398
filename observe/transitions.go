package observe

import (
	"cmp"
	"slices"
	"sync"

	"github.com/casbreaker/casbreaker/core"
)

// Transitions counts committed transitions by breaker name, from, to and
// reason: the breakdown by reason that core.Metrics does not keep. Set
// core.Config.OnStateChange (of a breaker, or of a registry's template,
// whose listener hears every breaker) to its Listener, and pass it to the
// exporter, which reads it with Read.
//
// Each Read forgets the names it did not find that were not counted since
// the read began, so the names kept are those of the breakers the Source
// yields (for a registry, bounded by its MaxBreakers) plus those that
// transitioned since the last read; an evicted breaker that comes back
// starts again from zero, which a counter's consumer sees as a reset.
//
// The zero value is ready to use and must not be copied after first use.
// Its methods are safe for concurrent use: Listener's function takes a
// mutex of its own (held for a map update), which is never held while a
// breaker's method runs.
type Transitions struct {
	mu     sync.Mutex
	byName map[string]*named
	reads  uint64 // reads begun
}

type named struct {
	counts map[transitionKey]uint64
	stamp  uint64 // reads begun when last counted
}

type transitionKey struct {
	from, to core.State
	reason   core.Reason
}

// Listener returns a core.Config.OnStateChange that counts each
// transition and then calls next, if next is not nil (to chain a logger,
// say slogbreaker.Listener). Like every listener it runs on the goroutine
// of a call to the breaker, outside the breaker's critical sections.
func (t *Transitions) Listener(next func(core.Transition)) func(core.Transition) {
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

// begin starts a read and returns its number.
func (t *Transitions) begin() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads++
	return t.reads
}

// counts returns name's counts, ordered by from, to and reason.
func (t *Transitions) counts(name string) []TransitionCount {
	t.mu.Lock()
	n := t.byName[name]
	var out []TransitionCount
	if n != nil {
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

// forget drops the names that read number read did not see and that were
// last counted before it began. A name counted before the read began
// belongs to a breaker that was in its Source before the read began
// (a breaker transitions only after it exists), which the read saw unless
// it has gone since; one counted later is kept for the next read.
func (t *Transitions) forget(seen map[string]bool, read uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, n := range t.byName {
		if !seen[name] && n.stamp < read {
			delete(t.byName, name)
		}
	}
}
