// Package race holds the contention proofs of casbreaker: tests that the race
// detector alone cannot replace. Every test runs against both the lock-free
// core.Breaker and the mutex baseline.Breaker from one table, on a manual
// clock, sets GOMAXPROCS for itself and restores it, and sizes itself down
// under -short (make test) and up without it (make stress).
//
// The package has no non-test code; docs/verification.md lists each test,
// the property it proves, the rule or regression it guards, its sizes and
// the commands that run it.
package race
