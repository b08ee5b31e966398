package registry

import (
	"errors"
	"fmt"

	"github.com/casbreaker/casbreaker/core"
)

// Reconfigure makes c the template of every breaker: those made from now
// on, and every breaker the registry holds, each reconfigured in place
// with core.Breaker.Reconfigure (it keeps its state, its window's newest
// outcomes and its permits in flight; one notification each, to the
// template's listener). Each breaker keeps its name, and the wiring it
// was built with (clock, listener, metrics, the registry's open cap and
// what an Options.Extension set): c's are not read, and an Extension's
// changes to a key's rules are not made again. c is checked as New checks
// the template: its core.Config.Validate errors, an error matching
// ErrInvalidOptions for a Config.OpenGate, or core's refusal to start
// measuring slow calls on breakers built without; then nothing changes.
// Otherwise it returns the errors of breakers that refused (each naming
// its key), joined, or nil.
//
// It calls the breakers' Reconfigure outside every mutex, so a listener
// may call back into the registry, Reconfigure included. Each breaker ends
// on the newest template: one that a later Reconfigure reached first is
// brought up to it again, and a breaker made while one runs is made from
// the new template or reconfigured by the Get that made it before that
// Get returns.
func (r *Registry[K]) Reconfigure(c core.Config) error {
	r.mustBeNew()
	if c.OpenGate != nil {
		return errTemplateGate()
	}
	t := r.tmpl.Load()
	// The wiring is the first template's, for the breakers made from now
	// on too: c's is not read (every template stored keeps it).
	c.Name, c.Clock, c.OnStateChange, c.CollectMetrics = t.Name, t.Clock, t.OnStateChange, t.CollectMetrics
	c.ProbeGate, c.InitialState = t.ProbeGate, t.InitialState
	old, err := t.Validate()
	if err != nil {
		return err // New validated it: unreachable, but not to be hidden
	}
	if _, _, err := old.Reconfigured(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.tmpl.Store(&c)
	list := make([]slot[K], len(r.ring))
	copy(list, r.ring)
	r.mu.Unlock()
	var errs []error
	for _, s := range list {
		if err := r.follow(s.key, s.b, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// follow reconfigures b, the breaker of key last given template used (nil:
// not known), until it runs with the template the registry holds.
func (r *Registry[K]) follow(key K, b *Breaker, used *core.Config) error {
	for t := r.tmpl.Load(); t != used; t = r.tmpl.Load() {
		if err := b.core.Reconfigure(*t); err != nil {
			return fmt.Errorf("registry: breaker for %s: %w", keyText(key), err)
		}
		used = t
	}
	return nil
}
