package native

// FastPhases is the number of nk's phases with an unmasked row loop
// (fast.go).
func FastPhases(nk *Kernel) int { return nk.fast }

// SetFastRows makes kernels compiled from now on have unmasked row loops
// (on, the default) or not, and returns the previous setting.
func SetFastRows(on bool) (was bool) { return !noFastRows.Swap(!on) }

// ZmmPhases is the number of nk's phases whose unmasked row loop computes
// in zmm registers (fast.go: zmmOK).
func ZmmPhases(nk *Kernel) int { return nk.zmm }
