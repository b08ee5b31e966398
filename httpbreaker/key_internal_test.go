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

// The shortcut takes the common forms, each kind of byte at its bounds
// included, and leaves the rest to the full path.
func TestIsCanonicalTakesTheCommonForm(t *testing.T) {
	for _, h := range []string{"a", "z", "0", "9", "az09-_.example", "api.example.com:8443", "10.0.0.1:8080", "x:1", "x:80", "x:443"} {
		if !isCanonical("ftp", h) {
			t.Errorf("%q not taken as canonical", h)
		}
	}
	for _, h := range []string{"", ".", "a.", "A", "a:", "a:080", "a:8o", ":80", "a:1:2", "[::1]", "ä", "a%25"} {
		if isCanonical("ftp", h) {
			t.Errorf("%q taken as canonical", h)
		}
	}
	if isCanonical("HTTP", "a:80") || isCanonical("https", "a:443") {
		t.Error("a default port taken as canonical")
	}
}
