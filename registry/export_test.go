package registry

// PermitsOut is the number of permits b counts as out, for the tests that
// check the count never drifts.
func PermitsOut(b *Breaker) int64 { return b.permits.Load() }
