package cuda

import "testing"

func TestCarveoutFor(t *testing.T) {
	const h200 = 233472 // 228 KiB a SM, 1 KiB reserved a CTA
	for _, c := range []struct {
		name                            string
		blocks, shared, reserved, perSM int
		want                            int
	}{
		{"row kernel, 7 CTAs of 64 B", 7, 64, 1024, h200, 4},
		{"elementwise, 16 CTAs, no shared memory", 16, 0, 1024, h200, 8},
		{"product, one CTA of 192 KiB", 1, 192 << 10, 1024, h200, 85},
		{"two CTAs of 112 KiB fill it", 2, 112 << 10, 1024, h200, 100},
		{"more than the SM has stays at 100", 3, 112 << 10, 1024, h200, 100},
		{"just under 3% is 3", 1, 7004, 0, h200, 3},
		{"just over 3% is 4", 1, 7005, 0, h200, 4},
		{"nothing at all", 4, 0, 0, h200, 0},
		{"no occupancy known", 0, 64, 1024, h200, -1},
		{"no shared memory on the device", 4, 64, 1024, 0, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := carveoutFor(c.blocks, c.shared, c.reserved, c.perSM); got != c.want {
				t.Errorf("carveoutFor(%d, %d, %d, %d) = %d, want %d", c.blocks, c.shared, c.reserved, c.perSM, got, c.want)
			}
		})
	}
}

func TestCarveoutSetting(t *testing.T) {
	for _, c := range []struct {
		in      string
		auto    bool
		pct     int
		wantErr bool
	}{
		{"", false, -1, false},
		{"auto", true, 0, false},
		{"-1", false, -1, false},
		{"0", false, 0, false},
		{"100", false, 100, false},
		{"101", false, 0, true},
		{"-2", false, 0, true},
		{"max", false, 0, true},
	} {
		t.Run(c.in, func(t *testing.T) {
			auto, pct, err := carveoutSetting(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("carveoutSetting(%q) error %v, want error %v", c.in, err, c.wantErr)
			}
			if err == nil && (auto != c.auto || pct != c.pct) {
				t.Errorf("carveoutSetting(%q) = %v, %d, want %v, %d", c.in, auto, pct, c.auto, c.pct)
			}
		})
	}
}
