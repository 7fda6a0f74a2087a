package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
)

// startProfile starts a CPU profile of this child process into path (a
// file under Config.Out named after the case, run and role), if path is
// set. The returned stop is never nil.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return func() error { return nil }, fmt.Errorf("bench: profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() error { return nil }, fmt.Errorf("bench: profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// profilePath names a child's profile: <out>/<case>-<mode>-b<batch>-<pubs>p<subs>s-<role><index>.pprof.
func profilePath(cfg Config, a roleArgs, role string) string {
	if !cfg.Profile || cfg.Out == "" {
		return ""
	}
	name := fmt.Sprintf("%s-%s-b%d-%dp%ds-%s%d.pprof", a.transport, a.mode, a.batch, a.pubs, a.subs, role, a.index)
	return filepath.Join(cfg.Out, strings.ReplaceAll(name, "/", "_"))
}
