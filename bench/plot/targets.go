package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// A ratio of two benchmarks of one run, read two ways: as the ratio of
// their medians (what benchstat's tables show) and as the median of the
// ratios of the samples of the same round. bench/run.sh takes one sample of
// every cell and floor per round, so the k-th samples of two benchmarks ran
// within a second of each other; on a machine whose speed changes every
// second or so, a cell whose samples split evenly between two speeds has a
// median that may land in either, and the paired reading is the one that
// speed does not move.
type ratio struct {
	name             string
	ofMedians, pairs float64
	bound            float64 // the target: at most this; 0 for a row without one
}

// over reports whether either reading of r is above its bound: a target is
// met only when both readings meet it.
func (r ratio) over() bool {
	return r.bound > 0 && (r.ofMedians > r.bound || r.pairs > r.bound)
}

// The bounds of the targets (docs/benchmarks.md, "Targets"), each on
// lock-free's ns/op divided by the other's.
const (
	// cellBound: no failures x window cell at -cpu 1 where lock-free is
	// slower than the mutex.
	cellBound = 1.0
	// floorBound: a time-window cell at -cpu 1 within 1.3x its floor, one
	// clock read plus one uncontended atomic add
	// (BenchmarkFloorParallel/op=clockadd at the same -cpu).
	floorBound = 1.3
	// sizeBound: time300 within 1.15x time10, at every failure rate and
	// -cpu, at 1 s and at 100 ms: the time window's cost does not grow
	// with its size.
	sizeBound = 1.15
	// scalingBound: a clean window at -cpu 2 within 0.6x its -cpu 1.
	scalingBound = 0.6
	// peerBound: lock-free faster than every peer in every cell the peer
	// can express.
	peerBound = 1.0
)

// geomeanBounds is the bound on the geomean of lock-free / mutex over the
// cells of one -cpu; a -cpu not listed is printed without one.
var geomeanBounds = map[int]float64{1: 0.85, 2: 0.35}

// The implementations the targets compare by name; every other impl of
// the file is a peer.
const (
	lockfree = "lockfree"
	mutex    = "mutex"
)

// clockadd is the time window's floor at one -cpu.
func clockadd(cpu int) floor { return floor{parallel: true, op: "clockadd", cpu: cpu} }

// report is the targets table: its rows, and why rows the file should
// have had are left out.
type report struct {
	rows  []ratio
	notes []string
}

// pair reads samples a against samples b, both in round order. It is
// false, with nothing noted, when either has no samples (a cell the file
// lacks, or one an implementation skips), and false with a note when their
// counts differ: then the rounds cannot be paired (a round in which a
// benchmark failed has no sample of it).
func (t *report) pair(name string, a, b []float64, bound float64) (ratio, bool) {
	if len(a) == 0 || len(b) == 0 {
		return ratio{}, false
	}
	if len(a) != len(b) {
		t.note(fmt.Sprintf("%s: %d samples against %d, so the rounds cannot be paired; left out", name, len(a), len(b)))
		return ratio{}, false
	}
	per := make([]float64, len(a))
	for i := range a {
		per[i] = a[i] / b[i]
	}
	return ratio{name: name, ofMedians: medianOf(a) / medianOf(b), pairs: medianOf(per), bound: bound}, true
}

func (t *report) note(s string) {
	if !slices.Contains(t.notes, s) {
		t.notes = append(t.notes, s)
	}
}

// row appends r if ok: the shape of pair's results.
func (t *report) row(r ratio, ok bool) {
	if ok {
		t.rows = append(t.rows, r)
	}
}

// cellRatio reads lockfree against impl in one cell.
func (m *matrix) cellRatio(t *report, name, failures, window, impl string, cpu int, bound float64) (ratio, bool) {
	return t.pair(name, m.samples[cell{failures, window, lockfree, cpu}], m.samples[cell{failures, window, impl, cpu}], bound)
}

