package dash

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/stats"
)

//go:embed web
var webFS embed.FS

// DefaultListen is where the dashboard listens unless configured.
const DefaultListen = "127.0.0.1:8222"

// Config configures the dashboard.
type Config struct {
	// NATS says how to reach the server; ignored when Client is set.
	NATS NATSConfig
	// Client, if set, is an already connected client whose stats the
	// dashboard watches (its prefix is the client's; Prefix is ignored);
	// the dashboard does not close it.
	Client *tickbus.Client
	// Listen is the HTTP listener's host:port (default DefaultListen;
	// "127.0.0.1:0" picks a free port).
	Listen string
	// HlogDir, if set, receives one .hlog interval log per topic and
	// subscriber.
	HlogDir string
	// Prefix of the stats subjects (default stats.DefaultPrefix).
	Prefix string
	// History is how far back the charts reach (default 10 minutes).
	History time.Duration
	// MaxSeries bounds the topic and subscriber pairs tracked (default
	// 256); messages for more are counted and ignored.
	MaxSeries int
	// Logger for control paths; the zero value logs nothing.
	Logger zerolog.Logger
}

// RegisterFlags adds the dashboard's flags: --nats (and credentials),
// --listen, --hlog, --prefix, --history.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.NATS.RegisterFlags(fs)
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP `address` for the dashboard and /metrics")
	fs.StringVar(&c.HlogDir, "hlog", c.HlogDir, "write HdrHistogram interval logs (.hlog), one per topic and subscriber, into `dir`")
	fs.StringVar(&c.Prefix, "prefix", c.Prefix, "NATS subject `prefix` of the stats (default "+stats.DefaultPrefix+")")
	fs.DurationVar(&c.History, "history", c.History, "how far back the charts reach (default 10m)")
}

func (c *Config) withDefaults() (Config, error) {
	d := *c
	if d.Listen == "" {
		d.Listen = DefaultListen
	}
	if d.History == 0 {
		d.History = DefaultHistory
	}
	if d.History < 0 {
		return d, fmt.Errorf("%w: history %v, want > 0", ErrConfig, d.History)
	}
	if d.MaxSeries == 0 {
		d.MaxSeries = DefaultMaxSeries
	}
	if d.MaxSeries < 0 {
		return d, fmt.Errorf("%w: max series %d, want > 0", ErrConfig, d.MaxSeries)
	}
	if d.Client == nil {
		if err := d.NATS.validate(); err != nil {
			return d, err
		}
	}
	return d, nil
}

// Server is a running dashboard.
type Server struct {
	cfg   Config
	store *store
	cl    *tickbus.Client
	ownCl bool
	watch *tickbus.StatsWatch
	ln    net.Listener
	http  *http.Server
	url   string
	hub   *hub

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	served    chan error
}

// Start connects to NATS, subscribes to the stats, listens and serves in
// the background. ctx bounds the start only; Close stops the server.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: c, done: make(chan struct{}), served: make(chan error, 1), hub: newHub()}
	s.store = newStore(c.Logger, c.History, c.MaxSeries, c.HlogDir)
	s.store.onUpdate = s.hub.mark

	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("dash: listen on %s: %w", c.Listen, err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String() + "/"

	if c.Client != nil {
		s.cl = c.Client
	} else {
		cl, err := c.NATS.Connect(ctx, c.Prefix)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.cl, s.ownCl = cl, true
	}
	subject := stats.SubjectAll(c.Prefix)
	// A flood beyond what the watch buffers is dropped by the client and
	// counted (watchDropped).
	watch, err := s.cl.WatchStats("", s.store.handle)
	if err != nil {
		_ = ln.Close()
		if s.ownCl {
			_ = s.cl.Close()
		}
		return nil, fmt.Errorf("dash: subscribe %s: %w", subject, err)
	}
	s.watch = watch

	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s.store})
	mux := http.NewServeMux()
	assets, _ := fs.Sub(webFS, "web")
	mux.Handle("GET /", selfOnly(http.FileServerFS(assets)))
	mux.HandleFunc("GET /api/state", s.handleState)
	mux.HandleFunc("GET /events", s.handleEvents)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil}))
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { s.served <- s.http.Serve(ln) }()
	go s.watchDropped()
	c.Logger.Info().Str("url", s.url).Str("subject", subject).Str("nats", redactURL(s.cl.URL())).
		Str("hlog", c.HlogDir).Msg("dashboard serving")
	return s, nil
}

// selfOnly tells the browser that the page loads nothing from anywhere but
// this server.
func selfOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// Serve runs the dashboard until ctx is done, then closes it.
func Serve(ctx context.Context, cfg Config) error {
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return s.Close()
	case err := <-s.served:
		cerr := s.Close()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return errors.Join(err, cerr)
	}
}

// URL is the dashboard's address, e.g. http://127.0.0.1:8222/.
func (s *Server) URL() string { return s.url }

// Close stops serving, unsubscribes, closes the client if the server
// opened it and closes the hlog files. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.hub.close()
		var errs []error
		errs = append(errs, s.watch.Stop())
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, s.http.Close())
		}
		if s.ownCl {
			errs = append(errs, s.cl.Close())
		}
		errs = append(errs, s.store.close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// watchDropped counts messages the NATS client dropped because the
// subscription fell behind (a flood).
func (s *Server) watchDropped() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last int
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			n, err := s.watch.Dropped()
			if err != nil || n <= last {
				continue
			}
			s.store.rejectN(reasonDropped, stats.SubjectAll(s.cfg.Prefix), uint64(n-last),
				fmt.Errorf("dash: NATS dropped %d stats messages: the dashboard fell behind", n-last))
			last = n
		}
	}
}

// State is what /api/state returns.
type State struct {
	Subject string       `json:"subject"`
	Now     int64        `json:"now"` // Unix ms
	History int64        `json:"history_ms"`
	Series  []SeriesView `json:"series"`
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	st := State{Subject: stats.SubjectAll(s.cfg.Prefix), Now: time.Now().UnixMilli(),
		History: s.cfg.History.Milliseconds(), Series: s.store.views(true)}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(st)
}

// handleEvents streams server-sent events: "series" with one series'
// summaries and the points this client has not been sent yet, as messages
// land (several messages between two sends go out as one event, nothing is
// skipped), and a comment every 15 s to keep proxies from closing the
// stream.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	c := s.hub.join()
	defer s.hub.leave(c)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 1000\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	sent := map[string]int64{} // key → time of the last point sent
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-c.signal:
			for _, key := range c.take() {
				v, ok := s.store.viewSince(key, sent[key])
				if !ok {
					continue
				}
				if n := len(v.Points); n > 0 {
					sent[key] = v.Points[n-1].T
				}
				b, err := json.Marshal(v)
				if err != nil {
					continue
				}
				if _, err := fmt.Fprintf(w, "event: series\ndata: %s\n\n", b); err != nil {
					return
				}
			}
			fl.Flush()
		}
	}
}
