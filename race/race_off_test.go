//go:build !race

package race_test

// raceEnabled reports whether this test binary was built with -race: the
// race-detector teaching pair needs its subprocesses to have the detector.
const raceEnabled = false
