// Package fuzz holds casbreaker's native Go fuzz targets that need only
// exported APIs: the lock-free core against the mutex baseline
// (FuzzDifferential), each lock-free window against a naive one
// (FuzzAtomicRing, FuzzBuckets), and configuration validation (FuzzConfig).
// The state-word target, which needs unexported internals, is core's
// FuzzStateWord.
//
// Plain `go test` replays the committed seed corpora under
// testdata/fuzz/FuzzXxx; `make fuzz FUZZTIME=60s` fuzzes every target in
// turn. docs/verification.md says what each target proves.
package fuzz
