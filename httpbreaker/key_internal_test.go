package httpbreaker

import (
	"net/url"
	"testing"
)

// isCanonical is a shortcut of appendHostKey: every host and port it
// takes as they are must be what appendHostKey writes. Tried on every
// string of up to 5 characters over an alphabet with each kind of byte
// that matters, under both default-port schemes.
func TestIsCanonicalAgreesWithAppendHostKey(t *testing.T) {
	const alphabet = "aZ0148.:-_%[]\xff"
	var s []byte
	var try func(n int)
	try = func(n int) {
		for _, scheme := range []string{"http", "https"} {
			hostport := string(s)
			if !isCanonical(scheme, hostport) {
				continue
			}
			u := &url.URL{Scheme: scheme, Host: hostport}
			if k := string(appendHostKey(nil, scheme, u.Hostname(), u.Port(), false)); k != hostport {
				t.Fatalf("%s %q: taken as canonical, but its key is %q", scheme, hostport, k)
			}
		}
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			s = append(s, alphabet[i])
			try(n - 1)
			s = s[:len(s)-1]
		}
	}
	try(5)
}
