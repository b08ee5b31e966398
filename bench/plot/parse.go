package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// cell is one benchmark of the matrix at one -cpu: the keys of
// BenchmarkMix/failures=F/window=W/impl=I-CPU.
type cell struct {
	failures, window, impl string
	cpu                    int
}

// floor is one floor benchmark at one -cpu: BenchmarkFloor/op=O-CPU
// (parallel false) or BenchmarkFloorParallel/op=O-CPU (parallel true).
type floor struct {
	parallel bool
	op       string
	cpu      int
}

// matrix is the ns/op of every BenchmarkMix line of a result file, by cell,
// and of every floor line. The key values keep the order in which they
// first appear in the file, which is the order the benchmarks ran in
// (MixRates, MixWindows, then the implementations: casbreaker's before the
// peers), so the figures read in the same order as the benchstat tables.
// Each slice of samples is in the file's order: with bench/run.sh's
// rounds, the k-th sample of every cell and floor is from round k.
type matrix struct {
	failures, windows, impls []string
	cpus                     []int // ascending
	samples                  map[cell][]float64
	floors                   map[floor][]float64
}

// The name prefixes of the lines parse reads; BenchmarkFloor/ does not
// match a BenchmarkFloorParallel line.
const (
	mixPrefix           = "BenchmarkMix/"
	floorPrefix         = "BenchmarkFloor/"
	floorParallelPrefix = "BenchmarkFloorParallel/"
)

// parse reads the standard `go test -bench` format: lines other than
// BenchmarkMix, BenchmarkFloor and BenchmarkFloorParallel results
// (headers, the peers' other benchmarks, PASS, FAIL and SKIP lines) are
// skipped, and one of those it cannot read is an error, so that a garbled
// file does not make a quietly wrong figure or target. A file without
// floors is read (the targets against a floor are then left out); one
// without BenchmarkMix results is an error.
func parse(r io.Reader) (*matrix, error) {
	m := &matrix{samples: map[cell][]float64{}, floors: map[floor][]float64{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		var err error
		switch {
		case strings.HasPrefix(line, mixPrefix):
			err = m.addMixLine(line)
		case strings.HasPrefix(line, floorPrefix), strings.HasPrefix(line, floorParallelPrefix):
			err = m.addFloorLine(line)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(m.samples) == 0 {
		return nil, fmt.Errorf("no BenchmarkMix results")
	}
	sort.Ints(m.cpus)
	return m, nil
}

func (m *matrix) addMixLine(line string) error {
	name, ns, err := parseLine(line)
	if err != nil {
		return err
	}
	c, err := parseName(name)
	if err != nil {
		return err
	}
	m.add(c, ns)
	return nil
}

func (m *matrix) addFloorLine(line string) error {
	name, ns, err := parseLine(line)
	if err != nil {
		return err
	}
	f, err := parseFloorName(name)
	if err != nil {
		return err
	}
	m.floors[f] = append(m.floors[f], ns)
	return nil
}

func (m *matrix) add(c cell, ns float64) {
	appendNew := func(s []string, v string) []string {
		if slices.Contains(s, v) {
			return s
		}
		return append(s, v)
	}
	m.failures = appendNew(m.failures, c.failures)
	m.windows = appendNew(m.windows, c.window)
	m.impls = appendNew(m.impls, c.impl)
	if !slices.Contains(m.cpus, c.cpu) {
		m.cpus = append(m.cpus, c.cpu)
	}
	m.samples[c] = append(m.samples[c], ns)
}

// parseLine reads one result line: the name, the iteration count, then
// value-unit pairs, of which it keeps ns/op.
func parseLine(line string) (string, float64, error) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return "", 0, fmt.Errorf("not a benchmark result: %q", line)
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return "", 0, fmt.Errorf("iteration count %q: %v", f[1], err)
	}
	for i := 2; i < len(f); i += 2 {
		if f[i+1] == "ns/op" {
			ns, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return "", 0, fmt.Errorf("ns/op %q: %v", f[i], err)
			}
			return f[0], ns, nil
		}
	}
	return "", 0, fmt.Errorf("no ns/op: %q", line)
}

// splitCPU splits a benchmark name into the name and its -cpu. go test
// appends -CPU only when GOMAXPROCS is not 1, and an implementation's name
// may hold a dash (failsafe-exec), so only a dash followed by nothing but
// digits, after the last slash, is the -cpu suffix.
func splitCPU(name string) (string, int) {
	if i := strings.LastIndexByte(name, '-'); i > strings.LastIndexByte(name, '/') {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n > 0 {
			return name[:i], n
		}
	}
	return name, 1
}

// parseName splits BenchmarkMix/failures=F/window=W/impl=I[-CPU].
func parseName(name string) (cell, error) {
	var c cell
	name, c.cpu = splitCPU(name)
	parts := strings.Split(name, "/")[1:]
	for _, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return cell{}, fmt.Errorf("%s: %q is not key=value", name, p)
		}
		switch k {
		case "failures":
			c.failures = v
		case "window":
			c.window = v
		case "impl":
			c.impl = v
		default:
			return cell{}, fmt.Errorf("%s: unknown key %q", name, k)
		}
	}
	if c.failures == "" || c.window == "" || c.impl == "" {
		return cell{}, fmt.Errorf("%s: want failures=, window= and impl=", name)
	}
	return c, nil
}

// parseFloorName splits BenchmarkFloor/op=O[-CPU] and
// BenchmarkFloorParallel/op=O[-CPU].
func parseFloorName(name string) (floor, error) {
	var f floor
	name, f.cpu = splitCPU(name)
	bench, rest, _ := strings.Cut(name, "/")
	f.parallel = bench+"/" == floorParallelPrefix
	op, ok := strings.CutPrefix(rest, "op=")
	if !ok || op == "" || strings.Contains(op, "/") {
		return floor{}, fmt.Errorf("%s: want %s/op=O", name, bench)
	}
	f.op = op
	return f, nil
}

// median is the median ns/op of a cell over its counts, and false when the
// file has none (a cell the implementation skips).
func (m *matrix) median(c cell) (float64, bool) {
	s := m.samples[c]
	if len(s) == 0 {
		return 0, false
	}
	return medianOf(s), true
}

// medianOf is the median of s, which is not empty; s is not changed.
func medianOf(s []float64) float64 {
	s = slices.Clone(s)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
