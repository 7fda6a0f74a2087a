package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit statuses.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// command is one subcommand.
type command struct {
	synopsis string // one line for the command list
	about    string // the paragraph --help starts with
	run      func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name string, c command) { commands[name] = c }

// Main runs the command named by args[0].
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run(ctx, []string{"--help"}, stdout, stdout)
			}
		}
		usage(stdout)
		return ExitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "tickbus: unknown command %q\n\n", name)
		usage(stderr)
		return ExitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "tickbus: a market-data bus; publishers write ticks straight into subscribers' rings.")
	fmt.Fprintln(w, "\nUsage: tickbus <command> [flags]   (tickbus <command> --help explains every flag)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-6s %s\n", n, commands[n].synopsis)
	}
	fmt.Fprintln(w, "\nEvery command takes --config FILE (YAML), --log-level and --log-format; see configs/.")
}

// usageError prints err and says where help is, returning ExitUsage; for
// --help it returns ExitOK (flag already printed the usage).
func usageError(stderr io.Writer, cmd string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "tickbus") {
		msg = "tickbus " + cmd + ": " + msg
	}
	fmt.Fprintf(stderr, "%s\n(tickbus %s --help lists every flag)\n", msg, cmd)
	return ExitUsage
}
