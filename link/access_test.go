package link

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/rdma"
)

type syncBuf = testlog.Buf

// A burst of requests naming an rkey the peer may not use, between two
// devices of one provider as link opens them (shm, tcp): the first fails
// with StatusRemoteAccess, the memory untouched, both queue pairs go to
// ERR, and the device that caught it (the target's on tcp, whose responder
// checks; the requester's on shm, which checks before it copies) counts it
// once (RemoteAccessErrors) and logs it once, however many of the burst
// were behind it (they complete flushed, or are never applied).
func TestDevices_RemoteAccessError_QPToErrCountedAndLoggedOnce(t *testing.T) {
	type counter interface{ RemoteAccessErrors() uint64 }
	for _, prov := range Providers() {
		t.Run(prov, func(t *testing.T) {
			var logA, logB syncBuf
			devsA := NewDevices(DevicesConfig{HostID: "h", Logger: zerolog.New(&logA)})
			defer devsA.Close()
			devsB := NewDevices(DevicesConfig{HostID: "h", Logger: zerolog.New(&logB)})
			defer devsB.Close()
			devA, err := devsA.Get(prov)
			require.NoError(t, err)
			dev, err := devsB.Get(prov)
			require.NoError(t, err)
			cA, ok := devA.(counter)
			require.True(t, ok, "%s counts remote access errors", prov)
			cB := dev.(counter)
			a, err := OpenConfined(devA, Query)
			require.NoError(t, err)
			defer a.Close()
			b, err := OpenConfined(dev, Query)
			require.NoError(t, err)
			defer b.Close()
			target, err := dev.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
			require.NoError(t, err)
			defer target.Close()
			rr, err := b.QP.Grant(target, rdma.AccessRemoteWrite)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- b.QP.Connect(ctx, a.QP.LocalEndpoint()) }()
			require.NoError(t, a.QP.Connect(ctx, b.QP.LocalEndpoint()))
			require.NoError(t, <-errc)
			local, err := devA.RegisterMemory(4096, rdma.AccessLocalWrite)
			require.NoError(t, err)
			defer local.Close()
			copy(local.Bytes(), "forged!!")
			before := bytes.Clone(target.Bytes())

			const burst = 8
			posted := 0
			for i := 0; i < burst; i++ {
				wr := rdma.WorkRequest{ID: uint64(i + 1), Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 0, 8),
					Remote: rdma.RemoteAddr{Addr: rr.Addr + uint64(8*i), RKey: rr.RKey ^ 0x5a5a5a5a}}
				if a.QP.PostSend(&wr) != nil {
					break // the QP went to ERR under the burst: nothing more is queued
				}
				posted++
			}
			require.Positive(t, posted)
			var sts []rdma.Status
			buf := make([]rdma.Completion, burst)
			for end := time.Now().Add(10 * time.Second); len(sts) < posted; runtime.Gosched() {
				require.True(t, time.Now().Before(end), "%d of %d completions", len(sts), posted)
				n := a.CQ.Poll(buf)
				for _, c := range buf[:n] {
					sts = append(sts, c.Status)
				}
			}
			assert.Equal(t, rdma.StatusRemoteAccess, sts[0], "the first of the burst")
			for i, st := range sts[1:] {
				assert.Contains(t, []rdma.Status{rdma.StatusRemoteAccess, rdma.StatusFlushed}, st, "request %d of the burst", i+2)
			}
			assert.Equal(t, before, target.Bytes(), "memory untouched")
			require.Eventually(t, func() bool { return a.QP.State() == rdma.QPError && b.QP.State() == rdma.QPError },
				10*time.Second, time.Millisecond, "both ends in ERR: %s, %s", a.QP.State(), b.QP.State())
			assert.Equal(t, uint64(1), cA.RemoteAccessErrors()+cB.RemoteAccessErrors(), "counted once")
			caught := &logB // tcp: the target's responder
			if cA.RemoteAccessErrors() == 1 {
				caught = &logA // shm: the requester checks
			}
			time.Sleep(50 * time.Millisecond) // a second log line, were there one, would be written by now
			lines := 0
			for _, l := range strings.Split(caught.String(), "\n") {
				if strings.Contains(l, "remote access") {
					lines++
				}
			}
			assert.Equal(t, 1, lines, "logged once by the device that caught it:\n%s", caught.String())
		})
	}
}
