package tile

import "testing"

// TestSplitBroadcast: the shape a broadcast's operand is reshaped to when
// the broadcast's reshape only splits dimensions (SinkReshapes), and none
// where the reshape merges or regroups across dimensions.
func TestSplitBroadcast(t *testing.T) {
	for _, c := range []struct {
		name     string
		y, s, to Shape
		want     Shape
		ok       bool
	}{
		{"a row's max, the rows split", Shp(16, 1), Shp(16, 8), Shp(4, 4, 8), Shp(4, 4, 1), true},
		{"a column's max, the columns split", Shp(1, 8), Shp(16, 8), Shp(16, 2, 4), Shp(1, 2, 4), true},
		{"a broadcast dimension split", Shp(16, 1), Shp(16, 8), Shp(16, 2, 4), Shp(16, 1, 1), true},
		{"a dimension of one inserted", Shp(16, 1), Shp(16, 8), Shp(1, 16, 8), Shp(1, 16, 1), true},
		{"a dimension of one dropped", Shp(1, 16, 1), Shp(1, 16, 8), Shp(16, 2, 4), Shp(16, 1, 1), true},
		{"rows merged", Shp(16, 1), Shp(16, 8), Shp(128), Shape{}, false},
		{"regrouped across dimensions", Shp(16, 1), Shp(16, 8), Shp(8, 16), Shape{}, false},
		{"a split that does not divide", Shp(4, 1), Shp(4, 96), Shp(4, 64, 1), Shape{}, false},
	} {
		got, ok := splitBroadcast(c.y, c.s, c.to)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("%s: splitBroadcast(%v, %v, %v) = %v, %v; want %v, %v", c.name, c.y, c.s, c.to, got, ok, c.want, c.ok)
		}
	}
}
