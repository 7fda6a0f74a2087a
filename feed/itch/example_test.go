package itch_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/tickbus/tickbus/feed/itch"
)

// A two-message file: an add order, then its execution. Each message's
// ticks come out in order, the last one flagged last-in-batch.
func ExampleFeed() {
	var file []byte
	msg := func(fields ...any) {
		var m bytes.Buffer
		for _, f := range fields {
			_ = binary.Write(&m, binary.BigEndian, f)
		}
		file = binary.BigEndian.AppendUint16(file, uint16(m.Len()))
		file = append(file, m.Bytes()...)
	}
	ts := [6]byte{0, 0, 0x1f, 0x1a, 0x5e, 0x00} // ns since midnight
	msg(byte('A'), uint16(42), uint16(0), ts, uint64(1), byte('B'), uint32(300), [8]byte{'A', 'A', 'P', 'L', ' ', ' ', ' ', ' '}, uint32(1012500))
	msg(byte('E'), uint16(42), uint16(0), ts, uint64(1), uint32(100), uint64(7))

	f := itch.NewFeed(bytes.NewReader(file), time.Date(2019, 1, 30, 0, 0, 0, 0, time.UTC))
	for {
		ticks, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, t := range ticks {
			fmt.Println(string(t.AppendText(nil)))
		}
	}
	// Output:
	// XNAS #42 bid 101.25 x 300 xseq=1 flags=0x2
	// XNAS #42 trade 101.25 x 100 xseq=2
	// XNAS #42 bid 101.25 x 200 xseq=2 flags=0x2
}
