package testenv

import (
	"os/exec"
	"syscall"
	"time"
)

// Proc is a child process a test started: reaped in the background, and
// on Linux killed by the kernel if the test binary dies (a -timeout panic
// skips every Cleanup).
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProc starts cmd (setting its SysProcAttr when unset) and reaps it
// in the background.
func StartProc(cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = SysProcAttr()
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error; valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Exited reports whether the process has been reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits until the process is reaped.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Stop asks for a clean shutdown (SIGTERM) and kills the process if it
// still runs after grace. Stopping a reaped process is a no-op.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
	}
}
