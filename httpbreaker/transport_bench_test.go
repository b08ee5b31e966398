package httpbreaker_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/httpbreaker"
)

// BenchmarkRoundTrip is the Transport's own cost per request: the key, the
// registry's lookup, the permit and the outcome, over a base transport
// that answers at once with one shared response.
func BenchmarkRoundTrip(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
	base := roundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	for _, bc := range []struct {
		name, url string
		bound     int
	}{
		{"host=canonical/bounds=default", "http://api.example.com:8080/v1", 0},
		{"host=canonical/bounds=none", "http://api.example.com:8080/v1", httpbreaker.NoLimit},
		{"host=to-normalize/bounds=default", "http://API.Example.com.:80/v1", 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr, err := httpbreaker.New(httpbreaker.Options{
				Config: core.Config{WindowSize: 100, FailureRateThreshold: 50}, Base: base,
				MaxBreakers: bc.bound, IdleAfter: time.Duration(bc.bound),
			})
			if err != nil {
				b.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodGet, bc.url, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tr.RoundTrip(req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkHostKey(b *testing.B) {
	for _, bc := range []struct{ name, url string }{
		{"host=canonical", "http://api.example.com:8080/v1"},
		{"host=to-normalize", "http://API.Example.com.:80/v1"},
		{"host=ipv4", "http://10.1.2.3:8080/v1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, err := http.NewRequest(http.MethodGet, bc.url, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				httpbreaker.HostKey(req)
			}
		})
	}
}
