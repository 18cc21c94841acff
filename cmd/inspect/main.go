// Command inspect is the read-only operator CLI of filterstore: it looks
// inside a store directory, or a lone filter file, without writing to it,
// including while the owning process is running.
//
//	inspect ls DIR                    one row per filter
//	inspect info DIR NAME             everything known about one filter
//	inspect check DIR NAME KEY...     membership answers (maybe / no)
//	inspect verify DIR [NAME]         full scrub; exit 1 if problems
//	inspect wal DIR [--dump]          WAL segments, LSN ranges, records
//	inspect file PATH.flt             a lone filter file's header and fill
//	inspect stats DIR NAME [--png F]  fill distribution as a histogram
//	inspect version                   module, Go and on-disk format versions
//	inspect help [CMD]                (also: CMD -h) usage, on stdout
//
// Everything is opened read-only: the catalog through bbolt's read-only
// mode (a shared lock, waiting a bounded time for a writer's transaction),
// filter files through golang.org/x/exp/mmap (or, for the answers of check
// and the numbers of ls and info, the store's own read-only open: shared
// read-only mappings, with the WAL records after each filter's checkpoint
// kept in memory), WAL segments with plain reads through wal.Scan, the
// reader recovery uses. inspect never writes into the store (stats --png
// refuses a FILE inside DIR or any other store), never takes the writer
// lock (DIR/LOCK) and never panics on a bad file.
//
// Exit status: 0 success (verify: no problems); 1 the data is corrupt
// (verify: problems found, each listed with file and offset); 2 usage
// error, or something could not be read (a missing directory, a directory
// that is not a store, an unknown filter, an I/O error).
//
// A panic is reported as one line; set INSPECT_TRACEBACK=1 to also print
// its stack.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/filterstore/filterstore/store"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK       = 0
	exitProblems = 1 // corrupt data; verify found problems
	exitUsage    = 2 // usage error, unreadable input, I/O error
)

// command is one subcommand. Each lives in its own file.
type command struct {
	name  string
	args  string // synopsis of the positional arguments
	short string // one line for the overview
	long  string // what `inspect help NAME` prints before the flags
	// minArgs and maxArgs bound the positional arguments; maxArgs < 0
	// means unlimited.
	minArgs, maxArgs int
	// setup registers the command's flags on fs and returns the function
	// that runs it once fs is parsed.
	setup func(fs *flag.FlagSet) func(e *env, args []string) error
}

// commands in the order the overview lists them.
func commands() []*command {
	return []*command{lsCmd, infoCmd, checkCmd, verifyCmd, walCmd, fileCmd, statsCmd, versionCmd}
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// env is what a running subcommand writes to.
type env struct {
	cmd    string
	stdout io.Writer
	stderr io.Writer
	json   bool
}

// warnf prints one line on stderr, prefixed with the command.
func (e *env) warnf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "inspect %s: %s\n", e.cmd, oneLine(fmt.Sprintf(format, args...)))
}

// cmdError carries an exit status and, unless silent, a message.
type cmdError struct {
	code   int
	err    error
	silent bool // already reported (verify's findings)
	usage  bool // a bad command line: point at -h
}

func (e *cmdError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *cmdError) Unwrap() error { return e.err }

// usageError is a bad command line: exit status 2.
func usageError(format string, args ...any) error {
	return &cmdError{code: exitUsage, err: fmt.Errorf(format, args...), usage: true}
}

// errProblems reports, without a message, that problems were found and
// already printed.
var errProblems = &cmdError{code: exitProblems, silent: true}

// exitCode maps an error to the exit status: corruption is 1, everything
// else (usage, missing files, unknown names, I/O) is 2. A file that could
// not be read (permission denied, an I/O error) is 2 even where the store
// reports it as corrupt.
func exitCode(err error) int {
	var ee *cmdError
	if errors.As(err, &ee) {
		return ee.code
	}
	if unreadable(err) || outOfResources(err) {
		return exitUsage
	}
	if errors.Is(err, store.ErrCorrupt) {
		return exitProblems
	}
	return exitUsage
}

// run is the whole program: it parses args, runs the subcommand, writes
// its output to stdout and diagnostics to stderr, and returns the exit
// status. It never calls os.Exit and never lets a panic escape.
func run(args []string, stdout, stderr io.Writer) (code int) {
	// A mapped file truncated by someone else under our feet raises
	// SIGBUS; make that a recoverable panic instead of a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	name := ""
	defer func() {
		if r := recover(); r != nil {
			reportPanic(stderr, name, r)
			code = exitUsage
		}
	}()
	args = moveGlobalFlags(args)
	if len(args) == 0 {
		fmt.Fprintln(stderr, "inspect: missing command; run 'inspect help' for the list")
		return exitUsage
	}
	out := &outWriter{w: stdout}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		code = runHelp(args[1:], out, stderr)
		if out.err != nil && code == exitOK {
			fmt.Fprintf(stderr, "inspect help: %s\n", oneLine(outputError(out.err, nil).Error()))
			return exitUsage
		}
		return code
	}
	c := findCommand(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "inspect: unknown command %q; run 'inspect help' for the list\n", oneLine(args[0]))
		return exitUsage
	}
	name = c.name
	return runCommand(c, args[1:], out, stderr)
}

