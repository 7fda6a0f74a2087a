// Package hdrjs is a test helper: it reads tickbus's histograms with a
// reader tickbus did not write, the npm package hdr-histogram-js run in
// node, to show that what tickbus sends and logs is HdrHistogram's standard
// encoding.
//
// Setup installs the package into a temporary directory with npm (or uses
// the node_modules directory named by TICKBUS_HDRJS_DIR, for offline runs)
// and skips the test, saying why, when node, npm or the registry is missing.
package hdrjs
