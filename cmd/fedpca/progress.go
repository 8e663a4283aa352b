package main

import (
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// stderrIsTerminal says whether progress displays should be drawn.
func stderrIsTerminal() bool {
	return isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())
}

// progress draws a long operation on stderr when it is a terminal and stays
// quiet otherwise (logs, pipes, CI). A nil *progress draws nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress counts to total; total -1 draws a spinner for work of unknown
// length.
func newProgress(total int, what string) *progress {
	visible := stderrIsTerminal()
	opts := []progressbar.Option{progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetVisibility(visible),
		progressbar.OptionSetDescription(what), progressbar.OptionSetElapsedTime(true), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100 * time.Millisecond), progressbar.OptionSetRenderBlankState(visible)}
	if total > 0 {
		opts = append(opts, progressbar.OptionShowCount())
	}
	return &progress{bar: progressbar.NewOptions(total, opts...)}
}

// job follows a job's status: the bar counts the owners' uploads out of
// those expected, the description says the phase (uploads, key switch).
func (p *progress) job(s *fedpcav1.JobStatus) {
	if p == nil {
		return
	}
	if n := int(s.GetOwnersExpected()); n > 0 && int64(n) != p.bar.GetMax64() {
		p.bar.ChangeMax(n)
	}
	switch s.GetState() {
	case fedpcav1.JobState_JOB_STATE_OPEN:
		p.bar.Describe("uploads   ")
	case fedpcav1.JobState_JOB_STATE_SWITCHING:
		p.bar.Describe("key switch")
	case fedpcav1.JobState_JOB_STATE_DONE:
		p.bar.Describe("done      ")
	case fedpcav1.JobState_JOB_STATE_FAILED:
		p.bar.Describe("failed    ")
	}
	_ = p.bar.Set(int(s.GetOwnersUploaded()))
}

// done removes the display.
func (p *progress) done() {
	if p == nil {
		return
	}
	_ = p.bar.Finish()
	_ = p.bar.Exit()
}
