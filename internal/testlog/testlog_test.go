package testlog

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBuf_ConcurrentWritesAllKept(t *testing.T) {
	var b Buf
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
			}
		}()
	}
	wg.Wait()
	assert.Len(t, b.String(), 800)
}