// targets lists the matrix's targets (docs/benchmarks.md, "Targets"), in
// this order:
//   - lock-free / mutex, the geomean over the cells of each -cpu: at most
//     0.85 at -cpu 1 and 0.35 at -cpu 2, no bound at other -cpu;
//   - lock-free / mutex in each cell at -cpu 1: at most 1.0;
//   - lock-free / its floor in each time-window cell at -cpu 1: at most 1.3;
//   - time300 / time10 at each failure rate and -cpu: at most 1.15, and
//     the same in buckets of 100 ms (time300at100ms / time10at100ms);
//   - a clean window at -cpu 2 / the same at -cpu 1: at most 0.6;
//   - for each peer and -cpu, lock-free / the peer as the geomean over the
//     cells the peer has (no bound) and as the largest of them (at most 1.0).
//
// Cells the file lacks are left out; a floor the file lacks, or two
// benchmarks whose sample counts differ, leave their rows out with a note.
func (m *matrix) targets() report {
	var t report
	cellName := func(f, w string, cpu int) string {
		return fmt.Sprintf("failures=%s, window=%s, -cpu %d", f, w, cpu)
	}
	var cells1 []ratio // lock-free / mutex in each cell at -cpu 1
	for _, cpu := range m.cpus {
		var rs []ratio
		for _, f := range m.failures {
			for _, w := range m.windows {
				if r, ok := m.cellRatio(&t, "lockfree / mutex, "+cellName(f, w, cpu), f, w, mutex, cpu, cellBound); ok {
					rs = append(rs, r)
				}
			}
		}
		if len(rs) > 0 {
			t.rows = append(t.rows, geomean(fmt.Sprintf("geomean lockfree / mutex over %d cells, -cpu %d", len(rs), cpu), rs, geomeanBounds[cpu]))
		}
		if cpu == 1 {
			cells1 = rs
		}
	}
	t.rows = append(t.rows, cells1...)
	for _, f := range m.failures {
		for _, w := range m.windows {
			c := cell{f, w, lockfree, 1}
			if !strings.HasPrefix(w, "time") || len(m.samples[c]) == 0 {
				continue
			}
			fl := m.floors[clockadd(1)]
			if len(fl) == 0 {
				t.note("no BenchmarkFloorParallel/op=clockadd at -cpu 1: the time windows' floor targets are left out")
				continue
			}
			t.row(t.pair("lockfree / floor clockadd, "+cellName(f, w, 1), m.samples[c], fl, floorBound))
		}
	}
	for _, width := range []string{"", "at100ms"} {
		for _, cpu := range m.cpus {
			for _, f := range m.failures {
				t.row(t.pair(fmt.Sprintf("time300%s / time10%s, failures=%s, -cpu %d", width, width, f, cpu),
					m.samples[cell{f, "time300" + width, lockfree, cpu}], m.samples[cell{f, "time10" + width, lockfree, cpu}], sizeBound))
			}
		}
	}
	for _, w := range m.windows {
		t.row(t.pair(fmt.Sprintf("clean %s, -cpu 2 / -cpu 1", w),
			m.samples[cell{"0", w, lockfree, 2}], m.samples[cell{"0", w, lockfree, 1}], scalingBound))
	}
	for _, peer := range m.impls {
		if peer == lockfree || peer == mutex {
			continue
		}
		for _, cpu := range m.cpus {
			var rs []ratio
			for _, f := range m.failures {
				for _, w := range m.windows {
					if r, ok := m.cellRatio(&t, fmt.Sprintf("lockfree / %s, %s", peer, cellName(f, w, cpu)), f, w, peer, cpu, 0); ok {
						r.name = f + " " + w
						rs = append(rs, r)
					}
				}
			}
			if len(rs) == 0 {
				continue
			}
			t.rows = append(t.rows,
				geomean(fmt.Sprintf("geomean lockfree / %s over its %d cells, -cpu %d", peer, len(rs), cpu), rs, 0),
				largest(fmt.Sprintf("largest lockfree / %s of its %d cells, -cpu %d", peer, len(rs), cpu), rs, peerBound))
		}
	}
	return t
}

// geomean is the geometric mean of rs, which is not empty, each reading
// apart.
func geomean(name string, rs []ratio, bound float64) ratio {
	var logM, logP float64
	for _, r := range rs {
		logM, logP = logM+math.Log(r.ofMedians), logP+math.Log(r.pairs)
	}
	n := float64(len(rs))
	return ratio{name: name, ofMedians: math.Exp(logM / n), pairs: math.Exp(logP / n), bound: bound}
}

// largest is the largest of rs, which is not empty, each reading apart,
// named with the cell (rs's names) where each reading is largest.
func largest(name string, rs []ratio, bound float64) ratio {
	m := slices.MaxFunc(rs, func(a, b ratio) int { return cmp.Compare(a.ofMedians, b.ofMedians) })
	p := slices.MaxFunc(rs, func(a, b ratio) int { return cmp.Compare(a.pairs, b.pairs) })
	where := fmt.Sprintf(" (at %s)", m.name)
	if m.name != p.name {
		where = fmt.Sprintf(" (medians at %s, pairs at %s)", m.name, p.name)
	}
	return ratio{name: name + where, ofMedians: m.ofMedians, pairs: p.pairs, bound: bound}
}

// overCount is the number of rows over their bound, and of rows with one.
func (t report) overCount() (over, bounded int) {
	for _, r := range t.rows {
		if r.bound > 0 {
			bounded++
		}
		if r.over() {
			over++
		}
	}
	return over, bounded
}

// printTargets writes the targets as a Markdown table, each read both
// ways, then the notes on rows left out.
func printTargets(w io.Writer, t report) {
	fmt.Fprintln(w, "| target | at most | ratio of medians | median of per-round ratios |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, r := range t.rows {
		bound := "-"
		if r.bound > 0 {
			bound = fmt.Sprintf("%.2f", r.bound)
		}
		fmt.Fprintf(w, "| %s | %s | %.3f%s | %.3f%s |\n", r.name, bound, r.ofMedians, over(r.ofMedians, r.bound), r.pairs, over(r.pairs, r.bound))
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range t.notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

func over(v, bound float64) string {
	if bound > 0 && v > bound {
		return " **over**"
	}
	return ""
}
