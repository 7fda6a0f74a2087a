package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// startProfile starts a CPU profile of this child process into path (a
// file under Config.Out named after the case, run and role), if path is
// set, and an execution trace (runtime/trace) into tracePath, if that is
// set. The returned stop is never nil.
func startProfile(path, tracePath string) (stop func() error, err error) {
	stopCPU, err := startOne(path, "profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
	if err != nil {
		return func() error { return nil }, err
	}
	stopTrace, err := startOne(tracePath, "trace", trace.Start, trace.Stop)
	if err != nil {
		return func() error { return nil }, errors.Join(err, stopCPU())
	}
	return func() error { return errors.Join(stopTrace(), stopCPU()) }, nil
}

// startOne creates path and starts what start writes into it, if path is
// set; the returned stop is never nil.
func startOne(path, what string, start func(io.Writer) error, end func()) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return func() error { return nil }, fmt.Errorf("bench: %s: %w", what, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return func() error { return nil }, fmt.Errorf("bench: %s: %w", what, err)
	}
	return func() error {
		end()
		return f.Close()
	}, nil
}

// profilePath names a child's profile: <out>/<case>-<mode>-b<batch>-<pubs>p<subs>s-<role><index>.pprof.
func profilePath(cfg Config, a roleArgs, role string) string {
	if !cfg.Profile || cfg.Out == "" {
		return ""
	}
	return childPath(cfg, a, role, ".pprof")
}

// tracePath names a child's execution trace: as its profile, .trace.
func tracePath(cfg Config, a roleArgs, role string) string {
	if !cfg.Trace || cfg.Out == "" {
		return ""
	}
	return childPath(cfg, a, role, ".trace")
}

func childPath(cfg Config, a roleArgs, role, ext string) string {
	name := fmt.Sprintf("%s-%s-b%d-%dp%ds-%s%d%s", a.transport, a.mode, a.batch, a.pubs, a.subs, role, a.index, ext)
	return filepath.Join(cfg.Out, strings.ReplaceAll(name, "/", "_"))
}
