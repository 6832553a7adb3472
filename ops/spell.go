package ops

import (
	"strings"

	G "gorgonia.org/gorgonia"
)

// How Gorgonia spells its ops. Its op types are unexported, so an op is
// known from outside by its String() ("+ false", "exp", "A × B", "Σ[1]",
// "Softmax{-1, false}()", "const 0", "SizeOf=4", …) and, where the string
// does not say enough, by reflection on its fields (classify.go). This file
// and the kinds table hold every spelling; no other package reads an op's
// String().

func prefix(p string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, p) }
}

func isConstSpelling(s string) bool  { return strings.HasPrefix(s, "const ") }
func isSizeOfSpelling(s string) bool { return strings.HasPrefix(s, "SizeOf") }

// isBinarySpelling: "<symbol> <retSame>", as "+ false" or "< true" (and
// not "const true").
func isBinarySpelling(s string) bool {
	return !isConstSpelling(s) && (strings.HasSuffix(s, " false") || strings.HasSuffix(s, " true"))
}

func isMatMulSpelling(s string) bool {
	return s == "A × B" || s == "Aᵀ × B" || s == "A × Bᵀ" || s == "Aᵀ × Bᵀ"
}

func isBatchedSpelling(s string) bool {
	return s == "A ××× B" || s == "Aᵀ ××× B" || s == "A ××× Bᵀ" || s == "Aᵀ ××× Bᵀ"
}

// isIncrSpelling: a slice's backward, T[…]+=…
func isIncrSpelling(s string) bool { return strings.HasSuffix(s, "+=...") }

const (
	setSpelling  = "=" // gorgonia.Set
	readSpelling = "print"
)

// Spelled classifies an op by its String, for a caller that has it
// already: Gorgonia's Set and Read statements, and a constant's op
// (IsSet, ReadTarget's test, IsConst).
func Spelled(s string) (set, read, constant bool) {
	return s == setSpelling, s == readSpelling, isConstSpelling(s)
}

// IsConst reports whether op is a Gorgonia constant's ("const …"; not
// SizeOf, which Classify also calls a Constant).
func IsConst(op G.Op) bool { return op != nil && isConstSpelling(op.String()) }

// IsSizeOf reports whether op is Gorgonia's SizeOf (a dimension of its
// operand as a scalar).
func IsSizeOf(op G.Op) bool { return op != nil && isSizeOfSpelling(op.String()) }

// IsMatMul reports whether op is Gorgonia's matrix product (Mul of two
// matrices), in any transposition.
func IsMatMul(op G.Op) bool { return op != nil && isMatMulSpelling(op.String()) }

// IsSet reports whether op is the statement gorgonia.Set.
func IsSet(op G.Op) bool { return op != nil && op.String() == setSpelling }

// IsStatement reports whether op is one of Gorgonia's statements
// (gorgonia.Set, gorgonia.Read), which its compiler recognises by type and
// which have no value type.
func IsStatement(op G.Op) bool {
	return op != nil && (op.String() == setSpelling || op.String() == readSpelling)
}
