package explorer_test

import (
	"bytes"
	"cmp"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"slices"
)

// shrinkPNG re-encodes a screenshot with a palette of its 256 most used
// colours (channels rounded to multiples of 8): UI screenshots have few
// colours, and the README's PNGs come out about a third of the size.
func shrinkPNG(b []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	counts := map[color.RGBA]int{}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			counts[color.RGBA{uint8(r>>8) &^ 7, uint8(g>>8) &^ 7, uint8(b>>8) &^ 7, 255}]++
		}
	}
	type use struct {
		c color.RGBA
		n int
	}
	var all []use
	for c, n := range counts {
		all = append(all, use{c, n})
	}
	slices.SortFunc(all, func(a, b use) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(uint32(a.c.R)<<16|uint32(a.c.G)<<8|uint32(a.c.B), uint32(b.c.R)<<16|uint32(b.c.G)<<8|uint32(b.c.B))
	})
	var pal color.Palette
	for i := 0; i < len(all) && i < 256; i++ {
		pal = append(pal, all[i].c)
	}
	p := image.NewPaletted(bd, pal)
	draw.Draw(p, bd, img, bd.Min, draw.Src)
	var out bytes.Buffer
	err = (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, p)
	return out.Bytes(), err
}
