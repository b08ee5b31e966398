package httpbreaker_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
)

// ok200 is a base transport that answers 200 to everything, sending
// nothing: for tests of keys and bounds, with URLs that resolve nowhere.
var ok200 = roundTripperFunc(func(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
})

// names sends one request to each URL through a Transport with the
// default key and returns the names of the breakers it made.
func names(t *testing.T, urls ...string) []string {
	t.Helper()
	tr, err := httpbreaker.New(httpbreaker.Options{Config: core.Config{Name: "api", ConsecutiveFailures: 1}, Base: ok200})
	require.NoError(t, err)
	for _, u := range urls {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err, u)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, u)
		resp.Body.Close()
	}
	var out []string
	for _, b := range tr.Registry().All() {
		out = append(out, b.Settings().Name)
	}
	return out
}

// Every spelling of one server shares its breaker: case, the scheme's
// default port written out or with leading zeros, an empty port and a
// trailing dot do not make another.
func TestOneServerOneBreaker(t *testing.T) {
	require.ElementsMatch(t, []string{"api/example.com"}, names(t,
		"http://example.com/", "http://Example.COM:80/", "http://example.com./", "http://EXAMPLE.com.:0080/a",
		"http://example.com:/", "https://example.com/", "https://example.com:443/", "HTTPS://Example.Com.:443/"))
	require.ElementsMatch(t, []string{"api/[::1]", "api/[::1]:8080", "api/127.0.0.1:8080"}, names(t,
		"http://[::1]/", "http://[0:0::1]:80/", "http://[::1]:8080/", "http://[0::0001]:08080/", "http://127.0.0.1:8080/"))
}

// Hosts that a client sends to different servers get different breakers,
// even where Unicode's lower case would make them one: by IDNA, İ.example
// is xn--i-9bb.example, not i.example, and ẞ.example is ss.example, not
// ß.example. A failing host must not trip another's breaker.
func TestTwoServersNeverShareABreaker(t *testing.T) {
	require.ElementsMatch(t, []string{"api/i.example", "api/İ.example", "api/ß.example", "api/ẞ.example"}, names(t,
		"http://i.example/", "http://%C4%B0.example/", "http://%C3%9F.example/", "http://%E1%BA%9E.example/"))
}

// A host that is not valid UTF-8 (or not printable) still makes a
// breaker name that is: a metric label can carry it.
func TestKeyOfABadHostIsValidUTF8(t *testing.T) {
	for _, u := range []string{"http://%ff.example/", "http://%c2%85.example/", "http://x%fe%ff/"} {
		for _, name := range names(t, u) {
			require.True(t, utf8.ValidString(name), "%s: name %q", u, name)
			for _, r := range name {
				require.True(t, unicode.IsPrint(r), "%s: name %q has %U", u, name, r)
			}
		}
	}
}

func TestHostKey(t *testing.T) {
	for _, tc := range []struct{ url, key string }{
		{"http://example.com/", "example.com"},
		{"http://Example.COM:80/", "example.com"},
		{"http://example.com./", "example.com"},
		{"http://example.com:/", "example.com"},
		{"http://example.com:443/", "example.com:443"},
		{"https://example.com:80/", "example.com:80"},
		{"https://example.com:8443/", "example.com:8443"},
		{"http://example.com:0/", "example.com:0"},
		{"http://example.com:000/", "example.com:0"},
		{"ftp://example.com:21/", "example.com:21"},
		{"http://./", "."},
		{"http://.../", "..."},
		{"http://example.com../", "example.com"},
		{"http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://127.0.0.1./", "127.0.0.1"},
		{"http://[2001:DB8:0:0::1]:80/", "[2001:db8::1]"},
		{"http://[::ffff:10.0.0.1]/", "[::ffff:10.0.0.1]"},
		{"http://[fe80::1%25en0]:8080/", "[fe80::1%25en0]:8080"},
		{"http://[fe80::1%25En0]/", "[fe80::1%25En0]"}, // a zone is a name, case and all
		{"http://%ff.example/", "%FF.example"},
		{"http://%25ff.example/", "%25ff.example"}, // a '%' of the host is escaped too: no clash with the line above
		{"http://%C3%84.Example/", "Ä.example"},    // only ASCII is lowered: see the next two
		{"http://%C4%B0.example/", "İ.example"},    // xn--i-9bb.example to a client, not i.example
		{"http://%E1%BA%9E.example/", "ẞ.example"}, // ss.example to a client, not ß.example
		{"http://ä.example/", "ä.example"},
		{"http://%c2%85.example/", "%C2%85.example"},
		{"http://%ef%bf%bd.example/", "\ufffd.example"}, // a real U+FFFD is printable
		{"http://%80.example/", "%80.example"},
		{"http://AZaz09-_.example/", "azaz09-_.example"},
		{"http://127.000.0.1/", "127.000.0.1"}, // not an address netip takes: a name
	} {
		u, err := url.Parse(tc.url)
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.key, httpbreaker.HostKey(&http.Request{URL: u}), tc.url)
	}
	require.Empty(t, httpbreaker.HostKey(&http.Request{}), "no URL")
	require.Equal(t, "%00[a%0A]", httpbreaker.HostKey(&http.Request{URL: &url.URL{Host: "\x00[A\n]"}}), "a Host set by hand")
	require.Equal(t, "[not-an-ip]:80", httpbreaker.HostKey(&http.Request{URL: &url.URL{Scheme: "https", Host: "[NOT-an-IP]:80"}}))
	require.Equal(t, "a b~", httpbreaker.HostKey(&http.Request{URL: &url.URL{Host: "A b~"}}), "space and tilde are printable")
	require.Equal(t, "[fe80::1%25Ä]", httpbreaker.HostKey(&http.Request{URL: &url.URL{Host: "[fe80::1%Ä]"}}), "a zone keeps its case")
}

// The key of a host already in canonical form is the URL's own string:
// nothing is allocated per request.
func TestHostKeyAllocatesNothingWhenCanonical(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com:8443/v1", nil)
	require.NoError(t, err)
	var key string
	require.Zero(t, testing.AllocsPerRun(100, func() { key = httpbreaker.HostKey(req) }))
	require.Equal(t, "api.example.com:8443", key)
}

// Any URL: the key is printable UTF-8, and, unless the host has a colon
// outside brackets, it is a fixed point: the URL written with the key as
// its host has the same key.
func FuzzHostKey(f *testing.F) {
	for _, s := range []string{"http://Example.COM:80/", "http://%ff.example/", "https://[fe80::1%25en0]:0443/", "http://%25ff./", "http://%c2%85:1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		key := httpbreaker.HostKey(&http.Request{URL: u})
		if !utf8.ValidString(key) {
			t.Fatalf("%q: key %q is not UTF-8", s, key)
		}
		for _, r := range key {
			if !unicode.IsPrint(r) {
				t.Fatalf("%q: key %q has %U", s, key, r)
			}
		}
		if strings.Contains(u.Hostname(), ":") && !strings.HasPrefix(u.Host, "[") {
			return // a colon outside brackets: host and port split anyhow
		}
		again, err := url.Parse(u.Scheme + "://" + key + "/")
		if err != nil || key == "" {
			return
		}
		if k := httpbreaker.HostKey(&http.Request{URL: again}); k != key {
			t.Fatalf("%q: key %q, but the URL with that host has key %q", s, key, k)
		}
	})
}
