// Command plot draws the figures of a `make bench-mix` result file (the raw
// `go test -bench` output of BenchmarkMix) as PNGs:
//
//   - mix-by-failures.png: median ns/op against the failure rate, one tile
//     per window and -cpu, one line per implementation;
//   - mix-by-cpu.png: median ns/op against -cpu at one failure rate, one
//     tile per window.
//
// `make bench-plot` runs it on the newest bench/results/*-mix.txt and writes
// into docs/figures/. It is a nested module so that gonum's plotting
// library never enters casbreaker's go.mod.
//
// With -targets it draws nothing and prints, as a Markdown table, the
// targets of the run (see targets): lock-free against the mutex per cell
// and as a geomean per -cpu, the time windows against their floor
// (BenchmarkFloorParallel/op=clockadd, from the same file), time300
// against time10, -cpu 2 against -cpu 1, and lock-free against each peer
// the file holds. Each is read as the ratio of the medians and as the
// median of the per-round ratios (see ratio). It exits 1 when a target is
// over its bound, after printing the table; `make bench-mix` prints it
// after benchstat's tables and fails then too.
//
// With -outage it draws outage-prometheus.png instead, from what
// Prometheus recorded of the outage demo in ops' end-to-end test (its
// -record file): the flaky breaker's state and its open-too-long alert,
// and its calls per second (`make ops-figure`).
//
// Usage:
//
//	go run . -in RESULT-mix.txt [-out DIR] [-failures RATE]
//	go run . -in RESULT-mix.txt -targets
//	go run . -outage RECORDING.json [-out DIR]
package main

import (
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
)

func main() {
	in := flag.String("in", "", "the bench-mix result file (required)")
	out := flag.String("out", "docs/figures", "the directory the PNGs go into")
	failures := flag.String("failures", "1in100", "the failure rate of mix-by-cpu.png")
	targets := flag.Bool("targets", false, "print the targets table instead of drawing")
	outage := flag.String("outage", "", "draw "+outageFigure+" from this recording of ops' end-to-end test instead")
	flag.Parse()
	if *outage != "" && *in == "" && flag.NArg() == 0 {
		if err := runOutage(*outage, *out); err != nil {
			fmt.Fprintln(os.Stderr, "plot:", err)
			os.Exit(1)
		}
		return
	}
	if *in == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	run := run
	if *targets {
		run = func(in, _, _ string) error { return runTargets(os.Stdout, in) }
	}
	if err := run(*in, *out, *failures); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

// load parses the result file in, gunzipping it when its name ends in
// .gz (bench/results keeps its runs compressed).
func load(in string) (*matrix, error) {
	f, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(in, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", in, err)
		}
		defer z.Close()
		r = z
	}
	m, err := parse(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", in, err)
	}
	return m, nil
}

func run(in, out, failures string) error {
	m, err := load(in)
	if err != nil {
		return err
	}
	if !slices.Contains(m.failures, failures) {
		return fmt.Errorf("%s has no failures=%s (it has %v)", in, failures, m.failures)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	lg, err := legend(m)
	if err != nil {
		return err
	}
	byF, err := byFailures(m)
	if err != nil {
		return err
	}
	byC, err := byCPU(m, failures)
	if err != nil {
		return err
	}
	for _, fig := range []struct {
		name  string
		tiles [][]*plot.Plot
	}{{"mix-by-failures.png", byF}, {"mix-by-cpu.png", byC}} {
		path := filepath.Join(out, fig.name)
		if err := save(fig.tiles, lg, path); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}

// runTargets prints the targets table of the result file in to w, and a
// last line counting the targets over their bound. A missed target is a
// result, not an error: the figures depend on the machine, and the run's
// file and tables are written either way; only a file it cannot read fails.
func runTargets(w io.Writer, in string) error {
	m, err := load(in)
	if err != nil {
		return err
	}
	t := m.targets()
	printTargets(w, t)
	over, bounded := t.overCount()
	fmt.Fprintf(w, "\n%d of %d targets over their bound (the rows marked **over**)\n", over, bounded)
	return nil
}
