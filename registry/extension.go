package registry

import (
	"fmt"
	"reflect"

	"github.com/casbreaker/casbreaker/core"
)

// Extension adds a part of its own to each breaker a Registry makes: a
// fleet membership (the fleet module's), a per-key probe budget, a
// per-key listener. Set Options.Extension.
type Extension interface {
	// Extend is called for each breaker the registry is about to make
	// (Get of a new key, and Restore), with the breaker's name and the
	// config it will be made from: the template with that Name (and the
	// registry's open gate, with MaxOpenPercent). It may change the
	// config (set a core.ProbeGate, wrap OnStateChange) and returns the
	// key's Extended (nil: none for this breaker), or an error, which Get
	// returns wrapped with the key and which makes no breaker; a nil
	// pointer (or map, slice, channel, func) as the Extended, with a nil
	// error, fails the Get with an error naming its type, as Made and
	// Dropped cannot be called on it. It runs on the goroutine of that Get,
	// outside the registry's mutex (so it may call the registry), and
	// may run more than once for a key when Gets of it race: the
	// Extended of a breaker that is not kept is Dropped without Made. A
	// panic in it propagates out of Get, which makes no breaker.
	Extend(name string, c *core.Config) (Extended, error)
}

// Extended is an Extension's part of one breaker.
type Extended interface {
	// Made is called once with the breaker, made from the config Extend
	// returned, before any other caller can get it: under the registry's
	// mutex, so it must be quick and must not call the registry. If it
	// panics, the panic propagates out of Get, which keeps no breaker
	// and tells this Extended Dropped (never kept), the mutex released.
	Made(b *core.Breaker)
	// Dropped is called once when the registry no longer holds the
	// breaker (evicted, or dropped when idle), or never kept it (a race
	// of Gets, or core.New refused the config Extend returned), after
	// the registry's mutex is released, on the goroutine of the call
	// that dropped it (a Get of a new key, EvictIdle). A caller may still
	// hold an evicted breaker and use it. It must not panic: one that
	// does propagates out of that call, and the breakers dropped with it
	// after it are not told.
	Dropped()
}

// extend runs the registry's Extension, if any, on the config of the
// breaker named name.
func (r *Registry[K]) extend(name string, c *core.Config) (Extended, error) {
	if r.ext == nil {
		return nil, nil
	}
	e, err := r.ext.Extend(name, c)
	if err == nil && isNil(e) {
		// A nil pointer in a non-nil interface: Made and Dropped would be
		// called on it.
		return nil, fmt.Errorf("its Extend returned a nil %T with a nil error (return a nil Extended for none)", e)
	}
	return e, err
}

// isNil reports whether e holds a nil pointer, map, slice, channel or
// function.
func isNil(e any) bool {
	if e == nil {
		return false
	}
	switch v := reflect.ValueOf(e); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func:
		return v.IsNil()
	}
	return false
}

// dropExtended queues the Extended of the breaker b, which the registry
// drops, for tellDropped. The caller holds the mutex.
func (r *Registry[K]) dropExtended(b *Breaker) {
	e, ok := r.exts[b]
	if !ok {
		return
	}
	delete(r.exts, b)
	r.dropped = append(r.dropped, e)
	// A Go map never gives back its buckets: once less than a quarter of
	// the most it held since it was last made is used, it is made again,
	// as the ring is (drop), so that a burst of keys does not hold its
	// memory for good. Amortized O(1) per drop.
	if len(r.exts) < r.extsPeak/4 {
		m := make(map[*Breaker]Extended, len(r.exts))
		for b, e := range r.exts {
			m[b] = e
		}
		r.exts, r.extsPeak = m, len(m)
	}
}

// keepExtended records e as the Extended of the breaker b, which the
// registry keeps. The caller holds the mutex.
func (r *Registry[K]) keepExtended(b *Breaker, e Extended) {
	r.exts[b] = e
	r.extsPeak = max(r.extsPeak, len(r.exts))
}

// takeDropped returns the Extended queued by dropExtended, for the caller
// to tell once it has released the mutex. The caller holds the mutex.
func (r *Registry[K]) takeDropped() []Extended {
	d := r.dropped
	r.dropped = nil
	return d
}

// tellDropped tells each of d it was dropped.
func tellDropped(d []Extended) {
	for _, e := range d {
		e.Dropped()
	}
}
