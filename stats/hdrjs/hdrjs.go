package hdrjs

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Version is the hdr-histogram-js release the tests install.
const Version = "3.0.1"

//go:embed read.js
var readJS []byte

// Reader runs hdr-histogram-js in node.
type Reader struct {
	dir string // holds node_modules and read.js
}

// Summary is what hdr-histogram-js reports for one histogram.
type Summary struct {
	Count   int64   `json:"count"`
	Min     int64   `json:"min"`
	Max     int64   `json:"max"`
	StartMs int64   `json:"start_ms"`
	EndMs   int64   `json:"end_ms"`
	Values  []int64 `json:"values"` // at the requested percentiles
}

// Result is one run's output.
type Result struct {
	Hists        []Summary `json:"hists"`
	Hlog         []Summary `json:"hlog"`
	StartTimeSec float64   `json:"start_time_sec"`
}

// Setup returns a Reader, or skips t saying why none can be had.
func Setup(t testing.TB) *Reader {
	t.Helper()
	if testing.Short() {
		t.Skip("installs hdr-histogram-js with npm and runs node; a cross-implementation check, not a race check: run without -short")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (needed to run hdr-histogram-js, the independent HdrHistogram reader)")
	}
	dir := t.TempDir()
	if pre := os.Getenv("TICKBUS_HDRJS_DIR"); pre != "" {
		if _, err := os.Stat(filepath.Join(pre, "node_modules", "hdr-histogram-js")); err != nil {
			t.Fatalf("TICKBUS_HDRJS_DIR=%s holds no node_modules/hdr-histogram-js: %v", pre, err)
		}
		if err := os.Symlink(filepath.Join(pre, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
	} else {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skip("npm is not installed (needed to install hdr-histogram-js); or set TICKBUS_HDRJS_DIR")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-save", "--no-audit", "--no-fund",
			"--no-package-lock", "--prefix", dir, "hdr-histogram-js@"+Version)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(dir, ".npm"), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm could not install hdr-histogram-js@%s (no registry?): %v\n%s", Version, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "read.js"), readJS, 0o644); err != nil {
		t.Fatal(err)
	}
	return &Reader{dir: dir}
}

// Read decodes hists (V2 compressed base64) and, if hlog is not empty, the
// interval log at that path, and returns what hdr-histogram-js found.
func (r *Reader) Read(ctx context.Context, hists []string, hlog string, percentiles []float64) (*Result, error) {
	in, err := json.Marshal(map[string]any{"hists": hists, "hlog": hlog, "percentiles": percentiles})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join(r.dir, "read.js"))
	cmd.Dir = r.dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("hdrjs: node: %w: %s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("hdrjs: output %q: %w", out, err)
	}
	return &res, nil
}
