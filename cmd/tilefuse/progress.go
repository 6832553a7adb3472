package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports the bench's steps on stderr: a bar on a terminal, one
// line a step elsewhere, nothing with -q.
type progress interface {
	step(what string) // a step starts (and the one before it is done)
	finish()          // the last step is done
	abort()           // the run failed
}

func newProgress(w io.Writer, total int, quiet bool) progress {
	switch {
	case quiet:
		return silent{}
	case isTerminal(w):
		return newBar(w, total)
	}
	return &lines{w: w, total: total}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type silent struct{}

func (silent) step(string) {}
func (silent) finish()     {}
func (silent) abort()      {}

// lines writes "[k/N] what" as step k of N starts: for logs and pipes.
type lines struct {
	w           io.Writer
	done, total int
}

func (l *lines) step(what string) {
	l.done++
	fmt.Fprintf(l.w, "[%d/%d] %s\n", l.done, l.total, what)
}

func (l *lines) finish() { fmt.Fprintf(l.w, "[%d/%d] done\n", l.done, l.total) }
func (l *lines) abort()  {}

// bar is a terminal progress bar (github.com/schollz/progressbar) that
// counts finished steps and names the one running.
type bar struct {
	b       *progressbar.ProgressBar
	started bool
}

func newBar(w io.Writer, total int) *bar {
	return &bar{b: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)}
}

func (b *bar) step(what string) {
	if b.started {
		b.b.Add(1)
	}
	b.started = true
	b.b.Describe(fmt.Sprintf("%-28s", what)) // a steady width: the bar does not move
}

func (b *bar) finish() {
	b.b.Describe(fmt.Sprintf("%-28s", "done"))
	b.b.Finish()
}

func (b *bar) abort() { b.b.Exit() } // a newline, the bar as it was
