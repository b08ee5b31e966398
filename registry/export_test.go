package registry

// PermitsOut is the number of permits b counts as out, for the tests that
// check the count never drifts.
func PermitsOut(b *Breaker) int64 { return b.permits.Load() }

// RingCap is the capacity of r's ring of breakers, for the test that
// checks the ring gives memory back.
func RingCap[K comparable](r *Registry[K]) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cap(r.ring)
}

// Locked reports whether r's mutex is held, for the test that checks the
// Name function runs outside it.
func Locked[K comparable](r *Registry[K]) bool {
	if r.mu.TryLock() {
		r.mu.Unlock()
		return false
	}
	return true
}
