// Package app is what the tickbus command does: one function per command
// (demo, pub, sub, dash, stat, bench), each taking its arguments and
// writers and returning an exit status. main only hands it os.Args and a
// context cancelled by SIGINT or SIGTERM.
//
// Exit status: 0 success; 1 the command ran and failed (for demo: something
// was lost); 2 bad usage or configuration, said on stderr.
package app
