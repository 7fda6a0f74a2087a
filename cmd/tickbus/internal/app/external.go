package app

import (
	"flag"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/internal/config"
)

// parseExternal parses the flags of a command whose configuration belongs
// to another package (bench, dash): the common flags, then the package's
// own RegisterFlags; --config loads a YAML file onto def() with the
// strict loader (keys are the lower-cased field names, or yaml tags).
func parseExternal[T any](cmd string, args []string, stderr io.Writer, def func() T, register func(*T, *flag.FlagSet)) (*T, zerolog.Logger, error) {
	cfg := def()
	var file string
	logc := config.Default().Log
	fs := flag.NewFlagSet("tickbus "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	config.RegisterCommon(fs, &file, &logc)
	register(&cfg, fs)
	fs.Usage = func() { config.Usage(fs, cmd, commands[cmd].about) }
	err := config.Parse(fs, args, &file, func(path string) error {
		d := def()
		if err := config.DecodeFile(path, &d); err != nil {
			return err
		}
		cfg = d
		return nil
	})
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return nil, zerolog.Nop(), err
	}
	log, err := logc.Logger(stderr)
	if err != nil {
		return nil, zerolog.Nop(), err
	}
	return &cfg, log, nil
}
