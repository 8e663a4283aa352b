package transport

// Nearest returns the candidate closest to s within an edit distance of 2
// (a typo of it: the first in order among the closest), or "".
func Nearest(s string, candidates []string) string {
	best, out := 3, ""
	for _, k := range candidates {
		if d := editDistance(s, k); d < best || d == best && k < out {
			best, out = d, k
		}
	}
	return out
}

// editDistance is the Damerau-Levenshtein (optimal string alignment)
// distance between two short strings.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
