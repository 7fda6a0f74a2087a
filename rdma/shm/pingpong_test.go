package shm_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

func init() { child.Register("shm-pong", pongMain) }

const pingDone = ^uint64(0)

// pongMain answers pings: it spins on word 0 of its region and writes each
// new value back into word 0 of the pinger's region with an 8-byte WRITE.
// Stdin: the pinger's endpoint and region, hex, one line each.
func pongMain([]string) int {
	d, err := shm.Open(shm.Config{})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer d.Close()
	cq, _ := d.CreateCQ(64)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	ep, _ := qp.LocalEndpoint().MarshalBinary()
	rr, _ := mr.Remote().MarshalBinary()
	fmt.Printf("%x\n%x\n", ep, rr)
	sc := bufio.NewScanner(os.Stdin)
	var pep rdma.Endpoint
	var prr rdma.RemoteRegion
	for _, dst := range []interface{ UnmarshalBinary([]byte) error }{&pep, &prr} {
		if !sc.Scan() {
			return 1
		}
		b, err := hex.DecodeString(sc.Text())
		if err != nil || dst.UnmarshalBinary(b) != nil {
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := qp.Connect(ctx, pep); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("OK")
	word := (*uint64)(unsafe.Pointer(&mr.Bytes()[0]))
	var val [8]byte
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: val[:], Remote: rdma.RemoteAddr{Addr: prr.Addr, RKey: prr.RKey}}
	buf := make([]rdma.Completion, 64)
	last := uint64(0)
	for n := 0; ; n++ {
		v := atomic.LoadUint64(word) // pairs with the pinger's 8-byte WRITE
		if v == last {
			if n%(1<<20) == 0 && qp.State() != rdma.QPReadyToSend {
				return 0 // the pinger went away
			}
			runtime.Gosched()
			continue
		}
		if v == pingDone {
			return 0
		}
		last = v
		*(*uint64)(unsafe.Pointer(&val[0])) = v
		wr.Flags = rdma.FlagInline
		if v%32 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		if err := qp.PostSend(&wr); err != nil {
			return 1
		}
		cq.Poll(buf)
	}
}

// BenchmarkPingPong_CrossProcess measures the round trip of an 8-byte
// WRITE to another process and its 8-byte WRITE back, each side spinning
// (with runtime.Gosched) on an atomic load. ns/op is the round trip; the
// percentiles come from an HdrHistogram of each round trip.
func BenchmarkPingPong_CrossProcess(b *testing.B) {
	cmd, err := child.Command(context.Background(), "shm-pong")
	if err != nil {
		b.Fatal(err)
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	var cep rdma.Endpoint
	var crr rdma.RemoteRegion
	for _, dst := range []interface{ UnmarshalBinary([]byte) error }{&cep, &crr} {
		if !sc.Scan() {
			b.Fatal("pong process exited")
		}
		raw, err := hex.DecodeString(sc.Text())
		if err != nil {
			b.Fatal(sc.Text())
		}
		if err := dst.UnmarshalBinary(raw); err != nil {
			b.Fatal(err)
		}
	}
	d, err := shm.Open(shm.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	cq, _ := d.CreateCQ(64)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64})
	if err != nil {
		b.Fatal(err)
	}
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	if err != nil {
		b.Fatal(err)
	}
	ep, _ := qp.LocalEndpoint().MarshalBinary()
	rr, _ := mr.Remote().MarshalBinary()
	fmt.Fprintf(stdin, "%x\n%x\n", ep, rr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := qp.Connect(ctx, cep); err != nil {
		b.Fatal(err)
	}
	if !sc.Scan() || sc.Text() != "OK" {
		b.Fatalf("pong: %s", sc.Text())
	}
	word := (*uint64)(unsafe.Pointer(&mr.Bytes()[0]))
	var val [8]byte
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: val[:], Remote: rdma.RemoteAddr{Addr: crr.Addr, RKey: crr.RKey}}
	buf := make([]rdma.Completion, 64)
	h := hdrhistogram.New(1, int64(10*time.Second), 3)
	k := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		k++
		*(*uint64)(unsafe.Pointer(&val[0])) = k
		wr.Flags = rdma.FlagInline
		if k%32 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		t0 := time.Now()
		if err := qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		cq.Poll(buf)
		for spins := 0; atomic.LoadUint64(word) != k; spins++ { // pairs with the pong's 8-byte WRITE
			runtime.Gosched()
			if spins%(1<<16) == 0 && qp.State() != rdma.QPReadyToSend {
				b.Fatal("pong process went away")
			}
		}
		_ = h.RecordValue(int64(time.Since(t0)))
	}
	b.StopTimer()
	*(*uint64)(unsafe.Pointer(&val[0])) = pingDone
	_ = qp.PostSend(&rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: val[:], Remote: wr.Remote})
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "p99.9-ns")
	b.ReportMetric(float64(h.Max()), "max-ns")
}
