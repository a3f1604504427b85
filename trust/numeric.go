package trust

import "math"

// Numbers in this package must come out bit-identical on every CPU. Go may
// fuse x*y + z into one FMA instruction (arm64, ppc64, s390x, riscv64, amd64
// v3), which rounds once instead of twice; an explicit float64(...)
// conversion forbids that fusion. Every product that feeds a sum below is
// wrapped that way. math.Exp has per-architecture assembly, so detExp is a
// port of Go's portable exp with the same guards; math.Sqrt, math.Round and
// math.Ldexp are exact on every platform.

const (
	secondsPerDay   = 86400
	halfLifeDays    = 30
	roundScale      = 1e6
	microsPerWeight = 1_000_000
)

// decay returns exp(−ln2 × age_days / 30) with age_days =
// max(0, ageSeconds/86400): 1 for a fresh vote, 0.5 at 30 days.
func decay(ageSeconds int64) float64 {
	if ageSeconds <= 0 {
		return 1
	}
	days := float64(ageSeconds) / secondsPerDay
	return detExp(float64(-math.Ln2*days) / halfLifeDays)
}

// round6 rounds x to 6 decimals (math.Round(x*1e6)/1e6), with −0 as 0.
func round6(x float64) float64 {
	r := math.Round(x*roundScale) / roundScale
	if r == 0 {
		return 0
	}
	return r
}

// micros returns x (already rounded to 6 decimals) as an integer count of
// millionths.
func micros(x float64) int64 { return int64(math.Round(x * roundScale)) }

// fromMicros is the inverse of micros.
func fromMicros(m int64) float64 { return float64(m) / roundScale }

// detExp returns e**x, computed as Go's portable math.exp (FreeBSD e_exp.c)
// with every multiply-add kept unfused.
func detExp(x float64) float64 {
	const (
		ln2Hi     = 6.93147180369123816490e-01
		ln2Lo     = 1.90821492927058770002e-10
		log2e     = 1.44269504088896338700e+00
		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)
	)
	switch {
	case math.IsNaN(x):
		return x
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	var k int
	switch {
	case x < 0:
		k = int(float64(log2e*x) - 0.5)
	case x > 0:
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(k) * ln2Lo
	return expMulti(hi, lo, k)
}

// expMulti returns e**r × 2**k where r = hi − lo and |r| ≤ ln(2)/2.
func expMulti(hi, lo float64, k int) float64 {
	const (
		p1 = 1.66666666666666657415e-01
		p2 = -2.77777777770155933842e-03
		p3 = 6.61375632143793436117e-05
		p4 = -1.65339022054652515390e-06
		p5 = 4.13813679705723846039e-08
	)
	r := hi - lo
	t := float64(r * r)
	poly := p4 + float64(t*p5)
	poly = p3 + float64(t*poly)
	poly = p2 + float64(t*poly)
	poly = p1 + float64(t*poly)
	c := r - float64(t*poly)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return math.Ldexp(y, k)
}
