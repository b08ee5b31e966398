package main

import (
	"fmt"
	"io"
	"math"
	"slices"
)

// A ratio of two cells of one run, read two ways: as the ratio of their
// medians (what benchstat's tables show) and as the median of the ratios
// of the samples of the same round. bench/run.sh takes one sample of every
// cell per round, so the i-th samples of two cells ran within a second of
// each other; on a machine whose speed changes every second or so, a cell
// whose samples split evenly between two speeds has a median that may land
// in either, and the paired reading is the one that speed does not move.
type ratio struct {
	name             string
	ofMedians, pairs float64
	bound            float64 // the target: at most this
}

// ratioOf compares cell a with cell b; false when either is missing or
// their sample counts differ (then the rounds cannot be paired).
func (m *matrix) ratioOf(name string, a, b cell, bound float64) (ratio, bool) {
	sa, sb := m.samples[a], m.samples[b]
	ma, okA := m.median(a)
	mb, okB := m.median(b)
	if !okA || !okB || len(sa) != len(sb) {
		return ratio{}, false
	}
	per := make([]float64, len(sa))
	for i := range sa {
		per[i] = sa[i] / sb[i]
	}
	return ratio{name: name, ofMedians: ma / mb, pairs: medianOf(per), bound: bound}, true
}

func medianOf(s []float64) float64 {
	s = slices.Clone(s)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// targets lists the matrix's targets (docs/benchmarks.md, "Targets: met
// and missed") that compare two cells of the run: lock-free against the
// mutex (geomean per -cpu, at most 0.5 and 0.4), a time window against time10 at
// each failure rate and -cpu (at most 1.15), and a clean window at -cpu 2
// against -cpu 1 (at most 0.6). Cells the file lacks are left out.
func (m *matrix) targets() []ratio {
	var out []ratio
	for _, cpu := range m.cpus {
		var logM, logP float64
		n := 0
		for _, f := range m.failures {
			for _, w := range m.windows {
				r, ok := m.ratioOf("", cell{f, w, "lockfree", cpu}, cell{f, w, "mutex", cpu}, 0)
				if ok {
					logM, logP, n = logM+math.Log(r.ofMedians), logP+math.Log(r.pairs), n+1
				}
			}
		}
		if n > 0 {
			bound := 0.5
			if cpu > 1 {
				bound = 0.4
			}
			out = append(out, ratio{fmt.Sprintf("geomean lockfree / mutex, -cpu %d", cpu), math.Exp(logM / float64(n)), math.Exp(logP / float64(n)), bound})
		}
	}
	for _, cpu := range m.cpus {
		for _, f := range m.failures {
			if r, ok := m.ratioOf(fmt.Sprintf("time300 / time10, failures=%s, -cpu %d", f, cpu), cell{f, "time300", "lockfree", cpu}, cell{f, "time10", "lockfree", cpu}, 1.15); ok {
				out = append(out, r)
			}
		}
	}
	if slices.Contains(m.cpus, 1) && slices.Contains(m.cpus, 2) && slices.Contains(m.failures, "0") {
		for _, w := range m.windows {
			if r, ok := m.ratioOf(fmt.Sprintf("clean %s, -cpu 2 / -cpu 1", w), cell{"0", w, "lockfree", 2}, cell{"0", w, "lockfree", 1}, 0.6); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

// printTargets writes the targets as a Markdown table, each read both ways.
func printTargets(w io.Writer, rs []ratio) {
	fmt.Fprintln(w, "| target | at most | ratio of medians | median of per-round ratios |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.2f | %.3f%s | %.3f%s |\n", r.name, r.bound, r.ofMedians, over(r.ofMedians, r.bound), r.pairs, over(r.pairs, r.bound))
	}
}

func over(v, bound float64) string {
	if v > bound {
		return " **over**"
	}
	return ""
}
