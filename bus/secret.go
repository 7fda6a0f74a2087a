package bus

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// RuntimeDirEnv overrides the directory of the files this host's tickbus
// processes share (the embedded server's secret, generated node keys).
const RuntimeDirEnv = "TICKBUS_RUNTIME_DIR"

// RuntimeDir is where this user's tickbus processes on this host keep their
// secrets: $TICKBUS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/tickbus, else
// /run/user/<uid>/tickbus if that directory exists, else
// os.UserCacheDir()/tickbus, else os.TempDir()/tickbus-<uid>. It is created
// with mode 0700.
func RuntimeDir() (string, error) {
	dir := os.Getenv(RuntimeDirEnv)
	if dir == "" {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			dir = filepath.Join(x, "tickbus")
		} else if run := "/run/user/" + strconv.Itoa(os.Getuid()); isDir(run) {
			dir = filepath.Join(run, "tickbus")
		} else if c, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(c, "tickbus")
		} else {
			dir = filepath.Join(os.TempDir(), "tickbus-"+strconv.Itoa(os.Getuid()))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("bus: runtime dir %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("bus: runtime dir %s: %w", dir, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("bus: runtime dir %s has mode %v, want no access for group or others", dir, st.Mode().Perm())
	}
	return dir, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// secretFile returns the contents of path, creating it (mode 0600) with
// gen's bytes if it does not exist. Concurrent callers, in this process or
// others, all get the same contents: the file appears whole (written aside,
// then linked into place) or not at all.
func secretFile(path string, gen func() ([]byte, error)) ([]byte, error) {
	for range 3 {
		b, err := readSecret(path)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		data, err := gen()
		if err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
		if err != nil {
			return nil, fmt.Errorf("bus: secret %s: %w", path, err)
		}
		_, werr := tmp.Write(data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			_ = os.Remove(tmp.Name())
			return nil, fmt.Errorf("bus: secret %s: %w", path, err)
		}
		err = os.Link(tmp.Name(), path) // fails if another process won
		_ = os.Remove(tmp.Name())
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("bus: secret %s: %w", path, err)
		}
	}
	return readSecret(path)
}

// readSecret reads a secret file that only its owner may read.
func readSecret(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("bus: secret %s has mode %v, want 0600", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("bus: secret %s is empty", path)
	}
	return b, nil
}

// EmbeddedSecretFile is the file (in RuntimeDir) that holds the token the
// embedded NATS servers of this user's tickbus processes require. Hand it
// to another user or host only as you would a password.
const EmbeddedSecretFile = "nats-token"

// embeddedToken returns this host's embedded-server token, creating it.
func embeddedToken() (string, error) {
	dir, err := RuntimeDir()
	if err != nil {
		return "", err
	}
	b, err := secretFile(filepath.Join(dir, EmbeddedSecretFile), func() ([]byte, error) {
		var r [24]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		return []byte(hex.EncodeToString(r[:])), nil
	})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// EmbeddedToken returns the token this user's embedded servers on this
// host require, creating it if no server made it yet: what `tickbus`
// commands use when they dial a loopback server without credentials.
func EmbeddedToken() (string, error) { return embeddedToken() }
