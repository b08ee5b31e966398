package httpbreaker

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// maxRetryAfterSeconds keeps a delay-seconds value inside time.Duration;
// longer asks are cut to it (and Config.MaxRetryAfter cuts further).
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// httpDateLayouts are the three forms of an HTTP-date (RFC 9110 section
// 5.6.7): IMF-fixdate, which senders use, and the obsolete RFC 850 and
// asctime forms that recipients must accept. The RFC 850 form is
// time.RFC850 with its zone fixed to GMT, so that a date in another zone,
// which time.Parse would take, is refused.
var httpDateLayouts = [...]string{
	http.TimeFormat,
	"Monday, 02-Jan-06 15:04:05 GMT",
	time.ANSIC,
}

// ParseRetryAfter parses a Retry-After header value in either form of RFC
// 9110 section 10.2.3: delay-seconds (one or more decimal digits, nothing
// else) or an HTTP-date in one of its three forms, measured from now. It
// reports false for an empty or malformed value, and for a date at or
// before now or a delay of 0 (no wait: no hint). Spaces and tabs around
// the value are ignored. A date is taken only as it would be written:
// two-digit hours, minutes and seconds, the day of the week that the date
// falls on, GMT, no fraction of a second. A delay too long for a
// time.Duration (about 292 years, however many digits) is cut to the
// longest whole number of seconds that fits, and a date further ahead to
// the longest time.Duration, not refused: each is a valid ask for a very
// long wait, which the breaker cuts to Config.MaxRetryAfter anyway. It
// never panics and allocates nothing for delay-seconds.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if secs, ok := parseDelaySeconds(v); ok {
		return time.Duration(secs) * time.Second, secs > 0
	}
	for _, layout := range httpDateLayouts {
		if at, ok := parseHTTPDate(layout, v); ok {
			if d := at.Sub(now); d > 0 {
				return d, true
			}
			return 0, false
		}
	}
	return 0, false
}

// parseDelaySeconds parses v if it is only decimal digits, up to
// maxRetryAfterSeconds: a longer delay is cut to it.
func parseDelaySeconds(v string) (int64, bool) {
	var secs int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		// secs <= maxRetryAfterSeconds (about 9.2e9), so secs*10+9
		// cannot overflow.
		secs = min(secs*10+int64(c-'0'), maxRetryAfterSeconds)
	}
	return secs, true
}

// parseHTTPDate parses v in layout, and only if formatting the time back
// gives v: time.Parse alone takes one-digit hours, fractions of a second
// and any day of the week, none of which is an HTTP-date.
func parseHTTPDate(layout, v string) (time.Time, bool) {
	at, err := time.Parse(layout, v)
	if err != nil {
		return time.Time{}, false
	}
	var buf [40]byte
	return at, string(at.AppendFormat(buf[:0], layout)) == v
}
