package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DecodeFile reads the YAML file at path onto into (a pointer to a struct
// already holding defaults; keys absent from the file keep them). Every key
// must name a field (yaml tag, or the lower-cased field name as yaml.v3
// does) and every value must fit its field; the first that does not is an
// error naming the file, line, dotted key, the value and what was expected.
// An empty file changes nothing. into is left unchanged on any error.
func DecodeFile(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFile, err)
	}
	if err := Decode(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Decode is DecodeFile on bytes.
func Decode(b []byte, into any) error {
	rv := reflect.ValueOf(into)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: Decode into %T, want a pointer to a struct", into)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file: defaults stand
		}
		return fmt.Errorf("%w: not valid YAML: %v", ErrFile, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one YAML document, want one", ErrFile)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	// Check every key and value on a copy first, with messages that name
	// them; then decode for real with yaml.v3's own strict mode.
	tmp := reflect.New(rv.Elem().Type())
	tmp.Elem().Set(rv.Elem())
	if err := walk(root, tmp.Elem(), ""); err != nil {
		return err
	}
	final := reflect.New(rv.Elem().Type())
	final.Elem().Set(rv.Elem())
	strict := yaml.NewDecoder(bytes.NewReader(b))
	strict.KnownFields(true)
	if err := strict.Decode(final.Interface()); err != nil {
		return fmt.Errorf("%w: %v", ErrBadValue, err)
	}
	rv.Elem().Set(final.Elem())
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// walk checks node against v, whose dotted key is path.
func walk(node *yaml.Node, v reflect.Value, path string) error {
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Time]() {
		if node.Kind != yaml.MappingNode {
			if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
				return nil
			}
			return fmt.Errorf("%w: line %d: %s = %s: want a mapping of %s", ErrBadValue, node.Line, keyName(path), show(node), strings.Join(fieldNames(v.Type()), ", "))
		}
		fields := fieldIndex(v.Type())
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, val := node.Content[i], node.Content[i+1]
			idx, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("%w: line %d: %q; known keys%s: %s", ErrUnknownKey, k.Line, join(path, k.Value),
					under(path), strings.Join(fieldNames(v.Type()), ", "))
			}
			if err := walk(val, v.FieldByIndex(idx), join(path, k.Value)); err != nil {
				return err
			}
		}
		return nil
	}
	target := reflect.New(v.Type())
	if err := node.Decode(target.Interface()); err != nil || wholeFromFraction(node, v.Type()) {
		return fmt.Errorf("%w: line %d: %s = %s: want %s", ErrBadValue, node.Line, keyName(path), show(node), describe(v.Type()))
	}
	return nil
}

// wholeFromFraction reports a float going into an integer field, which
// yaml.v3 would truncate in silence (1.5 into an int gives 1).
func wholeFromFraction(node *yaml.Node, t reflect.Type) bool {
	if node.Kind != yaml.ScalarNode || node.ShortTag() != "!!float" || t == durationType {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func keyName(path string) string {
	if path == "" {
		return "the document"
	}
	return path
}

func under(path string) string {
	if path == "" {
		return ""
	}
	return " under " + path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func show(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "an alias"
}

// describe says in words what a Go type accepts.
func describe(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 500ms, 5s or 1m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number >= 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + describe(t.Elem())
	case reflect.Map:
		return "a mapping of " + describe(t.Key()) + " to " + describe(t.Elem())
	case reflect.Pointer:
		return describe(t.Elem())
	}
	return t.String()
}

// fieldIndex maps each YAML key of struct type t to its field, as yaml.v3
// names them: the tag's name, else the lower-cased field name; ",inline"
// structs lend their keys; "-" and unexported fields have none.
func fieldIndex(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") && f.Type.Kind() == reflect.Struct {
			for k, idx := range fieldIndex(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = []int{i}
	}
	return out
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for k := range fieldIndex(t) {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
