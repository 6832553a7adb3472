package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/tilefuse/tilefuse/bench"
	"github.com/tilefuse/tilefuse/fusion"
)

// writePlot draws bar charts, one above the other: each workload's speedup
// over Gorgonia (unfused and fused), on the GPU the fused run's speedup over
// the unfused one in device time, and the fused run's bandwidth as a percent
// of the copy roofline.
func writePlot(file string, results []*bench.Result, be fusion.Backend) error {
	var names []string
	fused, unfused, roof, dev := plotter.Values{}, plotter.Values{}, plotter.Values{}, plotter.Values{}
	hasDev := false
	for _, r := range results {
		names = append(names, r.Name+"/"+r.Size)
		fused = append(fused, r.Speedup(bench.Fused))
		unfused = append(unfused, r.Speedup(bench.Unfused))
		roof = append(roof, 100*r.Roofline(bench.Fused))
		dev = append(dev, r.DeviceSpeedup(bench.Fused))
		hasDev = hasDev || dev[len(dev)-1] > 0
	}
	w := vg.Points(float64(max(8, 2*len(results))) * 18)
	barW := vg.Points(8)

	sp := plot.New()
	sp.Title.Text = fmt.Sprintf("tilefuse (%s): speedup over Gorgonia's tape machine", be)
	sp.Y.Label.Text = "× Gorgonia"
	bu, err := plotter.NewBarChart(unfused, barW)
	if err != nil {
		return err
	}
	bu.Color = color.RGBA{160, 160, 160, 255}
	bu.Offset = -barW / 2
	bf, err := plotter.NewBarChart(fused, barW)
	if err != nil {
		return err
	}
	bf.Color = color.RGBA{30, 100, 200, 255}
	bf.Offset = barW / 2
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	sp.Add(bu, bf, one)
	sp.Legend.Add("unfused", bu)
	sp.Legend.Add("fused", bf)
	sp.Legend.Top = true
	sp.NominalX(names...)
	sp.X.Tick.Label.Rotation = 0.6
	sp.X.Tick.Label.XAlign = draw.XRight

	panels := [][]*plot.Plot{{sp}}
	if hasDev {
		dp := plot.New()
		dp.Title.Text = "fused over unfused, device time (events)"
		dp.Y.Label.Text = "× unfused"
		bd, err := plotter.NewBarChart(dev, barW)
		if err != nil {
			return err
		}
		bd.Color = color.RGBA{200, 110, 30, 255}
		dp.Add(bd, one)
		dp.NominalX(names...)
		dp.X.Tick.Label.Rotation = 0.6
		dp.X.Tick.Label.XAlign = draw.XRight
		panels = append(panels, []*plot.Plot{dp})
	}

	rp := plot.New()
	rp.Title.Text = "fused: percent of the copy roofline"
	if hasDev {
		rp.Title.Text += " (device time)"
	}
	rp.Y.Label.Text = "% of copy bandwidth"
	br, err := plotter.NewBarChart(roof, barW)
	if err != nil {
		return err
	}
	br.Color = color.RGBA{30, 150, 90, 255}
	rp.Add(br)
	rp.NominalX(names...)
	rp.X.Tick.Label.Rotation = 0.6
	rp.X.Tick.Label.XAlign = draw.XRight

	panels = append(panels, []*plot.Plot{rp})

	img := vgimg.New(w, vg.Points(float64(320*len(panels))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(12), PadX: vg.Points(8), PadTop: vg.Points(8), PadBottom: vg.Points(8)}
	canvases := plot.Align(panels, tiles, dc)
	for i, row := range panels {
		row[0].Draw(canvases[i][0])
	}
	png := vgimg.PngCanvas{Canvas: img}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := png.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
