package ptxsim

import (
	"fmt"
	"strings"
)

// Fault is an error found while running a kernel, located as
// compute-sanitizer does: the kernel, the instruction (source line and
// text), the CTA and thread, and the address when memory is involved.
type Fault struct {
	Kernel string
	Line   int    // source line of the PTX instruction
	Instr  string // its text
	CTA    [3]int
	Thread [3]int
	Warp   int // warp within the CTA
	Lane   int
	Addr   uint64 // address involved, if HasAddr
	// HasAddr says whether Addr is meaningful
	HasAddr bool
	// Kind classifies the fault: "memcheck" (out of bounds, misaligned),
	// "racecheck" (shared-memory hazard), "async" (cp.async misuse),
	// "sync" (warp-collective or barrier misuse), "wgmma" (a wgmma's
	// registers accessed while it is in flight, or written without a
	// wgmma.fence before it), "exec" (anything else).
	Kind string
	Msg  string
}

func (f *Fault) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "ptxsim: %s: @%s line %d `%s`: CTA (%d,%d,%d) thread (%d,%d,%d) (warp %d lane %d)",
		f.Kind, f.Kernel, f.Line, f.Instr, f.CTA[0], f.CTA[1], f.CTA[2], f.Thread[0], f.Thread[1], f.Thread[2], f.Warp, f.Lane)
	if f.HasAddr {
		fmt.Fprintf(&sb, " address %#x", f.Addr)
	}
	sb.WriteString(": ")
	sb.WriteString(f.Msg)
	return sb.String()
}
