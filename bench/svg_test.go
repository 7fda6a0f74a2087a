package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScalingSVG_IsWellFormedWithOnePointPerRun(t *testing.T) {
	pts := []ScalePoint{
		{Kind: ScaleFanOut, N: 1, ThroughputPerS: 9e6}, {Kind: ScaleFanOut, N: 2, ThroughputPerS: 5e6},
		{Kind: ScaleFanOut, N: 4, ThroughputPerS: 2e6}, {Kind: ScaleFanOut, N: 8, ThroughputPerS: 0},
		{Kind: ScaleContention, N: 1, ThroughputPerS: 8e6}, {Kind: ScaleContention, N: 2, ThroughputPerS: 3e6},
		{Kind: ScaleContention, N: 4, ThroughputPerS: 1e6},
	}
	svg := scalingSVG(pts)
	dec := xml.NewDecoder(bytes.NewReader(svg))
	circles, paths := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "well-formed XML")
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "circle":
				circles++
			case "path":
				paths++
			}
		}
	}
	assert.Equal(t, len(pts), circles)
	assert.Equal(t, 2, paths)
}

func TestScalingSVG_NoData_SaysSo(t *testing.T) {
	svg := string(scalingSVG([]ScalePoint{{Kind: ScaleFanOut, N: 1, ThroughputPerS: 1}}))
	assert.Equal(t, 1, strings.Count(svg, "no data"), "the contention panel has no points")
}

func TestWriteScalingFiles_WritesJSONAndSVG(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeScalingFiles(dir, []ScalePoint{{Kind: ScaleFanOut, N: 1, ThroughputPerS: 1e6}}))
	for _, name := range []string{"scaling.json", "scaling.svg"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Positive(t, fi.Size())
	}
}

func TestNiceCeil_RoundsUpToOneTwoFive(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.1: 2, 3: 5, 7: 10, 12e6: 20e6} {
		assert.InDelta(t, want, niceCeil(in), want*1e-9, "%v", in)
	}
}

func TestFmt_HumanUnits(t *testing.T) {
	assert.Equal(t, "-", fmtNs(nil))
	assert.Equal(t, "850ns", fmtNs(i64(850)))
	assert.Equal(t, "1.5µs", fmtNs(i64(1500)))
	assert.Equal(t, "2.5ms", fmtNs(i64(2_500_000)))
	assert.Equal(t, "3s", fmtNs(i64(3_000_000_000)))
	assert.Equal(t, "31.2M", fmtRate(f64(31.2e6)))
	assert.Equal(t, "-", fmtRate(nil))
}
