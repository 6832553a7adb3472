package graphpass_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/tilefuse/tilefuse/codegen"
	. "github.com/tilefuse/tilefuse/graphpass"
	"github.com/tilefuse/tilefuse/tile"
)

// opLayerNormAffine is LayerNorm with γ and β, as the bench's workload
// writes it.
func opLayerNormAffine(x *G.Node) *G.Node {
	n := x.Shape()[1]
	gamma := G.NewVector(x.Graph(), tensor.Float32, G.WithShape(n), G.WithName("gamma"))
	beta := G.NewVector(x.Graph(), tensor.Float32, G.WithShape(n), G.WithName("beta"))
	mu := G.Must(G.Mean(x, 1))
	xc := G.Must(G.BroadcastSub(x, mu, nil, []byte{1}))
	v := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(v, G.NewConstant(float32(1e-5))))))))
	y := G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	return G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(y, gamma, nil, []byte{0})), beta, nil, []byte{0}))
}

var (
	ptxasRegs  = regexp.MustCompile(`Used (\d+) registers`)
	ptxasSpill = regexp.MustCompile(`(\d+) bytes spill stores`)
)

// TestLateLoadsPTX: LayerNorm with γ and β held in one block on the H200
// (the heuristic's late_loads) loads γ and β inside its store, group by
// group (global loads after the first global store; none with late_loads
// off, where they are loaded whole before it), and ptxas 11.8 (sm_90),
// where installed (required under TILEFUSE_REQUIRE_PTXAS=1, as in CI),
// assembles both and, at the peer shapes, gives the late form fewer
// registers and spilled bytes (4 a register) than the whole one: 8192 wide
// at 16 warps 64 against 79, 32768 at 16 warps 32 B spilled against 2.4
// KB; 20000 and 3000 wide have masked tails (3000 at 8 warps: 60 against
// 56, no spills).
func TestLateLoadsPTX(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil && os.Getenv("TILEFUSE_REQUIRE_PTXAS") != "" {
		t.Fatalf("ptxas is required (TILEFUSE_REQUIRE_PTXAS is set) but not found: %v", err)
	}
	cases := []struct {
		rows, cols int
		fewer      bool // fewer registers and spills late than whole
	}{{8192, 4096, true}, {32768, 1024, true}, {1151, 8192, true}, {4096, 32768, true}, {3, 20000, true}, {5, 3000, false}}
	for _, c := range cases {
		sh := [2]int{c.rows, c.cols}
		t.Run(fmt.Sprintf("%dx%d", sh[0], sh[1]), func(t *testing.T) {
			g := G.NewGraph()
			opLayerNormAffine(G.NewTensor(g, tensor.Float32, 2, G.WithShape(sh[0], sh[1]), G.WithName("x")))
			gr, err := Import(g)
			if err != nil {
				t.Fatal(err)
			}
			groups := Partition(gr, Options{Target: H200})
			if len(groups) != 1 {
				t.Fatalf("%d groups, want 1", len(groups))
			}
			var def tile.Meta // the default, or the first candidate with late loads where the default walks the row
			for _, m := range Candidates(groups[0], H200, tile.PrecIEEE) {
				if m["late_loads"] != 0 {
					def = m
					break
				}
			}
			if def == nil {
				t.Fatal("no candidate with late_loads")
			}
			whole := maps.Clone(def)
			delete(whole, "late_loads")
			cost := map[string]int{}
			for _, m := range []tile.Meta{def, whole} {
				_, ck := compileH200(t, groups[0], m)
				first := strings.Index(ck.PTX, "st.global")
				if first < 0 {
					t.Fatalf("%v: no global store", m)
				}
				// late: loads after the first store where the store has more
				// groups than are issued ahead of it
				after, stores := strings.Count(ck.PTX[first:], "ld.global"), strings.Count(ck.PTX, "st.global")
				if d := m["late_loads"]; d > 0 && stores > d+1 && after == 0 || d == 0 && after > 0 {
					t.Errorf("%v: %d global loads after the first of %d global stores", m, after, stores)
				}
				if ptxas == "" {
					continue
				}
				regs, spill := ptxasUsage(t, ptxas, ck.PTX, m.String())
				cost[m.String()] = 4*regs + spill
				t.Logf("%v: %d registers, %d bytes spilled", m, regs, spill)
			}
			if ptxas == "" {
				t.Skip("ptxas not found: the kernels' structure is checked, not their registers")
			}
			if c.fewer && cost[def.String()] >= cost[whole.String()] {
				t.Errorf("late loads: %d bytes of registers and spills a thread, whole: %d", cost[def.String()], cost[whole.String()])
			}
		})
	}
}

