package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// The overview (inspect help, -h) and each command's help (inspect help
// CMD, inspect CMD -h), all on stdout with exit status 0.

const overview = `inspect looks inside a filterstore store directory, or a lone filter file,
without writing anything. It is safe to run while the owning process is
writing: the catalog is read with bbolt's read-only mode (shared lock,
bounded wait), filter files through read-only mappings, WAL segments
with plain reads. It never takes the writer lock.

Usage:

  inspect COMMAND [flags] ARGS...

Commands:
%s
Every command takes --json for scripts and -h for its own help (the same
as 'inspect help COMMAND', on stdout); flags may come before or after
the arguments.

Exit status: 0 success (verify: clean); 1 the data is corrupt (verify:
problems found, each listed with its file and offset); 2 usage error, or
something could not be read (missing directory, not a store, unknown
filter, I/O error).

Examples:

  go run ./cmd/demo -dir /tmp/fsdemo -keep
  inspect ls /tmp/fsdemo
  inspect info /tmp/fsdemo demo
  inspect check /tmp/fsdemo demo hello world
  inspect verify /tmp/fsdemo
  inspect wal /tmp/fsdemo --dump
  inspect file /tmp/fsdemo/filters/1-0.flt
  inspect stats /tmp/fsdemo demo --png /tmp/demo.png
  inspect version
`

func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		var b strings.Builder
		for _, c := range commands() {
			fmt.Fprintf(&b, "  %-7s %s\n", c.name, c.short)
		}
		fmt.Fprintf(stdout, overview, b.String())
		return exitOK
	}
	if len(args) > 1 {
		fmt.Fprintln(stderr, "inspect help: usage: inspect help [COMMAND]")
		return exitUsage
	}
	if args[0] == "help" {
		return runHelp(nil, stdout, stderr) // 'inspect help help': the overview, which says what help does
	}
	c := findCommand(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "inspect help: unknown command %q; run 'inspect help' for the list\n", oneLine(args[0]))
		return exitUsage
	}
	printCommandHelp(stdout, c)
	return exitOK
}

// printCommandHelp prints a command's synopsis, description and flags.
func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "%s\n\n%s\n", strings.TrimSpace("Usage: inspect "+c.name+" [flags] "+c.args), strings.TrimSpace(c.long))
	fs := flag.NewFlagSet("inspect "+c.name, flag.ContinueOnError)
	fs.Bool("json", false, "print JSON instead of a human-readable table")
	c.setup(fs)
	fmt.Fprintf(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}
