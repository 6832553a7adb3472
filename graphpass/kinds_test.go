package graphpass

import "testing"

// TestGroupKindTable: every group kind has its entry (the table's type
// checks its length; this checks that none in the middle was left empty):
// a name, a way to form (a start or a claim), a join rule and an emit.
func TestGroupKindTable(t *testing.T) {
	names := map[string]bool{}
	for k := range numGroupKinds {
		p := groupKinds[k]
		t.Run(p.name, func(t *testing.T) {
			switch {
			case p.name == "" || names[p.name]:
				t.Fatalf("kind %d: name %q empty or taken", k, p.name)
			case p.start == nil && p.claim == nil && !p.byClaim:
				t.Fatalf("%v: no group of it can form", k)
			case p.join == nil || p.emit == nil:
				t.Fatalf("%v: join %v, emit %v", k, p.join != nil, p.emit != nil)
			}
			names[p.name] = true
		})
	}
	if s := numGroupKinds.String(); s != "group kind(12)" {
		t.Fatalf("the end sentinel prints %q", s)
	}
}
