package main

import (
	"bufio"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/user"
)

// readmeBlock returns the fenced code block that follows the marker line in
// the repository's README.md.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), marker+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", marker)
	}
	fence, body, ok := strings.Cut(after, "\n")
	if !ok || !strings.HasPrefix(fence, "```") {
		t.Fatalf("README.md: %q is not followed by a fenced block", marker)
	}
	body, _, ok = strings.Cut(body, "\n```")
	if !ok {
		t.Fatalf("README.md: the block after %q is not closed", marker)
	}
	return body
}

// pythonWithNumPy returns a python3 that imports numpy, or skips the test.
func pythonWithNumPy(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		tried = append(tried, path)
		if exec.Command(path, "-c", "import numpy").Run() == nil {
			return path
		}
	}
	t.Skipf("no python3 with NumPy (tried %v): `apt-get install python3-numpy` to run the README's Python example", tried)
	return ""
}

// TestReadmePython runs the README's Python example on the output directory
// of a real simulated job and checks what it prints against the job's
// result document.
func TestReadmePython(t *testing.T) {
	snippet := readmeBlock(t, "<!-- tested by cmd/fedpca/readme_test.go: python -->")
	python := pythonWithNumPy(t)
	dir := t.TempDir()
	sim := exec.Command(binary, "simulate", "--dataset", "wine", "--owners", "3", "--analysis", "pca", "--k", "3", "--insecure",
		"--out", filepath.Join(dir, "out"), "--plots", filepath.Join(dir, "plots"))
	if out, err := sim.CombinedOutput(); err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	res, err := user.LoadResult(filepath.Join(dir, "out", user.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"wine-pca-scree.svg", "wine-pca-scree.png", "wine-pca-scatter.svg", "wine-pca-scatter.png"} {
		if fi, err := os.Stat(filepath.Join(dir, "plots", f)); err != nil || fi.Size() == 0 {
			t.Errorf("simulate --plots: %s: %v", f, err)
		}
	}

	py := exec.Command(python, "-c", snippet)
	py.Dir = dir
	out, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Python example failed: %v\n%s", err, out)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			got[k] = v
		}
	}
	c := res.Components
	if got["components"] != "(13, 3)" {
		t.Errorf("components shape %q, want (13, 3)\n%s", got["components"], out)
	}
	vals := strings.Fields(got["eigenvalues"])
	if len(vals) != len(c.Eigenvalues) {
		t.Fatalf("eigenvalues %q, want %v", got["eigenvalues"], c.Eigenvalues)
	}
	for i, s := range vals {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Abs(v-c.Eigenvalues[i]) > 1e-5*math.Abs(c.Eigenvalues[i]) {
			t.Errorf("eigenvalue %d printed %q, result.json has %v", i+1, s, c.Eigenvalues[i])
		}
	}
	top, best := 0, 0.0
	for i := range c.Mean {
		if a := math.Abs(c.W.At(i, 0)); a > best {
			top, best = i, a
		}
	}
	if got["top feature of component 1"] != res.Features[top] {
		t.Errorf("top feature %q, want %q", got["top feature of component 1"], res.Features[top])
	}
}

// TestReadmeLinks: the README works in a clone: every relative link and
// image is a file of the repository, none points outside it (../shared
// once did), and its walkthrough block is where scripts/walkthrough.sh
// looks for it.
func TestReadmeLinks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if strings.Contains(readme, "../") {
		t.Error("README.md names a path outside the repository (../)")
	}
	links := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)|src="([^"]+)"`)
	for _, m := range links.FindAllStringSubmatch(readme, -1) {
		target := m[1] + m[3]
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", "..", target)); err != nil {
			t.Errorf("README.md links %s, which is not in the repository", target)
		}
	}
	block := readmeBlock(t, "<!-- walkthrough: scripts/walkthrough.sh runs this block as written -->")
	for _, want := range []string{"fedpca dataset export", "fedpca user run", "--out out/"} {
		if !strings.Contains(block, want) {
			t.Errorf("the walkthrough lacks %q", want)
		}
	}
}
