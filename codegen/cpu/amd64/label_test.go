package amd64

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestLabels checks jumps (rel32 both ways) and RIP-relative constants
// (the displacement relative to the end of an instruction that has an
// immediate after it), with the pool aligned after the code. The bytes
// are worked out by hand in the comments.
func TestLabels(t *testing.T) {
	cases := []struct {
		name string
		emit func(a *Asm)
		hex  string
	}{
		{"forward jcc", func(a *Asm) {
			l := a.NewLabel()
			a.Jcc(CondE, l) // 0f 84 rel32: target 7 - end 6 = 1
			a.RET()
			a.Bind(l)
			a.RET()
		}, "0f8401000000c3c3"},
		{"backward jmp", func(a *Asm) {
			top := a.NewLabel()
			a.Bind(top)
			a.ADDQimm(RAX, 1) // 4 bytes
			a.JMP(top)        // e9 rel32: 0 - 9 = -9
		}, "4883c001e9f7ffffff"},
		{"rip constant after imm", func(a *Asm) {
			c := a.Data([]byte{1, 2, 3, 4}, 4)
			a.VCMPPS(1, 2, At(c), CmpLT) // c5 ec c2 0d disp32 11: 9 bytes, disp = 12 - 9
			a.RET()                      // code ends at 10, pool padded to 12 with int3
		}, "c5ecc20d0300000011c3cccc01020304"},
		{"rip constant with offset", func(a *Asm) {
			c := a.Data(make([]byte, 8), 8)
			a.VBROADCASTSS(0, At(c).Offset(4)) // c4 e2 7d 18 05 disp32: 9 bytes; the pool at 16: 16+4-9 = 11
		}, "c4e27d18050b000000" + "cccccccccccccc" + "0000000000000000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := hex.EncodeToString(encode(t, c.emit))
			if got != c.hex {
				t.Errorf("got %s, want %s", got, c.hex)
			}
		})
	}
}

// TestMisuse checks that mistakes are errors from Finish, not panics.
func TestMisuse(t *testing.T) {
	cases := []struct {
		name string
		emit func(a *Asm)
		want string
	}{
		{"unbound label", func(a *Asm) { a.JMP(a.NewLabel()) }, "never bound"},
		{"unknown label", func(a *Asm) { a.JMP(Label(7)) }, "unknown label"},
		{"bound twice", func(a *Asm) { l := a.NewLabel(); a.Bind(l); a.Bind(l) }, "bound twice"},
		{"rsp index", func(a *Asm) { a.MOVQload(RAX, PtrIdx(RAX, RSP, 4, 0)) }, "RSP cannot be an index"},
		{"bad scale", func(a *Asm) { a.MOVQload(RAX, PtrIdx(RAX, RCX, 3, 0)) }, "scale 3"},
		{"broadcast in a VEX instruction", func(a *Asm) { a.VADDPS(0, 1, Ptr(RAX, 0).Bcst()) }, "broadcast operand"},
		{"zmm register past 31", func(a *Asm) { a.VADDPSZ(32, 1, ZReg(2)) }, "vector register"},
		{"zmm r/m past 31", func(a *Asm) { a.VADDPSZ(0, 1, ZReg(40)) }, "vector register"},
		{"ymm r/m in an EVEX instruction", func(a *Asm) { a.VADDPSZ(0, 1, VReg(2)) }, "operand"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a Asm
			c.emit(&a)
			_, err := a.Finish()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
