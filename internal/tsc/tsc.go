// Package tsc reads the CPU's time-stamp counter where the kernel keeps
// time with it, for hot paths where a vDSO clock read (40-50 ns on this
// project's VM, against about 20 for the counter) is too dear. Callers
// convert counts to nanoseconds with a rate they calibrate against the
// monotonic clock themselves, and fall back to the clock where Trusted is
// false.
package tsc
