// Package ops is tilefuse's catalogue of Gorgonia operations: it recognises
// each op of a Gorgonia graph from outside Gorgonia (its op types are
// unexported: by String() and, where needed, reflection on its fields),
// says what kind of op it is, and writes it in tile IR. Ops it does not know
// are Opaque: they run as Gorgonia runs them, and the fusion report says why.
package ops
