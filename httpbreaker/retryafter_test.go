package httpbreaker_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/httpbreaker"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"0", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"soon", 0, false},
		{"99999999999999999999999", time.Duration(math.MaxInt64 / int64(time.Second) * int64(time.Second)), true},
		{"Tue, 01 Dec 2026 12:01:30 GMT", 90 * time.Second, true},   // IMF-fixdate
		{"Tuesday, 01-Dec-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Tue Dec  1 12:00:20 2026", 20 * time.Second, true},        // asctime
		{"Tue, 01 Dec 2026 11:59:00 GMT", 0, false},                 // past
		{"Tue, 01 Dec 2026 12:00:00 GMT", 0, false},                 // now
		{"Tue, 32 Dec 2026 12:00:00 GMT", 0, false},                 // no such day
	} {
		got, ok := httpbreaker.ParseRetryAfter(tc.in, now)
		require.Equal(t, tc.ok, ok, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "", "Tue, 01 Dec 2026 12:01:30 GMT", "-0", "1e9"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := httpbreaker.ParseRetryAfter(s, now)
		if ok != (d > 0) {
			t.Fatalf("%q: %v %v: a hint is positive exactly when reported", s, d, ok)
		}
	})
}
