package config

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Logger builds the control-path logger the Log section describes, writing
// to w (os.Stderr if nil).
func (c *Config) Logger(w io.Writer) (zerolog.Logger, error) { return c.Log.Logger(w) }

// Logger builds the logger l describes, writing to w (os.Stderr if nil).
func (l Log) Logger(w io.Writer) (zerolog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(l.Level)))
	if err != nil || l.Level == "" {
		return zerolog.Nop(), bad("log.level", l.Level, "trace, debug, info, warn, error or disabled")
	}
	switch l.Format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly + ".000"}
	default:
		return zerolog.Nop(), bad("log.format", l.Format, "json or console")
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
