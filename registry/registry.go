// Package registry keeps circuit breakers by key (a host, a method, a
// tenant), each made from one template core.Config on first use.
//
// Looking up a key that has a breaker takes no lock and allocates nothing:
// one lookup in a sync.Map, plus, when eviction is on, one atomic load of
// the key's reference mark (and a store when it is clear, so a key hit
// constantly writes nothing). It reads no clock: idle times are measured
// by the eviction hand, which stamps the time when it finds a mark.
// Making a new breaker, and evicting, take the registry's mutex.
//
// An optional bound (Options.MaxBreakers) and idle eviction
// (Options.IdleAfter) drop only breakers that may be evicted: not open or
// forced open (an open one waits for its open duration to pass), and with
// no permit out (see Breaker for permits never reported). Both are done by
// a clock hand that goes round the breakers as new keys arrive: a new key
// costs O(1) amortized work at any bound, and the registry starts no
// goroutine. EvictIdle is the explicit full sweep.
//
// An optional cap (Options.MaxOpenPercent) bounds the share of breakers
// that may be open at once: a trip past it keeps its breaker closed, so
// that a fault of the caller's own cannot shed every key.
//
// An optional Extension (Options.Extension) adds a part of its own to each
// breaker as it is made, and is told when the registry drops it: the hook
// through which the fleet module shares each key's open state and probe
// budget across replicas.
//
// Memory: beyond its *core.Breaker and the key's own bytes, a key costs
// its sync.Map entry (with the key boxed in an interface), a
// registry.Breaker (32 bytes) and a slot of the hand's ring (the key's
// size plus 8 bytes, in a slice whose capacity stays under four times the
// breakers): 193 bytes for a string key at 100,000 keys on 64-bit
// platforms (BenchmarkMemoryPerKey).
package registry

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/atomic"

	"github.com/casbreaker/casbreaker/core"
)

// ErrFull is what Get returns, wrapped, when Options.MaxBreakers breakers
// exist and none of them may be evicted to make room (each is open or
// forced open, or has a permit out). It also matches core.ErrIgnored with
// errors.Is: the call was refused by a local limit before it reached the
// dependency, so a breaker around the registry's caller, with the default
// classifier, does not count it as a failure.
var ErrFull error = fullError{}

// fullError is ErrFull's type: a local limit, ignored by a breaker.
type fullError struct{}

func (fullError) Error() string { return "registry: registry is full" }

// Is reports that a full registry is ignored (core.ErrIgnored).
func (fullError) Is(target error) bool { return target == core.ErrIgnored }

// ErrInvalidOptions is what every error of New matches with errors.Is,
// besides core.ErrInvalidConfig for a bad template.
var ErrInvalidOptions = errors.New("registry: invalid options")

// ErrInvalidKey is what Get returns, wrapped, for a key that could never
// be found again: one not equal to itself (a NaN float, or a struct, array
// or interface value holding one), or an interface value of a type that is
// not comparable (a slice, map or func). Get makes no breaker for it; the
// error names the key.
var ErrInvalidKey = errors.New("registry: invalid key")

// DefaultPermitTimeout is Options.PermitTimeout's value when it is zero.
const DefaultPermitTimeout = time.Hour

// idleSteps is how many breakers the hand examines for idleness per new
// key. With keys arriving steadily, the hand goes round once per
// (breakers/idleSteps) new keys and drops the breakers idle when it
// passes, so the registry holds about idleSteps/(idleSteps-1) times the
// breakers with a Get within IdleAfter (4/3), plus those that may not be
// evicted.
const idleSteps = 4

// fullSteps is how many breakers the hand examines for a new key at the
// bound once the registry is full (Options.MaxBreakers).
const fullSteps = 8

