package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzDecode: any bytes as a config file either decode or fail with one of
// the package's errors, and a failure changes nothing.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("pub: {rate: 1e400}\n"))
	f.Add([]byte("ring:\n  slots: &a 5\n  slot_size: *a\n"))
	f.Add([]byte("bus:\n  nats: [1, {x: y}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Default()
		err := Decode(b, &c)
		if err != nil {
			if !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrBadValue) && !errors.Is(err, ErrFile) {
				t.Fatalf("error %v is none of the package's", err)
			}
			if !reflect.DeepEqual(c, Default()) {
				t.Fatalf("a failed decode changed the config: %+v", c)
			}
			return
		}
		_ = c.Validate("pub") // must not panic on whatever decoded
		_ = c.Validate("sub")
		_ = c.Validate("demo")
	})
}
