// Command tickbus is the tickbus command line: demo, pub, sub, dash, stat
// and bench. It wires arguments to the app package; see tickbus --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tickbus/tickbus/cmd/tickbus/internal/app"
	"github.com/tickbus/tickbus/internal/child"
)

func main() {
	child.Main() // a re-executed part of tickbus (demo roles, bench roles) runs here and exits
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
