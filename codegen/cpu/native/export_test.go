package native

// SetDotRowsZ sets the rows of the zmm micro-kernel's block (for
// measuring the choice) and returns the previous value.
func SetDotRowsZ(r int) int { old := dotRowsZ; dotRowsZ = r; return old }
