package main

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	f, err := os.Open("testdata/sample-mix.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "1in10"}; !slices.Equal(m.failures, want) {
		t.Errorf("failures %v, want %v", m.failures, want)
	}
	if want := []string{"count100", "time10"}; !slices.Equal(m.windows, want) {
		t.Errorf("windows %v, want %v", m.windows, want)
	}
	// failsafe-exec keeps its dash; the FAIL line and the other
	// benchmark are not results of the matrix.
	if want := []string{"lockfree", "mutex", "failsafe-exec"}; !slices.Equal(m.impls, want) {
		t.Errorf("impls %v, want %v", m.impls, want)
	}
	if want := []int{1, 2}; !slices.Equal(m.cpus, want) {
		t.Errorf("cpus %v, want %v", m.cpus, want)
	}
	for _, tc := range []struct {
		c    cell
		want float64
	}{
		{cell{"0", "count100", "lockfree", 1}, 20}, // odd count: the middle one
		{cell{"0", "count100", "lockfree", 2}, 13}, // even count: the mean of the middle two
		{cell{"1in10", "time10", "failsafe-exec", 2}, 1500},
	} {
		if got, ok := m.median(tc.c); !ok || got != tc.want {
			t.Errorf("median of %+v = %v, %v; want %v", tc.c, got, ok, tc.want)
		}
	}
	if _, ok := m.median(cell{"0", "time10", "lockfree", 1}); ok {
		t.Error("a cell the file lacks has a median")
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"", // no results
		"BenchmarkMix/failures=0/impl=x 10 1 ns/op",           // no window=
		"BenchmarkMix/failures=0/window=w/impl=x 10 1 B/op",   // no ns/op
		"BenchmarkMix/failures=0/window=w/impl=x ten 1 ns/op", // iterations
		"BenchmarkMix/failures=0/window=w/impl=x 10 one ns/op",
	} {
		if _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	if err := run("testdata/sample-mix.txt", dir, "1in10"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mix-by-failures.png", "mix-by-cpu.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		f.Close()
	}
	if err := run("testdata/sample-mix.txt", dir, "1in1000"); err == nil {
		t.Error("a failure rate the file lacks is no error")
	}
}

func TestLogTicks(t *testing.T) {
	var labels []string
	seen := map[float64]bool{}
	for _, tk := range (logTicks{}).Ticks(15, 300) {
		if seen[tk.Value] {
			t.Errorf("two ticks at %v", tk.Value)
		}
		seen[tk.Value] = true
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"10", "20", "50", "100", "200", "500", "1000"}; !slices.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
}

// Two cells whose samples split between two speeds, and one round in which
// the speed changed between them: time10's median lands in the fast speed
// and time300's in the slow one, so the ratio of the medians reads 2.1,
// while the pairs of the same round read 1.05 but for that one round.
func TestTargetsPairRounds(t *testing.T) {
	m := &matrix{samples: map[cell][]float64{}}
	const fast, slow = 50.0, 100.0
	t10 := []float64{fast, fast, fast, slow, slow}
	t300 := []float64{1.05 * fast, 1.05 * fast, 1.05 * slow, 1.05 * slow, 1.05 * slow}
	for i := range t10 {
		m.add(cell{"1in10", "time10", "lockfree", 1}, t10[i])
		m.add(cell{"1in10", "time300", "lockfree", 1}, t300[i])
	}
	rs := m.targets()
	if len(rs) != 1 {
		t.Fatalf("targets %+v, want time300 / time10 alone", rs)
	}
	if r := rs[0]; math.Abs(r.pairs-1.05) > 1e-9 || math.Abs(r.ofMedians-2.1) > 1e-9 {
		t.Errorf("paired %v, of medians %v; want 1.05 and 2.1", r.pairs, r.ofMedians)
	}
	var out strings.Builder
	printTargets(&out, rs)
	if want := "| time300 / time10, failures=1in10, -cpu 1 | 1.15 | 2.100 **over** | 1.050 |"; !strings.Contains(out.String(), want) {
		t.Errorf("table:\n%s\nwant the row %s", out.String(), want)
	}
}
