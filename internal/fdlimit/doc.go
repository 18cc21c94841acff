// Package fdlimit lets a test run a call with only a few file descriptors
// left to the process (EMFILE past them), as a process near its
// RLIMIT_NOFILE is: the tests of the store, the WAL and the mappings use
// it to show that running out of descriptors fails only the call. Leave
// is Linux only (it reads /proc/self/fd).
package fdlimit
