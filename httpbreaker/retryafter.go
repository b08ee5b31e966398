package httpbreaker

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfterSeconds keeps a delay-seconds value inside time.Duration;
// longer asks are cut to it (and Config.MaxRetryAfter cuts further).
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter parses a Retry-After header value in either form of RFC
// 9110 section 10.2.3: delay-seconds (a non-negative decimal integer) or
// an HTTP-date, which is measured from now. It reports false for an empty
// or malformed value, and for a date at or before now or a delay of 0
// (no wait: no hint). Surrounding spaces are ignored; a delay too long for
// a time.Duration is cut to the longest one. It never panics.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil && !isRange(err) {
			return 0, false
		}
		if secs == 0 {
			return 0, false
		}
		return time.Duration(min(secs, uint64(maxRetryAfterSeconds))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := at.Sub(now); d > 0 {
		return d, true
	}
	return 0, false
}

// isRange reports whether a strconv error is only that the digits exceed
// 64 bits (the value is then cut, not refused).
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
