package sigverify

import "filippo.io/edwards25519/field"

// The point arithmetic of the table path. Points are on edwards25519,
// −x² + y² = 1 + d·x²·y², in the coordinates of Hisil, Wong, Carter and
// Dawson, "Twisted Edwards Curves Revisited" (2008), which
// filippo.io/edwards25519 also uses inside. Its exported Point converts
// the second operand of every Add to a cached form and checks both
// operands are initialised; here table entries are stored converted once
// (affine), and the accumulator is a plain struct. The formulas are
// complete (d is not a square): they hold for equal points, opposite
// points and the identity alike, so no case needs special handling.

// extended is (X:Y:Z:T) with x = X/Z, y = Y/Z and x·y = T/Z.
type extended struct{ X, Y, Z, T field.Element }

// projective is (X:Y:Z) with x = X/Z and y = Y/Z: what doubling reads.
type projective struct{ X, Y, Z field.Element }

// completed is ((X:Z), (Y:T)) with x = X/Z and y = Y/T: what additions and
// doublings produce, before the multiplications that bring it back to
// extended (four) or projective (three) coordinates.
type completed struct{ X, Y, Z, T field.Element }

// cached is a point prepared as the second operand of an addition:
// (Y+X, Y−X, Z, 2d·T). Table building uses it.
type cached struct{ YplusX, YminusX, Z, T2d field.Element }

// affine is cached with Z = 1: (y+x, y−x, 2d·x·y). Table entries are kept
// this way: 120 bytes, and adding one takes three multiplications (plus
// four to bring the sum back to extended coordinates).
type affine struct{ YplusX, YminusX, T2d field.Element }

// d2 is 2d, where d = −121665/121666 is the curve constant.
var d2 = func() *field.Element {
	d, err := new(field.Element).SetBytes([]byte{
		0xa3, 0x78, 0x59, 0x13, 0xca, 0x4d, 0xeb, 0x75,
		0xab, 0xd8, 0x41, 0x41, 0x4d, 0x0a, 0x70, 0x00,
		0x98, 0xe8, 0x79, 0x77, 0x79, 0x40, 0xc7, 0x8c,
		0x73, 0xfe, 0x6f, 0x2b, 0xee, 0x6c, 0x03, 0x52})
	if err != nil {
		panic(err)
	}
	return d.Add(d, d)
}()

// identity sets v to the neutral point (0:1:1:0).
func (v *extended) identity() *extended {
	v.X.Zero()
	v.Y.One()
	v.Z.One()
	v.T.Zero()
	return v
}

// fromCompleted sets v to p in extended coordinates.
func (v *extended) fromCompleted(p *completed) *extended {
	v.X.Multiply(&p.X, &p.T)
	v.Y.Multiply(&p.Y, &p.Z)
	v.Z.Multiply(&p.Z, &p.T)
	v.T.Multiply(&p.X, &p.Y)
	return v
}

// fromCompleted sets v to p in projective coordinates, without T.
func (v *projective) fromCompleted(p *completed) *projective {
	v.X.Multiply(&p.X, &p.T)
	v.Y.Multiply(&p.Y, &p.Z)
	v.Z.Multiply(&p.Z, &p.T)
	return v
}

// fromExtended sets v to p, dropping T.
func (v *projective) fromExtended(p *extended) *projective {
	v.X = p.X
	v.Y = p.Y
	v.Z = p.Z
	return v
}

// fromExtended sets v to p prepared for additions.
func (v *cached) fromExtended(p *extended) *cached {
	v.YplusX.Add(&p.Y, &p.X)
	v.YminusX.Subtract(&p.Y, &p.X)
	v.Z = p.Z
	v.T2d.Multiply(&p.T, d2)
	return v
}

// fromExtended sets v to p in affine form, given zInv = 1/Z.
func (v *affine) fromExtended(p *extended, zInv *field.Element) *affine {
	v.YplusX.Add(&p.Y, &p.X)
	v.YplusX.Multiply(&v.YplusX, zInv)
	v.YminusX.Subtract(&p.Y, &p.X)
	v.YminusX.Multiply(&v.YminusX, zInv)
	v.T2d.Multiply(&p.T, zInv)
	v.T2d.Multiply(&v.T2d, d2)
	return v
}

// add sets v = p + q ("add-2008-hwcd-3" with k = 2d, a = −1).
func (v *completed) add(p *extended, q *cached) *completed {
	var ypx, ymx, pp, mm, tt2d, zz2 field.Element
	ypx.Add(&p.Y, &p.X)
	ymx.Subtract(&p.Y, &p.X)
	pp.Multiply(&ypx, &q.YplusX)
	mm.Multiply(&ymx, &q.YminusX)
	tt2d.Multiply(&p.T, &q.T2d)
	zz2.Multiply(&p.Z, &q.Z)
	zz2.Add(&zz2, &zz2)
	v.X.Subtract(&pp, &mm)
	v.Y.Add(&pp, &mm)
	v.Z.Add(&zz2, &tt2d)
	v.T.Subtract(&zz2, &tt2d)
	return v
}