// Options configures a Registry.
type Options[K comparable] struct {
	// Config is the template of every breaker. Its Name is the prefix of
	// each breaker's name (see Name); its OnStateChange, if set, hears
	// every breaker's transitions, each Transition.Name telling them apart.
	// Its Clock, if set, is also the registry's clock for idle times. Its
	// InitialState is every new breaker's, a key's breaker made again
	// after an eviction included (an open one open for the open duration
	// from its making); a forced-open breaker may not be evicted, so with
	// ForcedOpen and MaxBreakers, keys that no manual control has moved
	// fill the registry (ErrFull).
	Config core.Config
	// Name names the breaker of a key (Config.Name of that breaker). Zero:
	// fmt.Sprint(key), after Config.Name and a "/" when Config.Name is set;
	// a key whose text is not valid UTF-8 (a name core.New refuses, and
	// one no metrics label may hold) is named by that text quoted as a Go
	// string literal (strconv.Quote: "\xff.example" with its quotes and
	// backslash). A Name function that returns invalid UTF-8 makes Get of
	// that key fail with core.ErrInvalidConfig. It runs on the goroutine
	// of a Get that finds no breaker for key, outside the registry's
	// mutex, so it may call the registry (Get of another key, Len); it
	// may run more than once for a key when Gets of it race, and a panic
	// in it propagates out of that Get, which makes no breaker.
	Name func(key K) string
	// MaxBreakers bounds the number of breakers. At the bound, making a
	// new one first evicts one that may be evicted (see the package doc),
	// chosen by a second-chance clock, an approximation of least recently
	// used: the hand goes round the breakers, clearing the mark that a Get
	// of an existing breaker sets, and evicts the first one it finds
	// unmarked (or idle). A breaker looked up since the hand last passed
	// it is spared once; one made and never looked up again is not, so a
	// stream of keys seen once does not push out the keys in use. If the
	// hand goes round twice and finds none, Get returns ErrFull, and the
	// registry is full: from then on each new key examines the next 8
	// breakers only (all of them, twice, in a registry of 4 or fewer),
	// and gets ErrFull if none of those may be evicted, until one of them
	// may and the registry is no longer full. So a new key costs O(1)
	// amortized at any bound, with every breaker open too; a breaker that
	// may be evicted again (its open duration passed, its permits back) is
	// found within MaxBreakers/8 new keys. Zero: no bound. Negative: an
	// error.
	//
	// An evicted breaker takes its window and its run of failures with
	// it: with fewer breakers allowed than keys in use, a failing key can
	// be evicted, and start over, before it ever trips. Size the bound
	// above the working set. A Breaker that Get returned may also be
	// evicted before the caller's Allow returns (it had no permit out
	// yet); the caller's calls then go through a breaker the registry no
	// longer holds, and their outcomes do not reach the key's next
	// breaker.
	MaxBreakers int
	// IdleAfter is how long a breaker must go without a Get before the
	// registry drops it, if it may be evicted (see the package doc). The
	// hand examines four breakers for idleness each time a new key's
	// breaker is made, so idle breakers go as new keys arrive, with no
	// goroutine: with keys arriving steadily, the registry holds at most
	// about 4/3 as many breakers as keys with a Get within IdleAfter, plus
	// those that may not be evicted; with no new key, nothing grows and
	// nothing is dropped until EvictIdle. A Get reads no clock: its mark
	// is found by the hand's next pass (or EvictIdle), which stamps that
	// time as the breaker's last use. So a breaker is never dropped sooner
	// than IdleAfter after its last Get, and may be dropped up to the time
	// the hand takes to come round again later (with EvictIdle run every
	// IdleAfter, at most twice IdleAfter after its last Get). Zero:
	// nothing is dropped for idleness. Negative: an error.
	IdleAfter time.Duration
	// PermitTimeout is how long a breaker's key may go without a Get (as
	// IdleAfter measures it: from the pass that last found it looked up),
	// while permits of the breaker are out, before the registry presumes
	// those permits lost (reported to another breaker, or never) and may
	// evict the breaker as if none were out, at the bound or when idle. A
	// call still running then reports to a breaker the registry no longer
	// holds. Set it above the longest call. Used only with MaxBreakers or
	// IdleAfter. Zero: DefaultPermitTimeout. Negative: an error.
	PermitTimeout time.Duration
	// MaxOpenPercent caps the share of the registry's breakers that may
	// be ejected (open, half-open or forced open) at once, in percent,
	// 1..100, as Envoy's max_ejection_percent: a trip that would eject
	// more than max(1, MaxOpenPercent% of the breakers the registry holds,
	// rounded down) is refused, and its breaker commits closed -> closed
	// with core.ReasonCapped instead (core.OpenGate), so that a fault on
	// the client's side, which fails every key, cannot shed every
	// dependency. At least one may always open, so that a small registry
	// (3 keys at 10 %) still protects. The share follows the number of
	// breakers as keys come and go; a breaker the registry evicts gives
	// its slot back, and a manual control (ForceOpen, HalfOpen) or an
	// ejecting Config.InitialState is never refused but counted. OpenShare
	// reads the count. A trip takes a slot with one compare-and-swap on a
	// count the registry's breakers share, on its slow path only; each
	// breaker costs 16 bytes more (its core.OpenGate). Zero: no cap.
	// Outside 0..100, or with Config.OpenGate set in the template: an
	// error.
	MaxOpenPercent int
	// Extension, if set, adds a part of its own to each breaker the
	// registry makes, and is told when the registry drops it (see
	// Extension): the fleet module's per-key membership is one. Zero: none,
	// and no memory for it; with one, the registry keeps a map entry from
	// each breaker to its part. A nil pointer (or other nil value of a
	// type with methods) as the Extension: an error.
	Extension Extension
}

