package httpbreaker_test

import (
	"math"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/httpbreaker"
)

// longest is the longest delay ParseRetryAfter returns: whole seconds.
const longest = time.Duration(math.MaxInt64 / int64(time.Second) * int64(time.Second))

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"\t0005", 5 * time.Second, true},
		{"0", 0, false},
		{"000", 0, false},
		{"", 0, false},
		{"  ", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"5 5", 0, false},
		{"\u00a05", 0, false}, // a no-break space is not whitespace in a header
		{"soon", 0, false},
		{"9223372036", longest, true},
		{"9223372037", longest, true},
		{"99999999999999999999999", longest, true},
		{"99999999999999999999999x", 0, false},
		{"1x", 0, false},
		{"Tue, 01 Dec 2026 12:01:30 GMT", 90 * time.Second, true},   // IMF-fixdate
		{"Tuesday, 01-Dec-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Tue Dec  1 12:00:20 2026", 20 * time.Second, true},        // asctime
		{"Tue, 01 Dec 2026 11:59:00 GMT", 0, false},                 // past
		{"Tue, 01 Dec 2026 12:00:00 GMT", 0, false},                 // now
		{"Tue, 32 Dec 2026 12:00:00 GMT", 0, false},                 // no such day
		{"Mon, 01 Dec 2026 12:01:30 GMT", 0, false},                 // not a Monday
		{"Tue, 01 Dec 2026 12:01:30.5 GMT", 0, false},               // a fraction
		{"Tue, 01 Dec 2026 13:1:30 GMT", 0, false},                  // a one-digit minute
		{"Tue, 01 Dec 2026 1:01:30 GMT", 0, false},                  // a one-digit hour
		{"Tue, 01 Dec 2026 12:01:30 UTC", 0, false},                 // not GMT
		{"Tuesday, 01-Dec-26 12:00:10 PST", 0, false},               // not GMT
		{"Tue, 01 Dec 2026 12:01:30 GMTx", 0, false},
		{"120 Tue, 01 Dec 2026 12:01:30 GMT", 0, false},
	} {
		got, ok := httpbreaker.ParseRetryAfter(tc.in, now)
		require.Equal(t, tc.ok, ok, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
}

// Reading delay-seconds allocates nothing (a 429 storm reads many).
func TestParseRetryAfterAllocatesNothing(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	require.Zero(t, testing.AllocsPerRun(100, func() { httpbreaker.ParseRetryAfter("120", now) }))
}

// Any header value: a hint is positive exactly when reported; digits
// alone are delay-seconds, their value cut to the longest delay; anything
// else is a hint only if it is an HTTP-date exactly as one of its three
// forms writes it, after now, and then the wait until it (cut to the
// longest time.Duration, as time.Time.Sub cuts).
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "", "Tue, 01 Dec 2026 12:01:30 GMT", "-0", "1e9", "99999999999999999999999x", "Tuesday, 01-Dec-26 12:00:10 GMT", "Tue Dec  1 12:00:20 2026", "Tue, 01 Dec 2026 12:01:30.5 GMT"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	layouts := []string{http.TimeFormat, "Monday, 02-Jan-06 15:04:05 GMT", time.ANSIC}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := httpbreaker.ParseRetryAfter(s, now)
		if ok != (d > 0) {
			t.Fatalf("%q: %v %v: a hint is positive exactly when reported", s, d, ok)
		}
		v := strings.Trim(s, " \t")
		if v != "" && strings.Trim(v, "0123456789") == "" {
			n, _ := new(big.Int).SetString(v, 10)
			if n.Cmp(big.NewInt(int64(longest/time.Second))) > 0 {
				n.SetInt64(int64(longest / time.Second))
			}
			if want := time.Duration(n.Int64()) * time.Second; d != want {
				t.Fatalf("%q: %v, want %v", s, d, want)
			}
			return
		}
		var want time.Duration // the date's wait, if v is exactly an HTTP-date
		for _, layout := range layouts {
			if at, err := time.Parse(layout, v); err == nil && at.Format(layout) == v {
				want = max(at.Sub(now), 0)
			}
		}
		if d != want {
			t.Fatalf("%q: hint %v, want %v", s, d, want)
		}
	})
}
