package main

import (
	"bytes"
	"compress/gzip"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
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
	if len(m.floors) != 0 {
		t.Errorf("floors %v in a file without any", m.floors)
	}
}

// The floors of both kinds, at both -cpu, in round order, apart from the
// BenchmarkMix cells; the peers' module adds an implementation.
func TestParseFloors(t *testing.T) {
	f, err := os.Open("testdata/targets-mix.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"lockfree", "mutex", "gobreaker"}; !slices.Equal(m.impls, want) {
		t.Errorf("impls %v, want %v", m.impls, want)
	}
	for _, tc := range []struct {
		f    floor
		want []float64
	}{
		{clockadd(1), []float64{50, 60, 45}},
		{clockadd(2), []float64{30, 36, 27}},
		{floor{parallel: true, op: "twoloads", cpu: 2}, []float64{0.9, 1.08, 0.81}},
		{floor{parallel: false, op: "clock", cpu: 1}, []float64{30, 36, 27}},
		{floor{parallel: false, op: "clock", cpu: 2}, []float64{31, 37.2, 27.9}},
	} {
		if got := m.floors[tc.f]; !slices.Equal(got, tc.want) {
			t.Errorf("floor %+v: %v, want %v", tc.f, got, tc.want)
		}
	}
	if n := len(m.floors); n != 10 {
		t.Errorf("%d floors, want 10: %v", n, m.floors)
	}
	if got := m.samples[cell{"1in10", "time300", "lockfree", 2}]; !slices.Equal(got, []float64{44, 52.8, 39.6}) {
		t.Errorf("a cell next to the floors: %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	// A good Mix line first, so that a floor line's error is its own and
	// not the file's lack of BenchmarkMix results.
	const good = "BenchmarkMix/failures=0/window=w/impl=x 10 1 ns/op\n"
	if _, err := parse(strings.NewReader(good + "BenchmarkFloorParallel/op=clockadd-2 10 1 ns/op\n")); err != nil {
		t.Fatalf("a good file: %v", err)
	}
	for _, in := range []string{
		"", // no results
		"BenchmarkFloorParallel/op=clockadd 10 1 ns/op",       // floors, but no Mix results
		"BenchmarkMix/failures=0/impl=x 10 1 ns/op",           // no window=
		"BenchmarkMix/failures=0/window=w/impl=x 10 1 B/op",   // no ns/op
		"BenchmarkMix/failures=0/window=w/impl=x ten 1 ns/op", // iterations
		"BenchmarkMix/failures=0/window=w/impl=x 10 one ns/op",
		good + "BenchmarkFloor/noop 10 1 ns/op",                    // not op=
		good + "BenchmarkFloorParallel/op= 10 1 ns/op",             // no op
		good + "BenchmarkFloorParallel/op=a/impl=b 10 1 ns/op",     // more than op=
		good + "BenchmarkFloorParallel/op=clockadd 10 1 B/op",      // no ns/op
		good + "BenchmarkFloor/op=clock 10 one ns/op",              // ns/op
		good + "BenchmarkFloorParallel/op=clockadd-2 10 1 ns/op 3", // odd fields
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
	// Without a floor in the file, the floor rows are left out with a note.
	rs := m.targets()
	if len(rs.rows) != 1 {
		t.Fatalf("targets %+v, want time300 / time10 alone", rs)
	}
	if r := rs.rows[0]; math.Abs(r.pairs-1.05) > 1e-9 || math.Abs(r.ofMedians-2.1) > 1e-9 {
		t.Errorf("paired %v, of medians %v; want 1.05 and 2.1", r.pairs, r.ofMedians)
	}
	var out strings.Builder
	printTargets(&out, rs)
	if want := "| time300 / time10, failures=1in10, -cpu 1 | 1.15 | 2.100 **over** | 1.050 |"; !strings.Contains(out.String(), want) {
		t.Errorf("table:\n%s\nwant the row %s", out.String(), want)
	}
}

// A time-window cell against its floor pairs the k-th sample of each, as
// two cells do: the floor's median lands in the slow speed and the cell's
// in the fast one, so the ratio of the medians reads 0.6, while every
// round but one reads 1.2.
func TestTargetsFloorPairsRounds(t *testing.T) {
	m := &matrix{samples: map[cell][]float64{}, floors: map[floor][]float64{}}
	const fast, slow = 50.0, 100.0
	fl := []float64{fast, slow, slow}
	for _, ns := range []float64{1.2 * fast, 1.2 * slow, 0.6 * slow} {
		m.add(cell{"0", "time60", "lockfree", 1}, ns)
	}
	m.floors[clockadd(1)] = fl
	m.floors[clockadd(2)] = []float64{1, 1, 1} // not the cell's -cpu
	rs := m.targets()
	if len(rs.rows) != 1 || len(rs.notes) != 0 {
		t.Fatalf("targets %+v, want the floor row alone", rs)
	}
	r := rs.rows[0]
	if want := "lockfree / floor clockadd, failures=0, window=time60, -cpu 1"; r.name != want || r.bound != 1.3 {
		t.Errorf("row %q at most %v, want %q at most 1.3", r.name, r.bound, want)
	}
	if math.Abs(r.pairs-1.2) > 1e-9 || math.Abs(r.ofMedians-0.6) > 1e-9 {
		t.Errorf("paired %v, of medians %v; want 1.2 and 0.6", r.pairs, r.ofMedians)
	}
	// A floor with a sample fewer (a round in which it failed) cannot
	// be paired: the row is left out, and the note says why.
	m.floors[clockadd(1)] = fl[:2]
	rs = m.targets()
	if len(rs.rows) != 0 || len(rs.notes) != 1 || !strings.Contains(rs.notes[0], "3 samples against 2") {
		t.Errorf("targets %+v, want no row and a note on the counts", rs)
	}
}

// Every kind of target on a file of three rounds in which lock-free is
// slower than the mutex in one cell, over its floor in two and slower than
// gobreaker in one: each row's value and bound, and the line counting the
// four rows over.
func TestTargetsFile(t *testing.T) {
	var out strings.Builder
	if err := runTargets(&out, "testdata/targets-mix.txt"); err != nil || !strings.Contains(out.String(), "\n4 of 21 targets over") {
		t.Errorf("error %v, want none and a line 4 of 21 targets over in\n%s", err, out.String())
	}
	for _, row := range []string{
		"| geomean lockfree / mutex over 6 cells, -cpu 1 | 0.85 | 0.617 | 0.617 |",
		"| geomean lockfree / mutex over 6 cells, -cpu 2 | 0.35 | 0.251 | 0.251 |",
		"| lockfree / mutex, failures=0, window=count100, -cpu 1 | 1.00 | 0.250 | 0.250 |",
		"| lockfree / mutex, failures=1in10, window=count100, -cpu 1 | 1.00 | 1.111 **over** | 1.111 **over** |",
		"| lockfree / floor clockadd, failures=0, window=time300, -cpu 1 | 1.30 | 1.260 | 1.260 |",
		"| lockfree / floor clockadd, failures=1in10, window=time10, -cpu 1 | 1.30 | 1.400 **over** | 1.400 **over** |",
		"| time300 / time10, failures=1in10, -cpu 2 | 1.15 | 1.100 | 1.100 |",
		"| clean time300, -cpu 2 / -cpu 1 | 0.60 | 0.500 | 0.500 |",
		"| geomean lockfree / gobreaker over its 4 cells, -cpu 1 | - | 0.472 | 0.472 |",
		"| largest lockfree / gobreaker of its 4 cells, -cpu 1 (at 0 time10) | 1.00 | 1.200 **over** | 1.200 **over** |",
		"| largest lockfree / gobreaker of its 4 cells, -cpu 2 (at 1in10 time300) | 1.00 | 0.220 | 0.220 |",
	} {
		if !strings.Contains(out.String(), row+"\n") {
			t.Errorf("no row %s in\n%s", row, out.String())
		}
	}
	for _, absent := range []string{
		"lockfree / mutex, failures=0, window=count100, -cpu 2", // cells only at -cpu 1
		"floor clockadd, failures=0, window=count100",           // time windows only
		"lockfree / gobreaker, failures",                        // the peer's cells only in its two rows
		"left out",
	} {
		if strings.Contains(out.String(), absent) {
			t.Errorf("%q in\n%s", absent, out.String())
		}
	}
}

// A file without floors (and with cells whose rounds cannot be paired)
// prints the rows it can, a note for each it cannot, and counts the one
// row over its bound.
func TestTargetsFileWithoutFloors(t *testing.T) {
	var out strings.Builder
	if err := runTargets(&out, "testdata/sample-mix.txt"); err != nil || !strings.Contains(out.String(), "\n1 of 5 targets over") {
		t.Errorf("error %v, want none and a line 1 of 5 targets over in\n%s", err, out.String())
	}
	for _, want := range []string{
		"| geomean lockfree / mutex over 1 cells, -cpu 2 | 0.35 | 0.562 **over** | 0.562 **over** |",
		"| largest lockfree / failsafe-exec of its 1 cells, -cpu 2 (at 1in10 time10) | 1.00 | 0.030 | 0.030 |",
		"- no BenchmarkFloorParallel/op=clockadd at -cpu 1: the time windows' floor targets are left out",
		"- lockfree / mutex, failures=0, window=count100, -cpu 1: 3 samples against 1, so the rounds cannot be paired; left out",
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("no line %s in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "| lockfree / floor") {
		t.Errorf("a floor row without a floor:\n%s", out.String())
	}
}

// A geomean at a -cpu without a bound is printed with "-" and is never
// over; a row met by one reading and missed by the other is over.
func TestTargetsBounds(t *testing.T) {
	m := &matrix{samples: map[cell][]float64{}, floors: map[floor][]float64{}}
	m.add(cell{"0", "count100", "lockfree", 4}, 100)
	m.add(cell{"0", "count100", "mutex", 4}, 10)
	rs := m.targets()
	if len(rs.rows) != 1 || rs.rows[0].bound != 0 || rs.rows[0].over() {
		t.Fatalf("targets %+v, want one unbounded row", rs)
	}
	var out strings.Builder
	printTargets(&out, rs)
	if want := "| geomean lockfree / mutex over 1 cells, -cpu 4 | - | 10.000 | 10.000 |\n"; !strings.Contains(out.String(), want) {
		t.Errorf("table:\n%s\nwant the row %s", out.String(), want)
	}
	if over, bounded := rs.overCount(); over != 0 || bounded != 0 {
		t.Errorf("%d of %d over, want 0 of 0", over, bounded)
	}
	if !(ratio{ofMedians: 0.9, pairs: 1.1, bound: 1}).over() || !(ratio{ofMedians: 1.1, pairs: 0.9, bound: 1}).over() {
		t.Error("a row over its bound by one reading is not over")
	}
	if (ratio{ofMedians: 1, pairs: 1, bound: 1}).over() {
		t.Error("a row at its bound is over")
	}
}

// TestOutage draws the committed recording of ops' end-to-end test, and
// refuses one that lacks a query.
func TestOutage(t *testing.T) {
	out := t.TempDir()
	if err := runOutage("../../docs/figures/outage-prometheus.json", out); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(out, outageFigure)); err != nil || fi.Size() == 0 {
		t.Fatalf("no figure: %v", err)
	}
	bad := filepath.Join(out, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"start": 1, "queries": {"state": {"result": []}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runOutage(bad, out); err == nil || !strings.Contains(err.Error(), `no query "alert"`) {
		t.Fatalf("runOutage of a recording without the alert: %v", err)
	}
}

// A compressed result, as bench/results keeps them, loads as the plain one.
func TestLoadReadsGzip(t *testing.T) {
	raw, err := os.ReadFile("testdata/sample-mix.txt")
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(t.TempDir(), "sample-mix.txt.gz")
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	if _, err := z.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gz, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, err := load("testdata/sample-mix.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := load(gz)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain, got) {
		t.Error("the gzipped result loads differently from the plain one")
	}
	if _, err := load(filepath.Join(t.TempDir(), "not-gzip.gz")); err == nil {
		t.Error("a missing file loads")
	}
}
