package tickbus_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExamples_BuildAsAModuleOfTheirOwnOutsideTheTree copies examples/ out
// of the repository, points its replace line at the repository, and builds
// every program in it: what a user's module sees, internal packages out
// of reach.
func TestExamples_BuildAsAModuleOfTheirOwnOutsideTheTree(t *testing.T) {
	if testing.Short() {
		t.Skip("links five programs (slow on a loaded machine); run without -short")
	}
	repo, err := filepath.Abs(".")
	require.NoError(t, err)
	dir := t.TempDir()
	var mains int
	err = filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("examples", path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if d.Name() == "main.go" {
			mains++
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, mains, 5, "sub, pub, feedhandler, engine, probe")

	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^replace github\.com/tickbus/tickbus => .*$`)
	require.Regexp(t, re, string(mod), "examples/go.mod requires tickbus through a replace line")
	mod = re.ReplaceAll(mod, []byte("replace github.com/tickbus/tickbus => "+repo))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), mod, 0o644))

	for _, args := range [][]string{{"build", "-o", os.DevNull, "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s in a copy of examples/:\n%s", strings.Join(args, " "), out)
	}
}

// TestREADME_FirstGoBlockIsTheSmallestSubscriber: the README's usage opens
// with examples/sub/main.go, byte for byte, so it compiles (the build test
// above builds it), and it is at most 15 lines.
func TestREADME_FirstGoBlockIsTheSmallestSubscriber(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	sub, err := os.ReadFile("examples/sub/main.go")
	require.NoError(t, err)
	lines := strings.Count(string(sub), "\n")
	assert.LessOrEqual(t, lines, 15, "the smallest subscriber, whole file")

	blocks := regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.GreaterOrEqual(t, len(blocks), 2)
	assert.Equal(t, "sh", blocks[0][1], "the README opens with the two set-up commands")
	assert.Contains(t, blocks[0][2], "go run ./cmd/tickbus demo")
	assert.Contains(t, blocks[0][2], "go test ./...")
	assert.Equal(t, "go", blocks[1][1], "the first code block after them is Go")
	assert.Equal(t, string(sub), blocks[1][2], "README's first Go block equals examples/sub/main.go")
	intro := string(readme[:strings.Index(string(readme), "```")])
	assert.Contains(t, intro, "tickbus is a market-data bus", "the README opens with what tickbus is")
}
