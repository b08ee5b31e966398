// Package registry keeps circuit breakers by key (a host, a method, a
// tenant), each made from one template core.Config on first use.
//
// Looking up a key that has a breaker takes no lock: one lookup in a
// sync.Map, plus, when eviction is on, one clock reading and an atomic
// load. Making a new breaker, and evicting, take the registry's mutex. An
// optional bound (Options.MaxBreakers) and idle eviction
// (Options.IdleAfter, by EvictIdle) never drop a breaker that is open,
// half-open or forced open, or that has a permit out. The registry starts
// no goroutine: call EvictIdle when you want idle breakers gone, for
// example from a time.Ticker loop of your own.
package registry

import (
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// ErrFull is what Get returns, wrapped, when Options.MaxBreakers breakers
// exist and none of them may be evicted to make room (each is open,
// half-open or forced open, or has a permit out).
var ErrFull = errors.New("casbreaker/registry: registry is full")

// ErrInvalidOptions is what every error of New matches with errors.Is,
// besides core.ErrInvalidConfig for a bad template.
var ErrInvalidOptions = errors.New("casbreaker/registry: invalid options")

// Options configures a Registry.
type Options[K comparable] struct {
	// Config is the template of every breaker. Its Name is the prefix of
	// each breaker's name (see Name); its OnStateChange, if set, hears
	// every breaker's transitions, each Transition.Name telling them apart.
	// Its Clock, if set, is also the registry's clock for idle times.
	Config core.Config
	// Name names the breaker of a key (Config.Name of that breaker). Zero:
	// fmt.Sprint(key), after Config.Name and a "/" when Config.Name is set.
	Name func(key K) string
	// MaxBreakers bounds the number of breakers. At the bound, making a
	// new one first evicts the least recently used breaker that may be
	// evicted (closed, disabled or metrics-only, with no permit out);
	// if there is none, Get returns ErrFull. A scan of every breaker,
	// under the registry's mutex, only when a new key arrives at the
	// bound. Zero: no bound. Negative: an error.
	//
	// An evicted breaker takes its window and its run of failures with
	// it: with fewer breakers allowed than keys in use, a failing key can
	// be evicted, and start over, before it ever trips. Size the bound
	// above the working set. A Breaker that Get returned may also be
	// evicted before the caller's Allow (it had no permit out yet); the
	// caller's calls then go through a breaker the registry no longer
	// holds, and their outcomes do not reach the key's next breaker.
	MaxBreakers int
	// IdleAfter is how long a breaker must go without a Get before
	// EvictIdle may drop it (only if it is closed, disabled or
	// metrics-only, with no permit out). Idle times are kept to
	// IdleAfter/16, so a breaker may be dropped up to that much early.
	// Zero: EvictIdle drops nothing. Negative: an error.
	IdleAfter time.Duration
}

// Registry is a set of breakers by key. Make one with New: a zero
// Registry has no template, and Get panics with "registry: Registry used
// without New". All methods are safe for concurrent use.
type Registry[K comparable] struct {
	cfg   core.Config
	name  func(K) string
	clock core.Clock
	max   int
	idle  time.Duration
	slack time.Duration // how stale an idle time may be: idle/16
	track bool          // eviction is on: count permits and idle times

	m     sync.Map // K -> *Breaker
	mu    sync.Mutex
	count int // breakers in m; guarded by mu
}

// New returns an empty registry. It returns the template's
// core.Config.Validate errors, or an error matching ErrInvalidOptions that
// names a bad option; it never panics.
func New[K comparable](o Options[K]) (*Registry[K], error) {
	var errs []error
	if _, err := o.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.MaxBreakers < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxBreakers %d is negative (0: no bound)", ErrInvalidOptions, o.MaxBreakers))
	}
	if o.IdleAfter < 0 {
		errs = append(errs, fmt.Errorf("%w: IdleAfter %v is negative (0: never idle)", ErrInvalidOptions, o.IdleAfter))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r := &Registry[K]{cfg: o.Config, name: o.Name, clock: o.Config.Clock, max: o.MaxBreakers, idle: o.IdleAfter}
	if r.name == nil {
		prefix := ""
		if o.Config.Name != "" {
			prefix = o.Config.Name + "/"
		}
		r.name = func(k K) string { return prefix + fmt.Sprint(k) }
	}
	if r.clock == nil {
		r.clock = core.NewSystemClock()
	}
	r.slack = r.idle / 16
	r.track = r.max > 0 || r.idle > 0
	return r, nil
}

// Get returns the breaker for key, making it from the template on first
// use: every caller asking for the same key gets the same breaker until it
// is evicted. For a key that has a breaker it takes no lock and allocates
// nothing. The only error is one matching ErrFull (see
// Options.MaxBreakers).
func (r *Registry[K]) Get(key K) (*Breaker, error) {
	if r.name == nil {
		panic("registry: Registry used without New: make one with registry.New")
	}
	for {
		v, ok := r.m.Load(key)
		if !ok {
			b, err := r.create(key)
			if err != nil || b != nil {
				return b, err
			}
			continue // another caller made it meanwhile: load it
		}
		b := v.(*Breaker)
		if !r.track {
			return b, nil
		}
		// Stamp before checking the evicted mark: an evictor marks before
		// it reads the stamp, so either it sees this stamp and spares b,
		// or this call sees its mark and looks again (both are
		// sequentially consistent atomics).
		b.touch(r.clock.Now(), r.slack)
		if !b.evicted() {
			return b, nil
		}
		// Marked by an evictor, which holds the mutex until it has either
		// dropped b or, finding b used after all, unmarked it: wait for
		// that, then look again.
		r.mu.Lock()
		//lint:ignore SA2001 the empty section waits for the evictor to finish
		r.mu.Unlock()
	}
}

// create makes key's breaker under the mutex, evicting one first at the
// bound. It returns nil, nil if key has a breaker already.
func (r *Registry[K]) create(key K) (*Breaker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m.Load(key); ok {
		return nil, nil
	}
	now := r.clock.Now()
	if r.max > 0 && r.count >= r.max && !r.evictLRU(now) {
		return nil, fmt.Errorf("%w: %d breakers, none closed and idle of permits to evict for %v", ErrFull, r.count, key)
	}
	cfg := r.cfg
	cfg.Name = r.name(key)
	cb, err := core.New(cfg)
	if err != nil {
		// The template was validated by New and only Name changed.
		return nil, fmt.Errorf("casbreaker/registry: breaker for %v: %w", key, err)
	}
	b := &Breaker{Breaker: cb, track: r.track}
	b.used.Store(int64(now))
	r.m.Store(key, b)
	r.count++
	return b, nil
}

// evictLRU evicts the least recently used breaker that may be evicted,
// and reports whether there was one. The caller holds the mutex.
func (r *Registry[K]) evictLRU(now time.Duration) bool {
	var (
		oldKey K
		old    *Breaker
	)
	r.m.Range(func(k, v any) bool {
		b := v.(*Breaker)
		if b.evictable() && (old == nil || b.used.Load() < old.used.Load()) {
			oldKey, old = k.(K), b
		}
		return true
	})
	// A Get may have stamped it since; at the bound the oldest goes anyway
	// unless it took a permit, which evict refuses.
	return old != nil && r.evict(oldKey, old, now, 0)
}

// EvictIdle drops every breaker that had no Get for Options.IdleAfter and
// may be evicted (closed, disabled or metrics-only, with no permit out),
// and returns how many it dropped. A caller still holding a dropped
// breaker may keep using it: it works as before, alone; its late Done
// changes nothing in the registry. It takes the registry's mutex and
// scans every breaker.
func (r *Registry[K]) EvictIdle() int {
	if r.idle == 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	n := 0
	r.m.Range(func(k, v any) bool {
		if r.evict(k.(K), v.(*Breaker), now, r.idle) {
			n++
		}
		return true
	})
	return n
}

// evict drops b, the breaker of key, if it may be evicted and its last
// Get was idle or longer before now. The caller holds the mutex.
func (r *Registry[K]) evict(key K, b *Breaker, now, idle time.Duration) bool {
	if !b.evictable() || !b.mark() {
		return false
	}
	// Marked: a Get that stamps from now on sees the mark and looks again.
	// Read the stamp and the state after marking, and undo if b was used
	// meanwhile or is busy after all.
	if now-time.Duration(b.used.Load()) < idle || !b.evictable() {
		b.unmark()
		return false
	}
	r.m.CompareAndDelete(key, b)
	r.count--
	return true
}

// Len returns the number of breakers.
func (r *Registry[K]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// All yields every breaker with its key, in no particular order, for
// metrics and dashboards. It takes no lock: a breaker made or evicted
// while it runs may or may not be yielded, and none is yielded twice.
func (r *Registry[K]) All() iter.Seq2[K, *Breaker] {
	return func(yield func(K, *Breaker) bool) {
		r.m.Range(func(k, v any) bool { return yield(k.(K), v.(*Breaker)) })
	}
}