// outWriter is stdout that remembers its first write error: every
// command's output goes through one, and run checks it once at the end,
// so output lost to a full disk is never exit status 0 (a closed pipe on
// stdout ends the process by SIGPIPE before the write returns, as the Go
// runtime does for fds 1 and 2).
// After an error every write fails with it.
type outWriter struct {
	w   io.Writer
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = err
	}
	return n, err
}

// outputError is the exit-status-2 error of a command whose output could
// not be written (werr); cmdErr, the command's own error if it is another
// one, is added to the message.
func outputError(werr, cmdErr error) error {
	err := fmt.Errorf("cannot write the output: %w", werr)
	var ee *cmdError
	if cmdErr != nil && !errors.Is(cmdErr, werr) && !(errors.As(cmdErr, &ee) && ee.silent) {
		err = fmt.Errorf("%w (and: %s)", err, oneLine(cmdErr.Error()))
	}
	return &cmdError{code: exitUsage, err: err}
}

// reportPanic prints a recovered panic as one line (with its stack if
// INSPECT_TRACEBACK is set).
func reportPanic(stderr io.Writer, cmd string, r any) {
	if os.Getenv("INSPECT_TRACEBACK") != "" {
		fmt.Fprintf(stderr, "%v\n%s", r, debug.Stack())
	}
	prefix := "inspect"
	if cmd != "" {
		prefix += " " + cmd
	}
	if mappedFault(r) {
		detail := fmt.Sprint(r)
		if a, ok := r.(interface{ Addr() uintptr }); ok {
			detail = fmt.Sprintf("memory fault at %#x", a.Addr())
		}
		fmt.Fprintf(stderr, "%s: a mapped file changed (truncated?) while it was being read: %s\n", prefix, detail)
	} else {
		fmt.Fprintf(stderr, "%s: internal error: %v\n", prefix, oneLine(fmt.Sprint(r)))
	}
}

// mappedFault reports whether a recovered panic is a memory fault in a
// mapping (a page of a file truncated under it) rather than a bug. With
// SetPanicOnFault such a fault panics with a runtime.Error that carries
// the faulting address, as a nil dereference does, but at an address far
// above the unmapped first pages; without it the runtime's text names the
// fault.
func mappedFault(r any) bool {
	re, ok := r.(runtime.Error)
	if !ok {
		return false
	}
	if a, ok := re.(interface{ Addr() uintptr }); ok && a.Addr() >= 1<<16 {
		return true
	}
	return strings.Contains(re.Error(), "fault")
}

// moveGlobalFlags moves a --json given before the command after it:
// inspect --json ls DIR is inspect ls --json DIR.
func moveGlobalFlags(args []string) []string {
	var global []string
	for len(args) > 0 && (args[0] == "-json" || args[0] == "--json") {
		global, args = append(global, args[0]), args[1:]
	}
	if len(args) > 0 && len(global) > 0 {
		args = append(append([]string{args[0]}, global...), args[1:]...)
	}
	return args
}

// runCommand parses c's flags and arguments and runs it. CMD -h prints
// its help on stdout, as help CMD does.
func runCommand(c *command, args []string, stdout *outWriter, stderr io.Writer) int {
	e := &env{cmd: c.name, stdout: stdout, stderr: stderr}
	fs := newFlagSet(c, e)
	runner := c.setup(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, c)
		if stdout.err != nil {
			fmt.Fprintf(stderr, "inspect %s: %s\n", c.name, oneLine(outputError(stdout.err, nil).Error()))
			return exitUsage
		}
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "inspect %s: %s (see 'inspect %s -h')\n", c.name, oneLine(err.Error()), c.name)
		return exitUsage
	}
	if len(pos) < c.minArgs || (c.maxArgs >= 0 && len(pos) > c.maxArgs) {
		fmt.Fprintf(stderr, "inspect %s: usage: %s (see 'inspect %s -h')\n", c.name, strings.TrimSpace("inspect "+c.name+" "+c.args), c.name)
		return exitUsage
	}
	err = runner(e, pos)
	if stdout.err != nil {
		err = outputError(stdout.err, err)
	}
	if err == nil {
		return exitOK
	}
	var ee *cmdError
	if !(errors.As(err, &ee) && ee.silent) {
		msg := oneLine(err.Error())
		if errors.As(err, &ee) && ee.usage {
			msg += fmt.Sprintf(" (see 'inspect %s -h')", c.name)
		}
		fmt.Fprintf(stderr, "inspect %s: %s\n", c.name, msg)
	}
	return exitCode(err)
}

// newFlagSet returns the command's flag set: errors are returned, not
// printed (run prints one line), and every command takes --json.
func newFlagSet(c *command, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("inspect "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&e.json, "json", false, "print JSON instead of a human-readable table")
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses flags that may appear before, between or after
// the positional arguments, as `inspect ls DIR --json` expects. "--" ends
// the flags: everything after it is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, "; ")
}
