package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func ctxBG() context.Context { return context.Background() }

// replot draws the plots from the JSON a run wrote with -json.
func replot(file, dir string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var j struct {
		Series map[string][]point `json:"series"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	e := &env{series: j.Series}
	return e.drawPlots(dir)
}

// drawPlots writes recall-latency.png, http-throughput.png and churn.png
// into dir, from the series the scenarios recorded; a plot without data is
// skipped.
func (e *env) drawPlots(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := e.latencyPlot(filepath.Join(dir, "recall-latency.png")); err != nil {
		return err
	}
	if err := e.throughputPlot(filepath.Join(dir, "http-throughput.png")); err != nil {
		return err
	}
	return e.churnPlot(filepath.Join(dir, "churn.png"))
}

func xys(ps []point) plotter.XYs {
	out := make(plotter.XYs, len(ps))
	for i, p := range ps {
		out[i].X, out[i].Y = p.X, p.Y
	}
	return out
}

func (e *env) latencyPlot(file string) error {
	var names []string
	for k := range e.series {
		if name, ok := strings.CutPrefix(k, "q3_p50/"); ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	p := plot.New()
	p.Title.Text = "Recall over stdio, one client: three-word query, p50 (solid) and p99 (dashed)"
	p.X.Label.Text = "memories in the store (N)"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	for i, name := range names {
		c := plotutil.Color(i)
		for _, kind := range []string{"p50", "p99"} {
			pts := xys(e.series["q3_"+kind+"/"+name])
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color = c, c
			s.Shape = plotutil.Shape(i)
			if kind == "p99" {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			} else {
				p.Legend.Add(name, l, s)
			}
			p.Add(l, s)
		}
	}
	return p.Save(9*vg.Inch, 5.5*vg.Inch, file)
}

func (e *env) throughputPlot(file string) error {
	if len(e.series["tput_mix"]) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "HTTP gateway: calls/s against concurrent sessions"
	p.X.Label.Text = "sessions"
	p.Y.Label.Text = "calls per second"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = false, false
	for i, s := range []struct{ key, label string }{
		{"tput_ping", "ping through the same gateway"},
		{"tput_stats", "stats, the cheapest tool (the tool ceiling)"},
		{"tput_mix", "memgate: 90% search / 10% remember"},
	} {
		l, pts, err := plotter.NewLinePoints(xys(e.series[s.key]))
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s.label, l, pts)
	}
	p.Y.Min = 0
	return p.Save(8*vg.Inch, 5*vg.Inch, file)
}

func (e *env) churnPlot(file string) error {
	pts := e.series["churn"]
	if len(pts) == 0 {
		return nil
	}
	vals := make(plotter.Values, len(pts))
	for i, q := range pts {
		vals[i] = q.Y
	}
	p := plot.New()
	p.Title.Text = "Namespace churn: throughput with --max-stores 16 / all stores open"
	p.Y.Label.Text = "ratio to all open"
	bars, err := plotter.NewBarChart(vals, vg.Points(50))
	if err != nil {
		return err
	}
	bars.Color = color.RGBA{R: 70, G: 110, B: 180, A: 255}
	p.Add(bars)
	goal := plotter.NewFunction(func(float64) float64 { return 0.5 })
	goal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(goal)
	p.Legend.Add("goal for uniform: 0.5", goal)
	p.Legend.Top = true
	labels := []string{"uniform", "Zipf s=1.1", "sticky sessions"}
	p.NominalX(labels[:len(pts)]...)
	p.Y.Min = 0
	p.Y.Max = max(1.1, vals[0]*1.1)
	for _, v := range vals {
		p.Y.Max = max(p.Y.Max, v*1.1)
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

var _ = fmt.Sprint
