//go:build !race

package core_test

// raceEnabled reports whether this test binary was built with -race, which
// makes a tight loop of 2^20 transitions about ten times slower.
const raceEnabled = false
