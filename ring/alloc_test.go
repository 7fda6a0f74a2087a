package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nopHandler consumes ticks without keeping them.
type nopHandler struct{ ticks, events int }

func (h *nopHandler) OnTicks(ts []Tick) { h.ticks += len(ts) }
func (h *nopHandler) OnEvent(Event)     { h.events++ }

func TestHotPath_ZeroAllocsPerPublishAndPoll(t *testing.T) {
	for _, mode := range []Mode{Lossy, Reliable} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := newTopo(t, HomeConfig{JournalSlots: 1024}, WriterConfig{})
			r := tp.addRing(RingConfig{Slots: 1024, Mode: mode})
			payload := make([]byte, 64)
			h := &nopHandler{}
			rd := r.Reader()
			batch := make([]Tick, 8)
			for i := range batch {
				batch[i].Payload = payload
			}
			allocs := testing.AllocsPerRun(2000, func() {
				if _, err := tp.w.Publish(1, payload, 5); err != nil {
					panic(err)
				}
				rd.Poll(h)
			})
			assert.Zero(t, allocs, "allocs per publish+poll")
			allocs = testing.AllocsPerRun(200, func() {
				if _, err := tp.w.PublishBatch(batch); err != nil {
					panic(err)
				}
				rd.Poll(h)
			})
			assert.Zero(t, allocs, "allocs per batch publish+poll")
			allocs = testing.AllocsPerRun(1000, func() { rd.Poll(h) })
			assert.Zero(t, allocs, "allocs per idle poll")
			var tk Tick
			buf := make([]byte, 128)
			allocs = testing.AllocsPerRun(1000, func() {
				if _, err := tp.w.Publish(1, payload, 5); err != nil {
					panic(err)
				}
				if ok, _, err := rd.ReadInto(&tk, buf); !ok || err != nil {
					panic("ReadInto")
				}
			})
			assert.Zero(t, allocs, "allocs per publish+ReadInto")
			require.Zero(t, h.events)
		})
	}
}