// addAffine sets v = p + q: add with q's Z = 1, one multiplication fewer.
func (v *completed) addAffine(p *extended, q *affine) *completed {
	var ypx, ymx, pp, mm, tt2d, z2 field.Element
	ypx.Add(&p.Y, &p.X)
	ymx.Subtract(&p.Y, &p.X)
	pp.Multiply(&ypx, &q.YplusX)
	mm.Multiply(&ymx, &q.YminusX)
	tt2d.Multiply(&p.T, &q.T2d)
	z2.Add(&p.Z, &p.Z)
	v.X.Subtract(&pp, &mm)
	v.Y.Add(&pp, &mm)
	v.Z.Add(&z2, &tt2d)
	v.T.Subtract(&z2, &tt2d)
	return v
}

// subAffine sets v = p − q. Negating q swaps y+x with y−x and negates
// 2d·x·y, so this is addAffine with those swapped and signs flipped.
func (v *completed) subAffine(p *extended, q *affine) *completed {
	var ypx, ymx, pp, mm, tt2d, z2 field.Element
	ypx.Add(&p.Y, &p.X)
	ymx.Subtract(&p.Y, &p.X)
	pp.Multiply(&ypx, &q.YminusX)
	mm.Multiply(&ymx, &q.YplusX)
	tt2d.Multiply(&p.T, &q.T2d)
	z2.Add(&p.Z, &p.Z)
	v.X.Subtract(&pp, &mm)
	v.Y.Add(&pp, &mm)
	v.Z.Subtract(&z2, &tt2d)
	v.T.Add(&z2, &tt2d)
	return v
}

// double sets v = 2p ("dbl-2008-hwcd" with a = −1): four squarings.
func (v *completed) double(p *projective) *completed {
	var xx, yy, zz2, xpy2 field.Element
	xx.Square(&p.X)
	yy.Square(&p.Y)
	zz2.Square(&p.Z)
	zz2.Add(&zz2, &zz2)
	xpy2.Add(&p.X, &p.Y)
	xpy2.Square(&xpy2)
	v.Y.Add(&yy, &xx)
	v.Z.Subtract(&yy, &xx)
	v.X.Subtract(&xpy2, &v.Y)
	v.T.Subtract(&zz2, &v.Z)
	return v
}

// doubleN sets v to 2ⁿ·v, n ≥ 1.
func (v *extended) doubleN(n int) *extended {
	var p projective
	var c completed
	p.fromExtended(v)
	for i := range n {
		c.double(&p)
		if i < n-1 {
			p.fromCompleted(&c)
		}
	}
	return v.fromCompleted(&c)
}

// addDigit sets v = v + d·row[|d|−1], where row holds the multiples 1..len(row)
// of a point, d in [−len(row), len(row)]; nothing when d is 0.
func (v *extended) addDigit(row []affine, d int) {
	var c completed
	switch {
	case d > 0:
		c.addAffine(v, &row[d-1])
	case d < 0:
		c.subAffine(v, &row[-d-1])
	default:
		return
	}
	v.fromCompleted(&c)
}

// multiples fills out with j·256^i·p for j = 1..n at out[n·i + j − 1], for
// every row i that fits; n is a power of two up to 256. The multiples are
// computed in extended coordinates in pts (scratch, as long as out) and
// brought to affine form together, with a single inversion.
func multiples(out []affine, pts []extended, p *extended, n int) {
	base := *p
	for i := 0; i < len(out)/n; i++ {
		row := pts[n*i : n*i+n]
		var bc cached
		var c completed
		bc.fromExtended(&base)
		row[0] = base
		for j := 1; j < n; j++ {
			row[j].fromCompleted(c.add(&row[j-1], &bc))
		}
		if i < len(out)/n-1 {
			// 256·base = (256/n)·(n·base).
			base = row[n-1]
			if k := doublings(256 / n); k > 0 {
				base.doubleN(k)
			}
		}
	}
	normalize(out, pts)
}

// doublings returns log2(m) for a power of two m.
func doublings(m int) (k int) {
	for ; m > 1; m >>= 1 {
		k++
	}
	return k
}

// normalize sets out[i] to pts[i] in affine form. It inverts the product
// of all the Z (Montgomery's trick: three multiplications per point and
// one inversion instead of an inversion per point). No Z is 0: the
// formulas are complete and every point is on the curve.
func normalize(out []affine, pts []extended) {
	// out[i].T2d holds Z₀·…·Z_{i−1} until out[i] is set.
	var acc field.Element
	acc.One()
	for i := range pts {
		out[i].T2d = acc
		acc.Multiply(&acc, &pts[i].Z)
	}
	acc.Invert(&acc) // 1/(Z₀·…·Z_{n−1})
	for i := len(pts) - 1; i >= 0; i-- {
		var zInv field.Element
		zInv.Multiply(&acc, &out[i].T2d) // 1/Zᵢ
		acc.Multiply(&acc, &pts[i].Z)    // 1/(Z₀·…·Z_{i−1})
		out[i].fromExtended(&pts[i], &zInv)
	}
}
