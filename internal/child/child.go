// Package child runs parts of tickbus as real separate processes by
// re-executing the current binary (the tickbus command or a test binary) in a
// named role. A package registers its roles in init; main and every TestMain
// that spawns children call Main first:
//
//	func init() { child.Register("ring-pub", pubMain) }
//
//	func TestMain(m *testing.M) { child.Main(); os.Exit(m.Run()) }
//
//	cmd, err := child.Command(ctx, "ring-pub", "--topic", "t")
package child

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
)

// EnvRole names the role a re-executed process runs.
const EnvRole = "TICKBUS_CHILD_ROLE"

// Func is a role's main: it gets the arguments after the role and returns
// the process's exit status.
type Func func(args []string) int

var roles sync.Map // string → Func

// Register adds a role. It panics on a duplicate name, which is a
// programming error found at start-up.
func Register(name string, f Func) {
	if _, dup := roles.LoadOrStore(name, f); dup {
		panic("child: role registered twice: " + name)
	}
}

// Main runs the role named by the environment, if any, and exits with its
// status. Without the variable it returns at once.
func Main() {
	name, ok := os.LookupEnv(EnvRole)
	if !ok {
		return
	}
	f, found := roles.Load(name)
	if !found {
		fmt.Fprintf(os.Stderr, "child: unknown role %q (known: %v)\n", name, Roles())
		os.Exit(2)
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	os.Exit(f.(Func)(args))
}

// Roles lists the registered role names.
func Roles() []string {
	var names []string
	roles.Range(func(k, _ any) bool { names = append(names, k.(string)); return true })
	sort.Strings(names)
	return names
}

// Command returns a command that runs role in a new process of this binary,
// with args. Stdout and stderr are left for the caller to set; the child
// inherits the environment plus the role variable.
func Command(ctx context.Context, role string, args ...string) (*exec.Cmd, error) {
	if _, ok := roles.Load(role); !ok {
		return nil, fmt.Errorf("child: unknown role %q", role)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("child: own executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{"--"}, args...)...)
	cmd.Env = append(os.Environ(), EnvRole+"="+role)
	return cmd, nil
}
