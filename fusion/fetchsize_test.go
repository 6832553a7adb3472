package fusion_test

import (
	"testing"

	"github.com/tilefuse/tilefuse/fusion"
)

// TestFetcherBytes: the CUDA backend's fetcher holds every readable value
// of a run up to 256 MiB (the BERT-base layer's training step reads 25 MB,
// which a 16 MiB fetcher made wait in the middle of its launches), at
// least 64 KiB.
func TestFetcherBytes(t *testing.T) {
	cases := []struct {
		name       string
		back, want int64
	}{
		{"a scalar loss", 256, 64 << 10},
		{"the encoder's training step, large", 2 << 20, 2 << 20},
		{"the BERT layer's training step", 25165832, 25165832},
		{"every gradient of the BERT layer", 53505032, 53505032},
		{"beyond the cap", 1 << 30, 256 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fusion.FetcherBytes(c.back); got != c.want {
				t.Fatalf("fetcherBytes(%d) = %d, want %d", c.back, got, c.want)
			}
		})
	}
}
