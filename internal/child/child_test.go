package child_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
)

func init() {
	child.Register("echo-args", func(args []string) int {
		os.Stdout.WriteString(strings.Join(args, ",") + "\n")
		return 7
	})
}

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

func TestCommand_RunsRoleInNewProcess(t *testing.T) {
	cmd, err := child.Command(context.Background(), "echo-args", "a", "--flag", "b")
	require.NoError(t, err)
	out, err := cmd.Output()
	var exit interface{ ExitCode() int }
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 7, exit.ExitCode())
	assert.Equal(t, "a,--flag,b\n", string(out))
}

func TestCommand_UnknownRole(t *testing.T) {
	_, err := child.Command(context.Background(), "nope")
	require.ErrorContains(t, err, `unknown role "nope"`)
}
