package registry

import (
	"errors"
	"time"

	"github.com/casbreaker/casbreaker/core"
)

// Snapshot is core.Breaker.Snapshot.
func (b *Breaker) Snapshot(now time.Time, withWindow bool) (core.Snapshot, error) {
	b.mustHaveCore()
	return b.core.Snapshot(now, withWindow)
}

// Snapshot returns the snapshot of every breaker the registry holds, by
// key, each taken at the wall-clock time now as core.Breaker.Snapshot takes
// it (with its count window if withWindow), for a service to store when it
// stops and hand to Restore when it starts. Like All it takes no lock: a
// breaker made or evicted while it runs may or may not be in the map. It
// allocates the map and any windows. It returns an error matching
// core.ErrInvalidArgument, and no map, when now, or a breaker's open
// deadline or ramp-up's end, is outside the span 1677-09-21 to 2262-04-11.
// It panics only on a nil *Registry.
func (r *Registry[K]) Snapshot(now time.Time, withWindow bool) (map[K]core.Snapshot, error) {
	snaps := map[K]core.Snapshot{}
	for k, b := range r.All() {
		s, err := b.Snapshot(now, withWindow)
		if err != nil {
			return nil, err
		}
		snaps[k] = s
	}
	return snaps, nil
}

// Restore makes, for each key of snaps that has no breaker in the registry,
// the key's breaker from its snapshot at the wall-clock time now
// (core.Restore), from the template under the key's name, as Get would
// make it from the template (at the bound, evicting as Get does); a key
// that has a breaker keeps it, as newer than any snapshot. Call it before
// the registry serves. It returns nil, or errors.Join of one error per key
// it did not restore, each naming the key and matching what refused it:
// core.ErrInvalidSnapshot (and core.ErrSnapshotMismatch for a snapshot of
// another template), core.ErrInvalidArgument for a now outside the span
// 1677-09-21 to 2262-04-11, ErrFull, or ErrInvalidKey. The other keys are restored, in
// no particular order (with MaxBreakers below the number of keys, which
// ones fit is not decided). With Options.MaxOpenPercent a restored open,
// half-open or forced-open breaker holds a slot of the cap, past the share
// if need be (OpenShare). A Get of a key that failed makes its breaker
// from the template, as for any new key. It panics only on a Registry not
// made by New.
func (r *Registry[K]) Restore(snaps map[K]core.Snapshot, now time.Time) error {
	r.mustBeNew()
	var errs []error
	for k, s := range snaps {
		if _, ok := r.Lookup(k); ok {
			continue
		}
		_, err := r.create(k, func(c core.Config) (*core.Breaker, error) { return core.Restore(c, s, now) })
		if err != nil {
			errs = append(errs, err) // it names the key
		}
	}
	return errors.Join(errs...)
}
