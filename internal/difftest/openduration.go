package difftest

import (
	"errors"
	"time"
)

// ErrDurationPanics is the failure on which OpenDuration's functions panic
// (with this error), when it decides a transition to Open.
var ErrDurationPanics = errors.New("the open-duration function panics on this one")

// OpenDuration returns a core.Config.OpenDurationFunc for differential
// histories: a function of its arguments and seed alone, so both
// implementations get the same answer, that returns zero, negative, tiny
// (under a millisecond), in-bound and over-bound durations, bound being
// the core.Config.MaxOpenDuration it goes with (positive). It panics with
// ErrDurationPanics when the failure is (or wraps) ErrDurationPanics. It is
// safe for concurrent use.
func OpenDuration(seed uint64, bound time.Duration) func(reopens int, lastFailure error) time.Duration {
	return func(reopens int, lastFailure error) time.Duration {
		if errors.Is(lastFailure, ErrDurationPanics) {
			panic(ErrDurationPanics)
		}
		k := seed + uint64(reopens)*0x9e3779b97f4a7c15
		if lastFailure != nil {
			k += uint64(len(lastFailure.Error())) * 0xbf58476d1ce4e5b9
		}
		k ^= k >> 31
		k *= 0x94d049bb133111eb
		k ^= k >> 29
		r := k >> 8
		switch k % 6 {
		case 0:
			return 0
		case 1:
			return -time.Duration(1 + r%uint64(time.Second))
		case 2:
			return bound + time.Duration(1+r%uint64(time.Second))
		case 3:
			return time.Duration(1 + r%uint64(time.Millisecond))
		}
		return time.Duration(1 + r%uint64(bound))
	}
}