// Registry is a set of breakers by key. Make one with New: a zero
// Registry has no template, and Get and Lookup panic with "registry:
// Registry used without New"; every method of a nil *Registry panics with
// a message that names New. All methods are safe for concurrent use.
type Registry[K comparable] struct {
	// tmpl is the template, replaced whole by Reconfigure.
	tmpl          atomic.Pointer[core.Config]
	name          func(K) string
	clock         core.Clock
	max           int
	idle          time.Duration
	permitTimeout time.Duration
	track         bool     // eviction is on: count permits and uses
	share         *openCap // nil: no MaxOpenPercent
	checkKey      bool     // K holds an interface: comparing a key may panic
	ext           Extension

	m    sync.Map // K -> *Breaker
	mu   sync.Mutex
	ring []slot[K] // every breaker of m, in the hand's order; guarded by mu
	hand int       // the next slot the hand examines; guarded by mu
	// full is set when the hand went round twice at the bound and found
	// no breaker it may evict, and cleared when it finds one or the
	// registry is below the bound; guarded by mu.
	full bool
	// exts is each breaker's part of Options.Extension (nil without one),
	// and dropped the parts of breakers dropped, to be told so once the
	// mutex is released; both guarded by mu.
	exts    map[*Breaker]Extended
	dropped []Extended
	// extsPeak is the most entries exts held since it was made; guarded
	// by mu.
	extsPeak int
}

// slot is a breaker in the hand's ring, with its key.
type slot[K comparable] struct {
	key K
	b   *Breaker
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
	if o.PermitTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: PermitTimeout %v is negative (0: %v)", ErrInvalidOptions, o.PermitTimeout, DefaultPermitTimeout))
	}
	if o.MaxOpenPercent < 0 || o.MaxOpenPercent > 100 {
		errs = append(errs, fmt.Errorf("%w: MaxOpenPercent %d is outside 0..100 (0: no cap)", ErrInvalidOptions, o.MaxOpenPercent))
	}
	if o.Config.OpenGate != nil {
		errs = append(errs, errTemplateGate())
	}
	if isNil(o.Extension) {
		errs = append(errs, fmt.Errorf("%w: Extension is a nil %T (leave it nil for none)", ErrInvalidOptions, o.Extension))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r := &Registry[K]{
		name: o.Name, clock: o.Config.Clock,
		max: o.MaxBreakers, idle: o.IdleAfter, permitTimeout: o.PermitTimeout,
		checkKey: holdsInterface(reflect.TypeFor[K]()), ext: o.Extension,
	}
	r.tmpl.Store(&o.Config)
	if r.ext != nil {
		r.exts = make(map[*Breaker]Extended)
	}
	if r.name == nil {
		prefix := ""
		if o.Config.Name != "" {
			prefix = o.Config.Name + "/"
		}
		r.name = func(k K) string { return prefix + keyText(k) }
	}
	if r.clock == nil {
		r.clock = core.NewSystemClock()
	}
	if r.permitTimeout == 0 {
		r.permitTimeout = DefaultPermitTimeout
	}
	r.track = r.max > 0 || r.idle > 0
	if o.MaxOpenPercent > 0 {
		r.share = &openCap{percent: int64(o.MaxOpenPercent)}
	}
	return r, nil
}

