package main

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The size of one tile of a figure, and the width of the strip on its right
// that holds the one legend.
const (
	tileWidth   = 9 * vg.Centimeter
	tileHeight  = 7 * vg.Centimeter
	legendWidth = 4 * vg.Centimeter
)

// styled gives an implementation's line and glyphs the colour and shape of
// its index in matrix.impls, the same in every tile and in the legend.
func styled(i int, l *plotter.Line, s *plotter.Scatter) {
	l.Color, s.Color, s.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
}

// legend is a figure's one key, every implementation of the file: a
// legend in each tile would cover its data.
func legend(m *matrix) (plot.Legend, error) {
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	for i, impl := range m.impls {
		l, s, err := plotter.NewLinePoints(plotter.XYs{{}})
		if err != nil {
			return lg, err
		}
		styled(i, l, s)
		lg.Add(impl, l, s)
	}
	return lg, nil
}

// byFailures is mix-by-failures.png: one tile per -cpu (rows) and window
// (columns), ns/op against the failure rate, one line per implementation.
func byFailures(m *matrix) ([][]*plot.Plot, error) {
	rows := make([][]*plot.Plot, len(m.cpus))
	for i, cpu := range m.cpus {
		for _, w := range m.windows {
			title := fmt.Sprintf("window=%s, -cpu %d", w, cpu)
			p, err := tile(m, title, "failures", m.failures, func(impl string, x int) cell {
				return cell{failures: m.failures[x], window: w, impl: impl, cpu: cpu}
			})
			if err != nil {
				return nil, err
			}
			rows[i] = append(rows[i], p)
		}
	}
	return rows, nil
}

// byCPU is mix-by-cpu.png: one tile per window, ns/op against -cpu at one
// failure rate, one line per implementation.
func byCPU(m *matrix, failures string) ([][]*plot.Plot, error) {
	cpus := make([]string, len(m.cpus))
	for i, c := range m.cpus {
		cpus[i] = strconv.Itoa(c)
	}
	row := make([]*plot.Plot, 0, len(m.windows))
	for _, w := range m.windows {
		title := fmt.Sprintf("window=%s, failures=%s", w, failures)
		p, err := tile(m, title, "-cpu", cpus, func(impl string, x int) cell {
			return cell{failures: failures, window: w, impl: impl, cpu: m.cpus[x]}
		})
		if err != nil {
			return nil, err
		}
		row = append(row, p)
	}
	return [][]*plot.Plot{row}, nil
}

// tile draws the median ns/op of the cells at(impl, x) for x over the
// nominal axis xs, one line per implementation that has any of them, in
// the same colour and glyph in every tile. The y axis starts at 0, unless
// the values span more than a factor of 20 (the peers beside casbreaker),
// where a linear axis would flatten the fastest lines into the floor: then
// it is logarithmic.
func tile(m *matrix, title, xlabel string, xs []string, at func(impl string, x int) cell) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "ns/op (median)"
	p.NominalX(xs...)
	p.X.Min, p.X.Max = -0.5, float64(len(xs))-0.5
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, impl := range m.impls {
		var pts plotter.XYs
		for x := range xs {
			if ns, ok := m.median(at(impl, x)); ok {
				pts = append(pts, plotter.XY{X: float64(x), Y: ns})
				lo, hi = math.Min(lo, ns), math.Max(hi, ns)
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %v", title, impl, err)
		}
		styled(i, l, s)
		p.Add(l, s)
	}
	switch {
	case math.IsInf(lo, 1):
		// No implementation ran this tile's cells (a rate missing at one
		// -cpu): an empty tile keeps the grid aligned.
		p.Y.Min, p.Y.Max = 0, 1
	case lo > 0 && hi/lo > 20:
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	default:
		p.Y.Min, p.Y.Tick.Marker = 0, plainTicks{}
	}
	return p, nil
}

// logTicks is plot.LogTicks with the 2s and 5s of every decade labelled
// too: LogTicks labels only the powers of ten, so a tile spanning a decade
// or two would show one label or none.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, t := range (plot.LogTicks{Prec: -1}).Ticks(lo, hi) {
		// LogTicks puts two ticks on each power of ten, a labelled one
		// and a bare one; labelling both would print the label twice.
		if len(ts) > 0 && ts[len(ts)-1].Value == t.Value {
			continue
		}
		v := t.Value
		if m := math.Round(v / math.Pow10(int(math.Floor(math.Log10(v))))); m == 1 || m == 2 || m == 5 {
			t.Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
		ts = append(ts, t)
	}
	return ts
}

// plainTicks is plot.DefaultTicks with its labels in the shortest form:
// DefaultTicks gives some tiles labels like 25000.00 and others 20000.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// save draws a grid of tiles, with the legend on their right, into a PNG
// file.
func save(plots [][]*plot.Plot, lg plot.Legend, path string) error {
	rows, cols := len(plots), len(plots[0])
	img := vgimg.New(vg.Length(cols)*tileWidth+legendWidth, vg.Length(rows)*tileHeight)
	full := draw.New(img)
	dc := draw.Crop(full, 0, -legendWidth, 0, 0)
	lg.Draw(draw.Crop(full, full.Max.X-legendWidth+vg.Centimeter/2, 0, 0, -vg.Centimeter))
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
