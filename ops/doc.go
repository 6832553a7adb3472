// Package ops is tilefuse's catalogue of Gorgonia operations: it recognises
// each op of a Gorgonia graph from outside Gorgonia (its op types are
// unexported: by String() and, where needed, reflection on its fields),
// says what kind of op it is, and writes the elementwise and injective ones
// in tile IR. Ops it does not know are Opaque: they run as Gorgonia runs
// them, and the fusion report says why.
//
// The kinds are one table (kind.go), indexed by Kind and sized by the end
// sentinel numKinds: how Gorgonia spells a kind's ops, how a node of it is
// read (Classify), its properties (Elementwise, Injective, Product, Row) and
// how it is written (Write). Spellings live in spell.go; ops is the only
// package that reads an op's String() (IsConst, IsMatMul, IsSet, … for the
// others).
package ops
