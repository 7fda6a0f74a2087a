package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// scalingSVG draws the scaling points: one panel per kind, ticks/s against
// N, as a self-contained SVG document.
func scalingSVG(pts []ScalePoint) []byte {
	const (
		panelW, panelH = 420, 300
		left, right    = 70, 20
		top, bottom    = 40, 50
	)
	kinds := []string{ScaleFanOut, ScaleContention}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		panelW*len(kinds), panelH, panelW*len(kinds), panelH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for k, kind := range kinds {
		var xs []int
		var ys []float64
		for _, p := range pts {
			if p.Kind == kind {
				xs = append(xs, p.N)
				ys = append(ys, p.ThroughputPerS)
			}
		}
		ox := k * panelW
		pw, ph := panelW-left-right, panelH-top-bottom
		title := "fan-out: 1 publisher, N subscribers"
		xl := "subscribers"
		if kind == ScaleContention {
			title, xl = "contention: N publishers, 1 subscriber", "publishers"
		}
		fmt.Fprintf(&b, `<text x="%d" y="20" text-anchor="middle" font-weight="bold">%s</text>`+"\n", ox+left+pw/2, html.EscapeString("tickbus-shm "+title))
		// Axes.
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", ox+left, top, ox+left, top+ph)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", ox+left, top+ph, ox+left+pw, top+ph)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", ox+left+pw/2, panelH-10, xl)
		fmt.Fprintf(&b, `<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">ticks/s (slowest subscriber)</text>`+"\n",
			ox+15, top+ph/2, ox+15, top+ph/2)
		if len(xs) == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">no data</text>`+"\n", ox+left+pw/2, top+ph/2)
			continue
		}
		ymax := 0.0
		for _, y := range ys {
			ymax = math.Max(ymax, y)
		}
		ymax = niceCeil(ymax)
		xmax := xs[len(xs)-1]
		// X positions on a log2 scale, so 1, 2, 4, 8 are evenly spaced.
		xpos := func(n int) float64 {
			if xmax <= 1 {
				return float64(ox+left) + float64(pw)/2
			}
			return float64(ox+left) + math.Log2(float64(n))/math.Log2(float64(xmax))*float64(pw)
		}
		ypos := func(v float64) float64 { return float64(top+ph) - v/ymax*float64(ph) }
		for i := 0; i <= 4; i++ {
			v := ymax * float64(i) / 4
			y := ypos(v)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", ox+left, y, ox+left+pw, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", ox+left-5, y+4, html.EscapeString(fmtRate(&v)))
		}
		var path bytes.Buffer
		for i, n := range xs {
			x, y := xpos(n), ypos(ys[i])
			if i == 0 {
				fmt.Fprintf(&path, "M%.1f,%.1f", x, y)
			} else {
				fmt.Fprintf(&path, " L%.1f,%.1f", x, y)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x, top+ph+16, n)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#1f77b4"><title>%d: %s ticks/s</title></circle>`+"\n",
				x, y, n, html.EscapeString(fmtRate(&ys[i])))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#1f77b4" stroke-width="2"/>`+"\n", path.String())
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 if v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
