package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/tickbus/tickbus/internal/child"
)

// proc is a child process of a case and its report stream.
type proc struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	reports chan report
	stderr  *tailBuffer
	waitErr chan error
	once    sync.Once
}

// startProc starts role with args (and extra files as fds 3, 4, ...).
func startProc(ctx context.Context, name, role string, args []string, files []*os.File) (*proc, error) {
	cmd, err := child.Command(ctx, role, args...)
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles = files
	cmd.WaitDelay = 2 * time.Second
	p := &proc{name: name, cmd: cmd, reports: make(chan report, 4), stderr: &tailBuffer{max: 4096}, waitErr: make(chan error, 1)}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), maxReportLine)
		for sc.Scan() {
			r, err := decodeReport(sc.Bytes())
			if err != nil {
				r = report{Done: true, Err: err.Error()}
			}
			p.reports <- r
		}
		close(p.reports)
		p.waitErr <- cmd.Wait()
	}()
	return p, nil
}

// send writes one line to the process's stdin.
func (p *proc) send(line string) error {
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		return fmt.Errorf("bench: %s: write: %w", p.name, err)
	}
	return nil
}

// next waits for the process's next report.
func (p *proc) next(ctx context.Context) (report, error) {
	select {
	case r, ok := <-p.reports:
		if !ok {
			return report{}, fmt.Errorf("bench: %s exited without a report: %s", p.name, p.stderr.String())
		}
		if r.Err != "" {
			return r, fmt.Errorf("bench: %s: %s", p.name, r.Err)
		}
		return r, nil
	case <-ctx.Done():
		return report{}, fmt.Errorf("bench: %s: %w", p.name, ctx.Err())
	}
}

// ready waits for the ready line.
func (p *proc) ready(ctx context.Context) (report, error) {
	r, err := p.next(ctx)
	if err == nil && !r.Ready {
		err = fmt.Errorf("bench: %s: done before ready", p.name)
	}
	return r, err
}

// done waits for the final report.
func (p *proc) done(ctx context.Context) (report, error) {
	r, err := p.next(ctx)
	if err == nil && !r.Done {
		err = fmt.Errorf("bench: %s: second ready line", p.name)
	}
	return r, err
}

// stop closes stdin (a server exits on EOF), waits for exit and returns the
// process's CPU time. A process still running after the wait is killed.
func (p *proc) stop(wait time.Duration) (time.Duration, error) {
	var err error
	p.once.Do(func() {
		_ = p.stdin.Close()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case err = <-p.waitErr:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			err = <-p.waitErr
			err = errors.Join(fmt.Errorf("bench: %s killed after %v", p.name, wait), err)
		}
		// Drain what is left of the report stream.
		for range p.reports {
		}
	})
	if p.cmd.ProcessState == nil {
		return 0, err
	}
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime(), err
}

// tailBuffer keeps the last max bytes written (a child's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
