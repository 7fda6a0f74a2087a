package dash

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// browser drives headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: Chromium reads NUL-terminated JSON commands on
// fd 3 and writes replies and events on fd 4), so the test needs nothing
// but the chromium binary.
type browser struct {
	cmd     *exec.Cmd
	in      *os.File // our end of Chromium's fd 3
	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpReply
	done    chan struct{}
	stderr  *strings.Builder
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func startBrowser(t *testing.T, ctx context.Context, extra ...string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe() // we write commands, Chromium reads fd 3
	if err != nil {
		t.Fatal(err)
	}
	resR, resW, err := os.Pipe() // Chromium writes fd 4, we read
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--remote-debugging-pipe", "--user-data-dir=" + t.TempDir()}, extra...)
	args = append(args, "about:blank")
	cmd := exec.CommandContext(ctx, chromiumPath, args...)
	cmd.ExtraFiles = []*os.File{cmdR, resW}
	// Chromium forks helpers: give it its own process group and end the
	// whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	b := &browser{cmd: cmd, in: cmdW, pending: map[int]chan cdpReply{}, done: make(chan struct{}), stderr: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{w: b.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = cmdR.Close()
	_ = resW.Close()
	go b.read(resR)
	t.Cleanup(func() {
		_, _ = b.call(context.Background(), "", "Browser.close", nil)
		_ = b.in.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return b
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *browser) read(r *os.File) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends one command (to the browser, or to a page's session) and
// waits for its reply.
func (b *browser) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return nil, fmt.Errorf("cdp %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, fmt.Errorf("cdp %s: %s", method, r.Error.Message)
		}
		return r.Result, nil
	case <-b.done:
		return nil, fmt.Errorf("cdp %s: browser gone", method)
	case <-ctx.Done():
		return nil, fmt.Errorf("cdp %s: %w", method, ctx.Err())
	}
}

// open creates a tab at url and returns its session id.
func (b *browser) open(ctx context.Context, url string, width, height int) (string, error) {
	res, err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		return "", err
	}
	var tg struct {
		TargetID string `json:"targetId"`
	}
	if err := json.Unmarshal(res, &tg); err != nil {
		return "", err
	}
	res, err = b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true})
	if err != nil {
		return "", err
	}
	var at struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &at); err != nil {
		return "", err
	}
	if _, err := b.call(ctx, at.SessionID, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}); err != nil {
		return "", err
	}
	if _, err := b.call(ctx, at.SessionID, "Page.navigate", map[string]any{"url": url}); err != nil {
		return "", err
	}
	return at.SessionID, nil
}

// eval evaluates a JavaScript expression in the page and returns its value
// as JSON.
func (b *browser) eval(ctx context.Context, session, expr string) (json.RawMessage, error) {
	res, err := b.call(ctx, session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, err
	}
	if r.ExceptionDetails != nil {
		return nil, fmt.Errorf("page: %s", r.ExceptionDetails.Text)
	}
	return r.Result.Value, nil
}

// screenshot returns a PNG of the page.
func (b *browser) screenshot(ctx context.Context, session string) ([]byte, error) {
	res, err := b.call(ctx, session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Data []byte `json:"data"` // base64 in JSON, decoded by encoding/json
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, err
	}
	return r.Data, nil
}
