package ops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// binary returns the path of prometheus or promtool. Without it the test
// fails, never skips: make test installs both (scripts/prometheus.sh), so
// a missing one is a broken setup, not an optional check.
func binary(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH (%v): run `bash scripts/prometheus.sh` from the repository's root, "+
			"which installs Debian's prometheus package (make test runs it), or put prometheus and promtool on PATH", name, err)
	}
	return path
}

// logBuffer collects a process' output for the failure messages, safe to
// write from the goroutine that drains the pipe.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is a command the test started, with its output.
type process struct {
	cmd    *exec.Cmd
	out    logBuffer
	done   chan struct{} // closed when the process has exited and its output is drained
	status error         // cmd.Wait's, once done is closed
}

// start starts cmd with its stdout and stderr read line by line into the
// process' output and handed to each (nil for none), and kills it at the
// end of the test if it is still running, waiting for it to be gone.
func start(t *testing.T, cmd *exec.Cmd, each func(line string)) *process {
	t.Helper()
	p := &process{cmd: cmd, done: make(chan struct{})}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			fmt.Fprintln(&p.out, sc.Text())
			if each != nil {
				each(sc.Text())
			}
		}
		_, _ = io.Copy(&p.out, r) // a line too long for the scanner
	}()
	go func() {
		p.status = cmd.Wait()
		w.Close()
		<-drained
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // an error only says it has exited already
		<-p.done
	})
	return p
}

// wait waits for the process to exit, or for ctx.
func (p *process) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.status
	case <-ctx.Done():
		return fmt.Errorf("%s still running: %w", p.cmd.Path, ctx.Err())
	}
}

// listeningOn finds the address in the line where Prometheus says which
// port it took (it is told 127.0.0.1:0).
var listeningOn = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

// startPrometheus starts prometheus with config (the file's text; its
// paths relative to dir, where its data goes too) on a free port of
// 127.0.0.1, waits until it is ready, and returns its URL.
func startPrometheus(ctx context.Context, t *testing.T, dir, config string) (string, *process) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	cmd := exec.CommandContext(ctx, binary(t, "prometheus"),
		"--config.file=prometheus.yml",
		"--storage.tsdb.path=data",
		"--web.listen-address=127.0.0.1:0",
		"--log.level=info")
	cmd.Dir = dir
	p := start(t, cmd, func(line string) {
		if m := listeningOn.FindStringSubmatch(line); m != nil {
			select {
			case addr <- m[1]:
			default:
			}
		}
	})
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case <-p.done:
		t.Fatalf("prometheus exited before it listened: %v\n%s", p.status, p.out.String())
	case <-ctx.Done():
		t.Fatalf("prometheus did not say where it listens: %v\n%s", ctx.Err(), p.out.String())
	}
	poll(ctx, t, "prometheus to be ready", func() (bool, error) {
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("/-/ready: %s", resp.Status)
	}, p)
	return url, p
}

// poll calls cond every 100 ms until it reports true, failing the test
// with what, cond's last error and the output of the processes ps when
// ctx ends first, or at once when Prometheus refuses a query as bad.
func poll(ctx context.Context, t *testing.T, what string, cond func() (bool, error), ps ...*process) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return
		}
		var apiErr *v1.Error
		if errors.As(err, &apiErr) && apiErr.Type == v1.ErrBadData {
			t.Fatalf("waiting for %s: a query Prometheus refuses: %v", what, err) // no use waiting
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			msg := fmt.Sprintf("waiting for %s: %v (last: %v)", what, ctx.Err(), err)
			for _, p := range ps {
				msg += fmt.Sprintf("\n--- %s:\n%s", filepath.Base(p.cmd.Path), p.out.String())
			}
			t.Fatal(msg)
		}
	}
}
