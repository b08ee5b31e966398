package httpbreaker

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/casbreaker/casbreaker/core"
	"github.com/casbreaker/casbreaker/registry"
)

// watchedBody is a response body whose outcome is recorded when it ends
// (Options.RecordBodyErrors): at the first read error, io.EOF or Close,
// once.
type watchedBody struct {
	io.ReadCloser
	t    *Transport
	b    *registry.Breaker
	p    core.Permit
	req  *http.Request
	resp *http.Response
	once sync.Once
}

func (w *watchedBody) Read(buf []byte) (int, error) {
	n, err := w.ReadCloser.Read(buf)
	if errors.Is(err, io.EOF) {
		w.finish(core.Success)
	} else if err != nil {
		w.once.Do(func() {
			o := core.Ignored // if the classifier panics, as on the headers' path
			defer func() { w.t.record(w.b, w.p, o, nil) }()
			o = w.t.classify(w.req, w.resp, err)
		})
	}
	return n, err
}

// Close records a success if nothing was recorded yet: the headers were
// good and no read failed.
func (w *watchedBody) Close() error {
	w.finish(core.Success)
	return w.ReadCloser.Close()
}

func (w *watchedBody) finish(o core.Outcome) {
	w.once.Do(func() { w.t.record(w.b, w.p, o, nil) })
}