// errTemplateGate is New's and Reconfigure's refusal of a template that
// sets Config.OpenGate.
func errTemplateGate() error {
	return fmt.Errorf("%w: Config.OpenGate is set in the template: the registry gives each breaker its own (MaxOpenPercent), and evicts breakers a shared gate would go on counting", ErrInvalidOptions)
}

// holdsInterface reports whether comparing two values of type t may panic:
// t is, or holds in a field or an element, an interface, whose dynamic type
// may not be comparable.
func holdsInterface(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Array:
		return holdsInterface(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsInterface(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// Get returns the breaker for key, making it from the template on first
// use: every caller asking for the same key gets the same breaker until it
// is evicted. For a key that has a breaker it takes no lock, never waits
// and allocates nothing. It returns an error matching ErrFull (see
// Options.MaxBreakers), or ErrInvalidKey for a key that is not equal to
// itself or not comparable; it panics only on a Registry not made by New
// (or where the Name function or the clock panics). To find a breaker
// without making one, use Lookup.
func (r *Registry[K]) Get(key K) (*Breaker, error) {
	r.mustBeNew()
	if r.checkKey {
		// A key of an interface type may hold a value the map cannot
		// compare, which would panic in it: checked on every Get.
		if err := keyError(key); err != nil {
			return nil, err
		}
	}
	v, ok := r.m.Load(key)
	if !ok {
		return r.create(key, core.New)
	}
	b := v.(*Breaker)
	if r.track {
		b.touch()
	}
	return b, nil
}

// Lookup returns the breaker for key and true if the registry holds one,
// and nil and false if not: unlike Get it never makes a breaker, so a
// mistyped key in a dashboard, an admin handler or a test finds nothing
// instead of adding a closed breaker that nothing calls. It takes no lock,
// never waits and allocates nothing. It is not a use of the key: it sets
// no mark, so a breaker that is only looked up goes on ageing and may be
// evicted (see Options.IdleAfter); take the breakers you make calls
// through from Get. A key that Get refuses with ErrInvalidKey (not equal
// to itself, or not comparable) never has a breaker: Lookup returns false
// for it. It panics only on a Registry not made by New.
func (r *Registry[K]) Lookup(key K) (*Breaker, bool) {
	r.mustBeNew()
	if r.checkKey && keyError(key) != nil {
		return nil, false
	}
	v, ok := r.m.Load(key)
	if !ok {
		return nil, false
	}
	return v.(*Breaker), true
}

// mustBeNew panics, naming New, for a nil or zero Registry.
func (r *Registry[K]) mustBeNew() {
	if r == nil {
		panic(nilRegistry)
	}
	if r.name == nil {
		panic("registry: Registry used without New: make one with registry.New")
	}
}

// nilRegistry is what every method of a nil *Registry panics with.
const nilRegistry = "registry: nil *Registry: make one with registry.New and check its error"

// keyError returns an error matching ErrInvalidKey if key is not equal to
// itself, or holds a value of a type that cannot be compared (the panic of
// the comparison, recovered).
func keyError[K comparable](key K) (err error) {
	defer func() {
		if recover() != nil {
			err = fmt.Errorf("%w: key %#v holds a value that is not comparable", ErrInvalidKey, key)
		}
	}()
	if key != key {
		return fmt.Errorf("%w: key %s is not equal to itself (a NaN?): it could never be found again", ErrInvalidKey, keyText(key))
	}
	return nil
}

// keyText is key as text that is valid UTF-8, for names and errors: its
// fmt.Sprint form, quoted (strconv.Quote) when that is not valid UTF-8.
func keyText[K comparable](key K) string {
	s := fmt.Sprint(key)
	if utf8.ValidString(s) {
		return s
	}
	return strconv.Quote(s)
}

// create makes key's breaker under the mutex, after the hand's sweep, with
// build from the template under the key's name (as Options.Extension
// leaves it), or returns the one another caller made meanwhile.
func (r *Registry[K]) create(key K, build func(core.Config) (*core.Breaker, error)) (b *Breaker, err error) {
	// A key not equal to itself is never found again: each Get would make
	// one more breaker. Checked here, on a miss, where such a key always
	// lands, so that a found key pays nothing.
	if err := keyError(key); err != nil {
		return nil, err
	}
	// User code, run before the mutex: a Name or an Extension that calls
	// back into the registry must not wait on a mutex its own Get holds.
	tmpl := r.tmpl.Load()
	cfg := *tmpl
	cfg.Name = r.name(key)
	if r.share != nil {
		cfg.OpenGate = &openSlot{of: r.share}
	}
	ext, err := r.extend(cfg.Name, &cfg)
	if err != nil {
		return nil, fmt.Errorf("registry: extension for the breaker of %s: %w", keyText(key), err)
	}
	b, kept, err := r.keep(key, cfg, ext, build)
	if kept {
		// Outside the mutex (a listener may call back): a Reconfigure that
		// stored a new template after this one was read, and listed the
		// breakers before this one was kept, did not reach it.
		err = r.follow(key, b, tmpl)
	}
	return b, err
}

// keep is create's part under the mutex: createLocked, then the parts
// dropped told once the mutex is released.
func (r *Registry[K]) keep(key K, cfg core.Config, ext Extended, build func(core.Config) (*core.Breaker, error)) (b *Breaker, kept bool, err error) {
	r.mu.Lock()
	// Deferred: a Made or a clock that panics must not leave the mutex
	// held, and the parts dropped so far (and ext, not kept) are told.
	defer func() {
		dropped := r.takeDropped()
		r.mu.Unlock()
		if ext != nil && !kept {
			dropped = append(dropped, ext)
		}
		tellDropped(dropped)
	}()
	return r.createLocked(key, cfg, ext, build)
}

// createLocked is create under the mutex: the breaker another caller made
// meanwhile, or one made from cfg and kept, with ext, if any, told Made
// (kept reports which).
func (r *Registry[K]) createLocked(key K, cfg core.Config, ext Extended, build func(core.Config) (*core.Breaker, error)) (b *Breaker, kept bool, err error) {
	var now time.Duration
	if r.track {
		now = r.clock.Now()
	}
	if v, ok := r.m.Load(key); ok {
		b := v.(*Breaker)
		if r.track {
			b.touch()
		}
		return b, false, nil
	}
	victim := -1
	if r.track {
		var full bool
		if victim, full = r.sweep(now); full {
			return nil, false, fmt.Errorf("%w: %d breakers, none of which may be evicted (each open, forced open or with a permit out) for %s", ErrFull, len(r.ring), keyText(key))
		}
	}
	cb, err := build(cfg)
	if err != nil {
		// The template was validated by New and only Name (and what an
		// Extension set) changed; or Restore's snapshot does not fit.
		return nil, false, fmt.Errorf("registry: breaker for %s: %w", keyText(key), err)
	}
	// Made unmarked: a key looked up once, never again, is the first the
	// hand evicts; one looked up again is spared once per turn.
	b = &Breaker{core: cb, track: r.track}
	b.used.Store(int64(now))
	if ext != nil {
		ext.Made(cb)
		r.keepExtended(b, ext)
	}
	s := slot[K]{key, b}
	if victim >= 0 {
		r.m.CompareAndDelete(r.ring[victim].key, r.ring[victim].b)
		r.detachGate(r.ring[victim].b)
		r.dropExtended(r.ring[victim].b)
		r.ring[victim] = s
		r.hand = victim + 1 // the new breaker gets a whole turn of the hand
	} else {
		r.ring = append(r.ring, s)
	}
	r.m.Store(key, b)
	r.counted()
	return b, true, nil
}

// sweep moves the hand before a new breaker is made at reading now: it
// examines idleSteps breakers, dropping those idle and evictable; then, at
// the bound, goes on until it finds one to evict (evictable, and unmarked
// or idle), clearing the marks it passes. It returns the victim's slot
// (-1: none needed), or full if it went round twice and found none. The
// caller holds the mutex.
func (r *Registry[K]) sweep(now time.Duration) (victim int, full bool) {
	steps := 0
	if r.idle > 0 {
		steps = idleSteps
	}
	limit := steps + 2*len(r.ring)
	if r.full {
		// Nothing could be evicted the last time round: look a little
		// further each time, not round again, so that a registry of open
		// breakers does not cost each new key a scan of all of them.
		limit = steps + min(fullSteps, 2*len(r.ring))
	}
	for i := 0; len(r.ring) > 0; i++ {
		atBound := r.max > 0 && len(r.ring) >= r.max
		if !atBound && i >= steps {
			break
		}
		if i >= limit {
			r.full = true
			return 0, true
		}
		if r.hand >= len(r.ring) {
			r.hand = 0
		}
		b := r.ring[r.hand].b
		// A breaker looked up since the hand last passed is spared once,
		// and its idle time starts again now.
		seen := b.seen(now)
		idle := !seen && r.idle > 0 && b.idleFor(now) >= r.idle
		if (idle || atBound && !seen) && b.evictable(now, r.permitTimeout) {
			if atBound {
				r.full = false
				return r.hand, false
			}
			r.drop(r.hand) // the last slot moves here: examine it next
			continue
		}
		r.hand++
	}
	r.full = false
	return -1, false // the loop ends only below the bound
}

// drop evicts the breaker in slot i, moving the last slot there and giving
// back the ring's memory once less than a quarter of it is used (to half
// used, so that a registry going up and down by a little does not copy
// the ring each time). The caller holds the mutex.
func (r *Registry[K]) drop(i int) {
	r.m.CompareAndDelete(r.ring[i].key, r.ring[i].b)
	r.detachGate(r.ring[i].b)
	r.dropExtended(r.ring[i].b)
	last := len(r.ring) - 1
	r.ring[i] = r.ring[last]
	r.ring[last] = slot[K]{} // no reference to the evicted breaker
	r.ring = r.ring[:last]
	if len(r.ring) < cap(r.ring)/4 {
		r.ring = append(make([]slot[K], 0, 2*len(r.ring)), r.ring...)
	}
	r.counted()
}

// counted tells the cap on ejected breakers, if any, how many breakers the
// registry holds now. The caller holds the mutex.
func (r *Registry[K]) counted() {
	if r.share != nil {
		r.share.live.Store(int64(len(r.ring)))
	}
}

// EvictIdle drops every breaker that had no Get for Options.IdleAfter and
// may be evicted (see the package doc), and returns how many it dropped.
// A Get reads no clock, it only marks its breaker: idle time runs from the
// first pass (of EvictIdle, or of the hand that new keys move) that finds
// the mark, so a breaker looked up since the last pass is spared by this
// one and may go at a later one.
// New keys already drop idle breakers a few at a time; EvictIdle is the
// full sweep, for a registry that gets no new keys, for example from a
// time.Ticker loop of your own. A caller still holding a dropped breaker
// may keep using it: it works as before, alone; its late Done changes
// nothing in the registry. It takes the registry's mutex and examines
// every breaker. Zero IdleAfter: it drops nothing and returns 0.
func (r *Registry[K]) EvictIdle() int {
	if r == nil {
		panic(nilRegistry)
	}
	if r.idle == 0 {
		return 0
	}
	r.mu.Lock()
	defer func() {
		d := r.takeDropped()
		r.mu.Unlock()
		tellDropped(d)
	}()
	now := r.clock.Now()
	n := 0
	for i := 0; i < len(r.ring); {
		b := r.ring[i].b
		if !b.seen(now) && b.idleFor(now) >= r.idle && b.evictable(now, r.permitTimeout) {
			r.drop(i) // the last slot moves here: examine it next
			n++
			continue
		}
		i++
	}
	return n
}

// Len returns the number of breakers. It takes the registry's mutex.
func (r *Registry[K]) Len() int {
	if r == nil {
		panic(nilRegistry)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ring)
}

// All yields every breaker with its key, in no particular order, for
// metrics and dashboards. It takes no lock: a breaker made or evicted
// while it runs may or may not be yielded, and none is yielded twice.
func (r *Registry[K]) All() iter.Seq2[K, *Breaker] {
	if r == nil {
		panic(nilRegistry)
	}
	return func(yield func(K, *Breaker) bool) {
		r.m.Range(func(k, v any) bool { return yield(k.(K), v.(*Breaker)) })
	}
}
