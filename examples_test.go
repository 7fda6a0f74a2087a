package tickbus_test

import (
	"go/format"
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

// TestREADME_OpensWithTheSmallestSubscriberThenTheSmallestPublisher: the
// README's usage opens with examples/sub/main.go and, next, with
// examples/pub/main.go, byte for byte, so both compile (the build test
// above builds them), and each is at most 15 lines, gofmt'd.
func TestREADME_OpensWithTheSmallestSubscriberThenTheSmallestPublisher(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.GreaterOrEqual(t, len(blocks), 3)
	assert.Equal(t, "sh", blocks[0][1], "the README opens with the two set-up commands")
	assert.Contains(t, blocks[0][2], "go run ./cmd/tickbus demo")
	assert.Contains(t, blocks[0][2], "go test ./...")
	for i, name := range []string{"sub", "pub"} {
		src, err := os.ReadFile(filepath.Join("examples", name, "main.go"))
		require.NoError(t, err)
		assert.LessOrEqual(t, strings.Count(string(src), "\n"), 15, "the smallest %s, whole file", name)
		formatted, err := format.Source(src)
		require.NoError(t, err)
		assert.Equal(t, string(formatted), string(src), "examples/%s/main.go is gofmt'd", name)
		block := blocks[1+i]
		assert.Equal(t, "go", block[1], "Go block %d after the set-up commands", i+1)
		assert.Equal(t, string(src), block[2], "README's Go block %d equals examples/%s/main.go", i+1, name)
	}
	intro := string(readme[:strings.Index(string(readme), "```")])
	assert.Contains(t, intro, "tickbus is a market-data bus", "the README opens with what tickbus is")
}
