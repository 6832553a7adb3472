package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/tilefuse/tilefuse/tile"
)

// TestIntDivRem: integer div and rem on the interpreter, fast path (one
// power-of-two divisor, non-negative dividends) and general path alike,
// against Go's truncated division, with the defined x/0 = -1, x%0 = x.
func TestIntDivRem(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name    string
		divisor func(i int) int32
		neg     bool
	}{
		{"uniform power of two", func(int) int32 { return 64 }, false},
		{"uniform one", func(int) int32 { return 1 }, false},
		{"uniform power of two, negative dividends", func(int) int32 { return 16 }, true},
		{"uniform non-power of two", func(int) int32 { return 781 }, false},
		{"mixed powers of two", func(i int) int32 { return int32(1) << (i % 5) }, false},
		{"zero divisor", func(int) int32 { return 0 }, false},
		{"negative power of two", func(int) int32 { return -8 }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 1000
			a, b := make([]int32, n), make([]int32, n)
			for i := range a {
				a[i] = rng.Int32N(1 << 20)
				if c.neg && i%3 == 0 {
					a[i] = -a[i]
				}
				b[i] = c.divisor(i)
			}
			for _, op := range []tile.Op{tile.OpDiv, tile.OpRem} {
				in, err := binInt[int32](&tile.Value{Op: op}, 0, 1, 2)
				if err != nil {
					t.Fatal(err)
				}
				d := make([]int32, n)
				if err := in(&frame{vals: []any{d, a, b}}); err != nil {
					t.Fatal(err)
				}
				for i := range d {
					var want int32
					switch {
					case b[i] == 0 && op == tile.OpDiv:
						want = -1
					case b[i] == 0:
						want = a[i]
					case op == tile.OpDiv:
						want = a[i] / b[i]
					default:
						want = a[i] % b[i]
					}
					if d[i] != want {
						t.Fatalf("%v: %d, %d → %d, want %d", op, a[i], b[i], d[i], want)
					}
				}
			}
		})
	}
}
