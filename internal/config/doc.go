// Package config loads and checks the tickbus command's configuration: a
// strict YAML loader (DecodeFile) that names the key, the value and what was
// expected for every unknown key or bad value, the Config of the demo, pub
// and sub commands with its validation, the flags that override it, and the
// logger it describes.
//
// Precedence: built-in defaults, then the YAML file named by --config, then
// flags given on the command line (Parse).
package config
