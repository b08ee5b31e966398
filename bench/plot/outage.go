package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// outageFigure is the file runOutage writes.
const outageFigure = "outage-prometheus.png"

// recording is what ops' end-to-end test writes with -record: the outage
// demo's flaky breaker as Prometheus recorded it, each query's matrix as
// Prometheus' HTTP API gives it (times in Unix seconds, values as strings).
type recording struct {
	About   string  `json:"about"`
	Breaker string  `json:"breaker"`
	Start   float64 `json:"start"`
	Queries map[string]struct {
		Query  string `json:"query"`
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"queries"`
}

// series is one recorded series: a label's value, and its points with
// times in seconds since the recording's start.
type series struct {
	label string
	xys   plotter.XYs
}

// seriesOf returns the series of the query name, each named by its label
// key, those whose values are all zero left out.
func (r *recording) seriesOf(name, key string) ([]series, error) {
	q, ok := r.Queries[name]
	if !ok {
		return nil, fmt.Errorf("the recording has no query %q", name)
	}
	var out []series
	for _, res := range q.Result {
		s := series{label: res.Metric[key]}
		nonZero := false
		for _, v := range res.Values {
			at, ok := v[0].(float64)
			text, ok2 := v[1].(string)
			if !ok || !ok2 {
				return nil, fmt.Errorf("query %q: a point %v is not [time, \"value\"]", name, v)
			}
			y, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, fmt.Errorf("query %q: %v", name, err)
			}
			nonZero = nonZero || y != 0
			s.xys = append(s.xys, plotter.XY{X: at - r.Start, Y: y})
		}
		if nonZero {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b series) int { return cmp.Compare(a.label, b.label) })
	return out, nil
}

// The rows of the state tile: the breaker's states, then the alert's.
var stateRows = []string{"closed", "half_open", "open", "alert pending", "alert firing"}

// runOutage draws the recording in into out/outage-prometheus.png: the
// breaker's state and CasbreakerOpenTooLong's, the successful calls per
// second, and the failed and refused calls per second, over the seconds
// since the demo started.
func runOutage(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r recording
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %v", in, err)
	}
	var got [4][]series
	for i, q := range [...][2]string{{"state", "state"}, {"alert", "alertstate"}, {"calls", "kind"}, {"refused", "reason"}} {
		if got[i], err = r.seriesOf(q[0], q[1]); err != nil {
			return fmt.Errorf("%s: %v", in, err)
		}
	}
	states, alerts, calls, refused := got[0], got[1], got[2], got[3]

	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	color := 0
	add := func(p *plot.Plot, name string, xys plotter.XYs) error {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(color)
		l.Width = vg.Points(1.5)
		color++
		p.Add(l)
		lg.Add(name, l)
		return nil
	}

	state := tilePlot("flaky breaker's state, CasbreakerOpenTooLong", "")
	var code plotter.XYs // the row of the state each point is in
	for _, s := range states {
		row := slices.Index(stateRows, s.label)
		if row < 0 {
			return fmt.Errorf("%s: state %q has no row in the figure", in, s.label)
		}
		for _, xy := range s.xys {
			if xy.Y == 1 {
				code = append(code, plotter.XY{X: xy.X, Y: float64(row)})
			}
		}
	}
	slices.SortFunc(code, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	if err := add(state, "state", code); err != nil {
		return err
	}
	for _, a := range alerts {
		row := slices.Index(stateRows, "alert "+a.label)
		if row < 0 {
			return fmt.Errorf("%s: alert state %q has no row in the figure", in, a.label)
		}
		for i := range a.xys {
			a.xys[i].Y = float64(row)
		}
		if err := add(state, "alert "+a.label, a.xys); err != nil {
			return err
		}
	}
	var ticks []plot.Tick
	for i, name := range stateRows {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: name})
	}
	state.Y.Tick.Marker = plot.ConstantTicks(ticks)
	state.Y.Min, state.Y.Max = -0.5, float64(len(stateRows))-0.5

	ok := tilePlot("successful calls", "calls/s")
	bad := tilePlot("failed and refused calls (by reason)", "calls/s")
	for _, c := range calls {
		p := bad
		if c.label == "successful" {
			p = ok
		}
		if err := add(p, c.label, c.xys); err != nil {
			return err
		}
	}
	for _, c := range refused {
		name := "refused (" + c.label + ")"
		if c.label == "half_open_full" {
			name = "refused (full)" // half-open, every probe slot taken
		}
		if err := add(bad, name, c.xys); err != nil {
			return err
		}
	}
	end := 0.0
	for _, ss := range [][]series{states, alerts, calls, refused} {
		for _, s := range ss {
			end = max(end, s.xys[len(s.xys)-1].X)
		}
	}
	for _, p := range []*plot.Plot{state, ok, bad} {
		p.X.Min, p.X.Max = 0, end
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(out, outageFigure)
	if err := save([][]*plot.Plot{{state}, {ok}, {bad}}, lg, path); err != nil {
		return err
	}
	fmt.Println("wrote", path)
	return nil
}

// tilePlot is a tile of the outage figure, over the seconds of the demo.
func tilePlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds since the demo started"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	return p
}