// ptxasUsage assembles ptx for sm_90 with ptxas -v and returns its
// registers a thread and bytes spilled (what names the kernel in errors).
func ptxasUsage(t *testing.T, ptxas, ptx, what string) (regs, spill int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "k.ptx")
	if err := os.WriteFile(file, []byte(ptx), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ptxas, "-arch=sm_90", "-v", "-o", os.DevNull, file).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: ptxas: %v\n%s", what, err, out)
	}
	r, s := ptxasRegs.FindSubmatch(out), ptxasSpill.FindSubmatch(out)
	if r == nil || s == nil {
		t.Fatalf("%s: no register count in ptxas -v:\n%s", what, out)
	}
	regs, _ = strconv.Atoi(string(r[1]))
	spill, _ = strconv.Atoi(string(s[1]))
	return regs, spill
}

// compileH200 emits grp's kernel with meta m for the H200 and compiles it
// to PTX for sm_90, its pointers aligned as the launcher specialises them.
func compileH200(t *testing.T, grp *Group, m tile.Meta) (*Kernel, *codegen.Kernel) {
	t.Helper()
	k, err := Emit(grp, TuneTo(H200, m), tile.PrecIEEE)
	if err != nil {
		t.Fatal(err)
	}
	spec := make([]int, len(k.Tile.Params))
	for i, p := range k.Tile.Params {
		if p.Type.Ptr {
			spec[i] = 16 // as the launcher specialises aligned buffers
		}
	}
	ck, err := codegen.Compile(k.Tile, codegen.Options{Arch: 90, NumWarps: m["num_warps"], Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	return k, ck
}

// TestStreamHints: STREAM puts the streaming hint (ld/st.global.cs) on the
// row's loads and the stores (1), the loads alone (2) or the stores alone
// (3), in the one-row, rows-a-program, persistent and walked forms; γ and
// β are never streamed (they are read by every row); any other value is
// an error.
func TestStreamHints(t *testing.T) {
	count := func(re, ptx string) int { return len(regexp.MustCompile(re).FindAllString(ptx, -1)) }
	for _, c := range []struct {
		name       string
		rows, cols int
		ln         bool
		meta       tile.Meta
	}{
		{"softmax one row a program", 64, 4096, false, tile.Meta{"BLOCK": 4096, "num_warps": 4}},
		{"softmax rows a program", 64, 1024, false, tile.Meta{"BLOCK": 1024, "BLOCK_M": 2, "num_warps": 4}},
		{"softmax persistent", 300, 4096, false, tile.Meta{"BLOCK": 4096, "PERSIST": 2, "late_loads": 1, "num_warps": 4}},
		{"softmax walked", 8, 40000, false, tile.Meta{"CHUNK": 8192, "num_warps": 16}},
		{"LayerNorm with γ and β late", 64, 4096, true, tile.Meta{"BLOCK": 4096, "late_loads": 1, "num_warps": 4}},
	} {
		groups := []*Group{rowGroupH200(t, c.rows, c.cols, c.ln)}
		for stream := range 5 {
			t.Run(fmt.Sprintf("%s/STREAM=%d", c.name, stream), func(t *testing.T) {
				m := maps.Clone(c.meta)
				if stream > 0 { // absent: none
					m["STREAM"] = stream
				}
				if stream == 4 {
					if _, err := Emit(groups[0], TuneTo(H200, m), tile.PrecIEEE); err == nil || !strings.Contains(err.Error(), "STREAM = 4") {
						t.Fatalf("STREAM = 4: error %v, want one that names it", err)
					}
					return
				}
				_, ck := compileH200(t, groups[0], m)
				lds, sts := count(`ld\.global\.cs\.`, ck.PTX), count(`st\.global\.cs\.`, ck.PTX)
				plainSts := count(`st\.global\.(v[24]\.)?f32`, ck.PTX)
				wantLd, wantSt := stream == 1 || stream == 2, stream == 1 || stream == 3
				if (lds > 0) != wantLd || (sts > 0) != wantSt || (plainSts > 0) == wantSt {
					t.Errorf("%d ld.global.cs, %d st.global.cs, %d plain stores: want streamed loads %v, streamed stores %v", lds, sts, plainSts, wantLd, wantSt)
				}
				if c.ln && stream != 0 {
					// γ and β: loads without the hint beside the row's
					if plain := count(`ld\.global\.(nc\.)?(v[24]\.)?f32`, ck.PTX); plain == 0 {
						t.Errorf("no plain load: γ and β streamed too")
					}
				}
			})
		}
	}
}

// TestKeepHints: KEEP = 1 puts the keep hint (L1 evict_last, an L2
// evict_last policy made once by createpolicy) on the loads every row reads
// alike, LayerNorm's γ and β, in the one-row (late loads and whole),
// rows-a-program and persistent forms, never on the row's own loads there,
// nor on a softmax's (it reads only the row); in the walked form, as
// Inductor walks a row, on γ and β and the row's loads in the first pass,
// the last pass's row loads evict-first (streamed) whatever STREAM; with
// STREAM = 2 the row's loads stream and γ and β are kept; KEEP = 2 is an
// error; ptxas 11.8 (sm_90), where installed, assembles each kernel.
func TestKeepHints(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil && os.Getenv("TILEFUSE_REQUIRE_PTXAS") != "" {
		t.Fatalf("ptxas is required (TILEFUSE_REQUIRE_PTXAS is set) but not found: %v", err)
	}
	count := func(re, ptx string) int { return len(regexp.MustCompile(re).FindAllString(ptx, -1)) }
	const kept = `ld\.global\.L1::evict_last\.L2::cache_hint\.(v[24]\.)?f32 [^;]*\], %rd\d+;`
	for _, c := range []struct {
		name       string
		rows, cols int
		ln         bool
		meta       tile.Meta
		want       bool // γ and β kept
	}{
		{"LayerNorm late loads", 64, 4096, true, tile.Meta{"BLOCK": 4096, "late_loads": 1, "num_warps": 8}, true},
		{"LayerNorm whole", 64, 4096, true, tile.Meta{"BLOCK": 4096, "num_warps": 4}, true},
		{"LayerNorm rows a program, tail", 64, 1000, true, tile.Meta{"BLOCK": 1024, "BLOCK_M": 2, "num_warps": 4}, true},
		{"LayerNorm persistent", 300, 4096, true, tile.Meta{"BLOCK": 4096, "PERSIST": 2, "late_loads": 1, "num_warps": 8}, true},
		{"LayerNorm walked", 8, 40000, true, tile.Meta{"CHUNK": 8192, "num_warps": 16}, true},
		{"LayerNorm walked, rows of 4096", 64, 4096, true, tile.Meta{"CHUNK": 1024, "num_warps": 4}, true},
		{"softmax", 64, 4096, false, tile.Meta{"BLOCK": 4096, "num_warps": 4}, false},
	} {
		groups := []*Group{rowGroupH200(t, c.rows, c.cols, c.ln)}
		for _, v := range []struct {
			keep, stream int
		}{{0, 0}, {1, 0}, {1, 2}, {2, 0}} {
			t.Run(fmt.Sprintf("%s/KEEP=%d,STREAM=%d", c.name, v.keep, v.stream), func(t *testing.T) {
				m := maps.Clone(c.meta)
				for name, x := range map[string]int{"KEEP": v.keep, "STREAM": v.stream} {
					if x > 0 {
						m[name] = x
					}
				}
				if v.keep == 2 {
					if _, err := Emit(groups[0], TuneTo(H200, m), tile.PrecIEEE); err == nil || !strings.Contains(err.Error(), "KEEP = 2") {
						t.Fatalf("KEEP = 2: error %v, want one that names it", err)
					}
					return
				}
				k, ck := compileH200(t, groups[0], m)
				keeps, policies := count(kept, ck.PTX), count(`createpolicy\.fractional\.L2::evict_last\.b64 %rd\d+, 1\.0;`, ck.PTX)
				plain := count(`ld\.global\.(v[24]\.)?f32`, ck.PTX)
				streamed := count(`ld\.global\.cs\.`, ck.PTX)
				want := v.keep == 1 && c.want
				if (keeps > 0) != want || policies != min(keeps, 1) {
					t.Errorf("%d kept loads, %d policies: want kept loads %v, one policy where there are", keeps, policies, want)
				}
				if want && !strings.Contains(k.Tile.String(), "{cache = keep}") {
					t.Errorf("the tile IR does not show the hint:\n%v", k.Tile)
				}
				// the row itself: plain, or streamed with STREAM = 2; walked
				// and kept, the first pass kept and the last streamed
				walked := c.meta["CHUNK"] > 0
				switch {
				case walked && v.keep == 1:
					if plain != 0 || streamed == 0 || keeps <= streamed {
						t.Errorf("walked and kept: %d plain, %d streamed, %d kept loads; want none plain, the row's first pass and γ and β kept, its last pass streamed", plain, streamed, keeps)
					}
				case v.stream == 2 && streamed == 0 || v.stream == 0 && plain == 0:
					t.Errorf("the row's loads: %d plain, %d streamed (STREAM = %d)", plain, streamed, v.stream)
				}
				if ptxas != "" {
					ptxasUsage(t, ptxas, ck.PTX, m.String())
				}
			})
		}
	}
}

// rowGroupH200 is the one group of LayerNorm with γ and β (ln) or a
// softmax written op by op over a rows×cols x, partitioned for the H200.
func rowGroupH200(t *testing.T, rows, cols int, ln bool) *Group {
	t.Helper()
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(rows, cols), G.WithName("x"))
	if ln {
		opLayerNormAffine(x)
	} else {
		e := G.Must(G.Exp(G.Must(G.BroadcastSub(x, G.Must(G.Max(x, 1)), nil, []byte{1}))))
		G.Must(G.BroadcastHadamardDiv(e, G.Must(G.Sum(e, 1)), nil, []byte{1}))
	}
	gr, err := Import(g)
	if err != nil {
		t.Fatal(err)
	}
	groups := Partition(gr, Options{Target: H200})
	if len(groups) != 1 {
		t.Fatalf("%d×%d: %d groups, want 1", rows, cols, len(groups))
	}
	return groups[0]
}
