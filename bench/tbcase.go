package bench

import (
	"context"

	"fmt"
	"time"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// tickbusCase runs ring writers and readers in child processes over one
// provider; this process owns the topics' homes.
type tickbusCase struct {
	name string
	dev  rdma.Device
}

func newTickbusCase(name string) benchCase { return &tickbusCase{name: name} }

func (c *tickbusCase) setup(context.Context, Config) error {
	dev, err := openDevice(tbProvider(c.name))
	if err != nil {
		return fmt.Errorf("bench: %s: open device: %w", c.name, err)
	}
	c.dev = dev
	return nil
}

func (c *tickbusCase) close() error {
	if c.dev == nil {
		return nil
	}
	err := c.dev.Close()
	c.dev = nil
	return err
}

func (c *tickbusCase) latency(ctx context.Context, cfg Config) (phase, error) {
	mode := modeLatency
	if cfg.PingPong {
		mode = modePingPong
	}
	return c.run(ctx, cfg, mode, 1, 1, 1, cfg.Duration)
}

func (c *tickbusCase) throughput(ctx context.Context, cfg Config, batch int) (phase, error) {
	return c.run(ctx, cfg, modeThroughput, batch, 1, 1, cfg.ThroughputDuration)
}

func (c *tickbusCase) scale(ctx context.Context, cfg Config, pubs, subs int) (phase, error) {
	return c.run(ctx, cfg, modeThroughput, 1, pubs, subs, cfg.ThroughputDuration)
}

// tbChild is one child and what it made in step A.
type tbChild struct {
	p       *proc
	made    map[int]tbMadeTopic
	credits map[int][][]byte
}

// run wires one topology (fresh homes, fresh children), runs it and
// tears it down.
func (c *tickbusCase) run(ctx context.Context, cfg Config, mode string, batch, pubs, subs int, d time.Duration) (ph phase, err error) {
	if c.dev == nil {
		return ph, fmt.Errorf("bench: %s: not set up", c.name)
	}
	ctx, cancel := context.WithTimeout(ctx, d+grace+60*time.Second)
	defer cancel()
	var cpu0 time.Duration // this process's CPU from "go" on: the homes' side (tcp: its responders)
	var closers []func() error
	var procs []*proc
	defer func() {
		for _, p := range procs {
			_, serr := p.stop(3 * time.Second)
			if serr != nil && err == nil {
				err = serr
			}
		}
		for i := len(closers) - 1; i >= 0; i-- {
			if cerr := closers[i](); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()

	pp := mode == modePingPong
	topics := []int{0}
	if pp {
		topics = append(topics, 1)
	}
	homes := map[int]*ring.Home{}
	for _, t := range topics {
		h, err := ring.NewHome(c.dev, ring.HomeConfig{SlotSize: tbSlotSize(cfg.Size)})
		if err != nil {
			return ph, fmt.Errorf("bench: home: %w", err)
		}
		closers = append(closers, h.Close)
		homes[t] = h
	}
	hcq, err := c.dev.CreateCQ(4096)
	if err != nil {
		return ph, err
	}
	closers = append(closers, hcq.Close)

	cpuOf := func(k int) int {
		if len(cfg.CPUs) == 0 {
			return -1
		}
		return cfg.CPUs[k%len(cfg.CPUs)]
	}
	base := roleArgs{transport: c.name, mode: mode, rate: cfg.Rate, duration: d, size: cfg.Size, batch: batch,
		idle: cfg.Idle, ringMode: cfg.RingMode, claim: cfg.Claim, pubs: pubs, subs: subs}
	start := func(side string, i, cpu int) (*tbChild, error) {
		a := base
		a.index, a.cpu, a.peers = i, cpu, pubs
		if side == sidePub {
			a.peers = subs
		}
		a.pprof = profilePath(cfg, a, side)
		p, err := startProc(ctx, fmt.Sprintf("%s %s %d", c.name, side, i), roleTB, append([]string{side}, a.argv()...), nil)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		r, err := p.ready(ctx)
		if err != nil {
			return nil, err
		}
		var made tbMade
		if err := decodeWire([]byte(r.Info), &made); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", p.name, err)
		}
		ch := &tbChild{p: p, made: map[int]tbMadeTopic{}, credits: map[int][][]byte{}}
		for _, t := range made.Topics {
			ch.made[t.Topic] = t
		}
		return ch, nil
	}
	var subKids, pubKids []*tbChild
	for j := range subs {
		ch, err := start(sideSub, j, cpuOf(pubs+j))
		if err != nil {
			return ph, err
		}
		subKids = append(subKids, ch)
	}
	for i := range pubs {
		ch, err := start(sidePub, i, cpuOf(i))
		if err != nil {
			return ph, err
		}
		pubKids = append(pubKids, ch)
	}
	writersOf := func(t int) []*tbChild {
		if t == 0 {
			return pubKids
		}
		return subKids[:1]
	}
	readersOf := func(t int) []*tbChild {
		if t == 0 {
			return subKids
		}
		return pubKids[:1]
	}
	// Check every child made what its role needs.
	for _, t := range topics {
		for _, w := range writersOf(t) {
			if m, ok := w.made[t]; !ok || m.HomeEP == nil || len(m.EPs) != len(readersOf(t)) {
				return ph, fmt.Errorf("bench: %s: step A does not match topic %d", w.p.name, t)
			}
		}
		for _, r := range readersOf(t) {
			if m, ok := r.made[t]; !ok || m.Ring == nil || len(m.EPs) != len(writersOf(t)) {
				return ph, fmt.Errorf("bench: %s: step A does not match topic %d", r.p.name, t)
			}
		}
	}
	kids := append(append([]*tbChild{}, subKids...), pubKids...)

	// Step B: writers.
	for _, k := range kids {
		var ww tbWriterWiring
		for _, t := range topics {
			wIdx := indexOf(writersOf(t), k)
			if wIdx < 0 {
				continue
			}
			hq, err := newQP(c.dev, hcq)
			if err != nil {
				return ph, err
			}
			closers = append(closers, hq.Close)
			if err := connect(ctx, hq, k.made[t].HomeEP); err != nil {
				return ph, fmt.Errorf("bench: connect home QP to %s: %w", k.p.name, err)
			}
			hd, err := homes[t].Desc().MarshalBinary()
			if err != nil {
				return ph, err
			}
			hep, err := hq.LocalEndpoint().MarshalBinary()
			if err != nil {
				return ph, err
			}
			wt := tbWriterTopic{Topic: t, Home: hd, HomeEP: hep}
			for _, r := range readersOf(t) {
				wt.Rings = append(wt.Rings, r.made[t].Ring)
				wt.EPs = append(wt.EPs, r.made[t].EPs[wIdx])
			}
			ww.Topics = append(ww.Topics, wt)
		}
		if err := k.p.send(mustJSON(ww)); err != nil {
			return ph, err
		}
		r, err := k.p.ready(ctx)
		if err != nil {
			return ph, err
		}
		var cr tbCredits
		if err := decodeWire([]byte(r.Info), &cr); err != nil {
			return ph, fmt.Errorf("bench: %s: %w", k.p.name, err)
		}
		for _, t := range cr.Topics {
			k.credits[t.Topic] = t.Credits
		}
	}
	// Step C: readers.
	for _, k := range kids {
		var rw tbReaderWiring
		for _, t := range topics {
			rIdx := indexOf(readersOf(t), k)
			if rIdx < 0 {
				continue
			}
			rt := tbReaderTopic{Topic: t}
			for _, w := range writersOf(t) {
				rt.EPs = append(rt.EPs, w.made[t].EPs[rIdx])
				if cr := w.credits[t]; len(cr) > 0 {
					if len(cr) != len(readersOf(t)) {
						return ph, fmt.Errorf("bench: %s: %d credits for %d readers", w.p.name, len(cr), len(readersOf(t)))
					}
					rt.Credits = append(rt.Credits, cr[rIdx])
				}
			}
			rw.Topics = append(rw.Topics, rt)
		}
		if err := k.p.send(mustJSON(rw)); err != nil {
			return ph, err
		}
		if _, err := k.p.ready(ctx); err != nil {
			return ph, err
		}
	}
	cpu0 = selfCPU()
	for _, k := range pubKids {
		if err := k.p.send("go"); err != nil {
			return ph, err
		}
	}
	ph.cores = pubs + subs
	var pubProcs, subProcs []*proc
	for _, k := range pubKids {
		pubProcs = append(pubProcs, k.p)
	}
	for _, k := range subKids {
		subProcs = append(subProcs, k.p)
	}
	ph, err = collect(ctx, ph, pubProcs, subProcs, mode, c.name, func() {
		for _, p := range subProcs {
			_ = p.send("stop") // a subscriber that already ended has closed nothing; an error here shows in its report
		}
	})
	ph.cpu += selfCPU() - cpu0
	return ph, err
}

func indexOf(list []*tbChild, k *tbChild) int {
	for i, x := range list {
		if x == k {
			return i
		}
	}
	return -1
}
